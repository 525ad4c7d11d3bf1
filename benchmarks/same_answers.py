"""Do two trees give the same answers? Every answer a campaign's finish stores, with the
campaign's stored state, from the flow tests of each tree, compared.

    # the other revision unpacked in OTHER (git archive REV | tar -x -C OTHER), run from there
    # on this repository's .venv and this plugin (HERE: this repository):
    cd OTHER && ANSWER_DUMP=/tmp/a.jsonl PYTHONPATH=OTHER:HERE/benchmarks \\
        HERE/.venv/bin/pytest -n 2 -p same_answers tests/api tests/dashboard/test_one_answer.py \\
        -m "not netns and not broker and not netperfmeter"
    cd HERE && ANSWER_DUMP=/tmp/b.jsonl PYTHONPATH=HERE/benchmarks .venv/bin/pytest ... (same)
    .venv/bin/python benchmarks/same_answers.py /tmp/a.jsonl /tmp/b.jsonl

As a pytest plugin (`-p same_answers`) it wraps `stored_answer.answer_at_finish` and appends,
per finish, the stored row (OPM, OCC, OBS, OTP, outputs, flags, Eq. 1, provenance, inputs) and
the campaign's `run_state` JSON to `$ANSWER_DUMP`, ids and clock times left out. Run as a script
it compares two dumps test by test and prints every field that differs. The tests seed through
the product's flows, so equal dumps say the same measurements give the same stored answers and
the same stored state. A test whose data is flat answers by round-off and its campaign's random
seed: such a test differs between two runs of one tree too.
"""

from __future__ import annotations

import collections
import json
import os
import sys

#: what changes from run to run without the answer changing: ids, clock times, URLs with ids
VOLATILE = {"created_at", "finished_at", "campaign_finished_at", "newest_measurement_at",
            "oldest_measurement_at", "data_age_s", "stale_at", "exported_at", "started_at",
            "queued_at", "id", "recommendation_id", "campaign_id", "topology_id",
            "from_campaign", "from_recommendation", "poll_url"}
ROW = ("kind", "opm", "occ", "obs_mib", "otp_mbps", "tp_max_mbps", "delta", "bs_min_mib",
       "bs_max_mib", "outputs", "quality_flags", "traditional", "provenance", "inputs")


def _clean(value):
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in sorted(value.items()) if k not in VOLATILE}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    if isinstance(value, float):
        return round(value, 9)
    return value


def pytest_configure(config) -> None:
    from models import Recommendation
    from service.flows.answers import stored_answer
    from service.flows.campaign import finish

    original = stored_answer.answer_at_finish

    def recorded(session, campaign, *args, **kwargs):
        out = original(session, campaign, *args, **kwargs)
        rec = out.recommendation
        if rec is None and out.recommendation_id is not None:
            rec = session.get(Recommendation, out.recommendation_id)
        row = None if rec is None else {name: getattr(rec, name) for name in ROW}
        test = os.environ.get("PYTEST_CURRENT_TEST", "").split(" ")[0]
        with open(os.environ["ANSWER_DUMP"], "a") as f:
            f.write(json.dumps({"test": test, "answer": _clean(row),
                                "state": _clean(campaign.run_state_json)}, default=str) + "\n")
        return out

    stored_answer.answer_at_finish = recorded
    finish.answer_at_finish = recorded  # imported there by name


def _load(path: str) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = collections.defaultdict(list)
    with open(path) as f:
        for line in f:
            entry = json.loads(line)
            out[entry["test"]].append(entry)
    return out


def _differences(where: str, a, b):
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b)):
            yield from _differences(f"{where}.{key}", a.get(key, "<absent>"),
                                    b.get(key, "<absent>"))
    elif a != b:
        yield where, a, b


def main(first: str, second: str) -> int:
    a, b = _load(first), _load(second)
    same = differ = 0
    for test in sorted(set(a) & set(b)):
        for x, y in zip(a[test], b[test], strict=False):
            found = list(_differences("", {"answer": x["answer"], "state": x["state"]},
                                      {"answer": y["answer"], "state": y["state"]}))
            same += not found
            differ += bool(found)
            for where, u, v in found:
                print(f"{test} {where}: {str(u)[:100]} | {str(v)[:100]}")
    print(f"finishes compared: {same + differ}; the same: {same}; different: {differ}; "
          f"tests only in one dump: {len(set(a) ^ set(b))}")
    return 0 if differ == 0 else 1


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))

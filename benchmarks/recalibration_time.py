"""How long from a lasting capacity step to a new answer, and to that answer applied.

    .venv/bin/python benchmarks/recalibration_time.py [--repeats 1] [--fire-after-s 5]
        [--duration-s 2] [--confirm]

A 2 x 1 testbed: site Lo with ISPs F (12 Mbit/s both ways) and A (8 down, 3 up; 40 ms), site Re
with U (20). Per repeat, on the embedded default (a SQLite file, campaigns and applies run in
this process by the production code): a calibration (reno, buffers 0.0625/0.125/0.25 MiB, one
run of `--duration-s` each, grid), applied with auto_reapply (no confirmation unless
`--confirm`, no watcher); a recalibration schedule; then F's uplink is stepped from 12 to
3 Mbit/s for good (`probes.testbed.capacity`, as `mpcoa testbed capacity`), the schedule fires
`--fire-after-s` later (in production: at its next cron time, so add up to one period), the
in-process executor runs the warm recalibration and, on drift, the full sweep; its hook
re-applies the new answer through the apply plan. Printed per repeat and as median / max, all
from the step: the schedule firing, the drift noticed (the warm verdict's event), the new answer
(the campaign finished), the re-apply done; and the re-apply's own length. Then the sites are
rolled back, F restored. The testbed is taken down even on SIGINT/SIGTERM.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import signal
import statistics
import sys
import time
from datetime import timedelta
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run as a script from anywhere

from benchmarks.scratch import scratch_dir  # noqa: E402 (after the path line above)

LOCAL = [("Fiber", "F", 12000, 12000), ("Adsl", "A", 8000, 3000)]
REMOTE = [("Uni", "U", 20000, 20000)]
STEP_UP_KBPS = 3000  # F's uplink after the step (from 12000)


def _site(name: str, isps) -> dict:
    return {"name": name, "isps": [{"name": n, "label": lb, "down_kbps": d, "up_kbps": u}
                                   for n, lb, d, u in isps]}


def _interrupted(signum, _frame):
    raise KeyboardInterrupt(f"signal {signum}")


def _settled(apply_id: int):
    from service.db import session_scope
    from service.flows.applying import apply as apply_flow
    from service.store import applied

    with session_scope() as s:
        row = applied.get_apply(s, apply_id=apply_id)
        return row if row.state not in apply_flow.BUSY and row.action is None else None


def _wait(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        time.sleep(0.5)
    return value


def one_repeat(bed, topology_id: int, params: dict, confirm: bool, fire_after_s: float) -> dict:
    from probes.testbed import capacity
    from service.db import session_scope
    from service.flows.applying import apply as apply_flow
    from service.flows.campaign.dispatch import start_campaign
    from service.flows.campaign.plan import CampaignParameters
    from service.flows.campaign.runner import InProcessExecutor, run_campaign
    from service.flows.scheduling import reapply
    from service.flows.scheduling.recalibration import queue_due_campaigns
    from service.settings import get_settings
    from service.store import applied, schedules

    settings = get_settings()
    capacity.set_capacity(bed, "Lo", "F", up_kbps=12000, down_kbps=12000)
    with session_scope() as s:
        first = start_campaign(s, topology_id=topology_id, params=CampaignParameters(**params),
                               reason="manual", settings=settings).id
    if run_campaign(first, settings=settings) != "done":
        raise RuntimeError(f"calibration {first} did not finish")
    with session_scope() as s:
        row = apply_flow.start_apply(s, topology_id=topology_id, confirm=confirm, seconds=5,
                                     watch=False, auto_reapply=True)
        first_apply, plan = row.id, row.plan
    apply_flow.dispatch(first_apply, plan, "apply", settings)
    if _wait(lambda: _settled(first_apply), 120, "the first apply").state != "applied":
        raise RuntimeError(f"apply {first_apply}: {_settled(first_apply).error}")
    with session_scope() as s:
        sched = schedules.set_schedule(s, topology_id=topology_id, cron="*/5 * * * *",
                                       parameters=params)
        due_at = schedules.next_run(sched) + timedelta(seconds=1)

    step_at = capacity.set_capacity(bed, "Lo", "F", up_kbps=STEP_UP_KBPS,
                                    down_kbps=12000)["at"]
    time.sleep(fire_after_s)
    with session_scope() as s:
        (recal,) = queue_due_campaigns(s, settings=settings, now=due_at)
    fired_at = time.time()
    # its re-apply hook, as the API process installs it
    executor = InProcessExecutor(settings, partial(reapply.after_finish, settings=settings))
    try:
        executor.submit(recal)

        def reapplied():
            with session_scope() as s:
                for r in applied.list_applies(s, topology_id=topology_id, limit=5):
                    if (r.plan.get("reapply") or {}).get("campaign_id") == recal:
                        return r.id if _settled(r.id) else None
            return None

        second = _wait(reapplied, 900, "the re-apply")
    finally:
        executor.stop()
        executor.join(30)
    with session_scope() as s:
        entry = next(h for h in schedules.calibration_history(s, topology_id=topology_id)
                     if h["campaign_id"] == recal)
        row = applied.get_apply(s, apply_id=second)
        out = {"fired_s": fired_at - step_at,
               "noticed_s": entry["noticed_at"].timestamp() - step_at,
               "answered_s": entry["finished_at"].timestamp() - step_at,
               "applied_s": row.finished_at.timestamp() - step_at,
               "reapply_s": (row.finished_at - row.created_at).total_seconds(),
               "state": row.state, "otp_before": plan["answer"]["otp_mbps"],
               "otp_after": row.plan["answer"]["otp_mbps"],
               "obs_before": plan["answer"]["obs_mib"], "obs_after": row.plan["answer"]["obs_mib"]}
        back = apply_flow.start_rollback(s, topology_id=topology_id)
        back_id, back_plan = back.id, back.plan
        schedules.delete_schedule(s, topology_id=topology_id)
    apply_flow.dispatch(back_id, back_plan, "rollback", settings)
    _wait(lambda: _settled(back_id), 120, "the rollback")
    return out


def _stat(vals: list[float]) -> str:
    return f"median {statistics.median(vals):.1f}, max {max(vals):.1f}"


def main() -> None:
    ap_ = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap_.add_argument("--repeats", type=int, default=1, choices=range(1, 11), metavar="1..10")
    ap_.add_argument("--fire-after-s", type=float, default=5.0)
    ap_.add_argument("--duration-s", type=float, default=2.0)
    ap_.add_argument("--confirm", action="store_true", help="confirm each apply (5 s transfer)")
    args = ap_.parse_args()
    if not 0 <= args.fire_after_s <= 600:
        ap_.error("--fire-after-s: 0..600 s")
    if not 1 <= args.duration_s <= 30:
        ap_.error("--duration-s: 1..30 s")

    work = scratch_dir("mpcoa-recal-bench-")
    name = f"rc{secrets.token_hex(3)}"
    os.environ.update({"MPCOA_DATABASE_URL": f"sqlite:///{work / 'mpcoa.sqlite3'}",
                       "MPCOA_DATA_DIR": str(work), "MPCOA_TESTBED": name,
                       "MPCOA_APPLY_STATE": str(work / "apply")})
    from probes.testbed import lifecycle as testbed
    from probes.testbed.spec import parse_spec
    from service.algorithm.topology import TopologySpec
    from service.db import session_scope, upgrade
    from service.store.inventory import ensure_topology

    signal.signal(signal.SIGTERM, _interrupted)
    params = {"ccs": ["reno"], "buffer_grid_mib": [0.0625, 0.125, 0.25], "runs": 1,
              "duration_s": args.duration_s, "mode": "grid", "probe_tool": "iperf3"}
    runs: list[dict] = []
    try:
        bed = testbed.up(parse_spec({"name": name, "sites": [_site("Lo", LOCAL),
                                                              _site("Re", REMOTE)],
                                     "defaults": {"delay_ms": 10},
                                     "paths": {"A-U": {"delay_ms": 40}}}))
        upgrade(os.environ["MPCOA_DATABASE_URL"])
        with session_scope() as s:
            tid = ensure_topology(s, spec=TopologySpec.model_validate(
                {"local": _site("Lo", LOCAL), "remote": _site("Re", REMOTE)})).id
        for n in range(args.repeats):
            run = one_repeat(bed, tid, params, args.confirm, args.fire_after_s)
            runs.append(run)
            print(f"repeat {n + 1}: " + ", ".join(
                f"{k} {v:.2f}" if isinstance(v, float) else f"{k} {v}" for k, v in run.items()),
                flush=True)
    finally:
        testbed.down(name)
    print(f"\nrecalibration time, {args.repeats} repeats (Lo.F uplink 12 -> "
          f"{STEP_UP_KBPS / 1000:g} Mbit/s for good; reno, 3 buffers x 1 run x "
          f"{args.duration_s:g} s; schedule fired {args.fire_after_s:g} s after the step; "
          f"confirmation {'on' if args.confirm else 'off'})")
    for key, what in (("noticed_s", "step -> drift noticed (warm verdict)"),
                      ("answered_s", "step -> new answer"),
                      ("applied_s", "step -> new answer applied"),
                      ("reapply_s", "the re-apply itself")):
        print(f"{what}: {_stat([r[key] for r in runs])} s; each: "
              + ", ".join(f"{r[key]:.1f}" for r in runs))
    print(json.dumps({"repeats": runs, "fire_after_s": args.fire_after_s,
                      "duration_s": args.duration_s, "confirm": args.confirm}))


if __name__ == "__main__":
    main()

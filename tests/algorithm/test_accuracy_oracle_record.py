"""The accuracy benchmark's recorded oracle (benchmarks/accuracy.py `--oracle-dir`): written once,
read back equal for the same settings, and ignored (measured afresh) for any other."""

from __future__ import annotations

import json
from argparse import Namespace
from pathlib import Path

import pytest

from benchmarks.accuracy import (
    Arm,
    Oracle,
    confirmed_min,
    judged,
    judged_pairs,
    ratio_interval,
    record_oracle,
    recorded_oracle,
)
from benchmarks.oracle import timed
from probes.testbed.spec import load_spec
from service.algorithm.capacity import PAYLOAD_SHARE

GRID = [0.0156, 0.0625, 0.25]
CCS = ["bbr", "cubic"]


def _args(**over) -> Namespace:
    return Namespace(**{"oracle_runs": 2, "oracle_duration": 6.0, **over})


ROOT = Path(__file__).resolve().parents[2]


def test_a_recorded_oracle_reads_back_for_the_same_settings_only(tmp_path: Path):
    scenario = ROOT / "benchmarks/scenarios/every-path.yaml"
    spec = load_spec(scenario)
    oracle = Oracle([
        Arm("FullMesh", "bbr", ["X-U", "Y-U"], {0.0156: [5.0, 5.5], 0.25: [13.1, 13.2]}),
        Arm("PCDC", "cubic", ["X-U"], {0.0625: [7.4, 7.5]}),
    ], probe_seconds=504.0)
    log: list[str] = []
    assert recorded_oracle(tmp_path, scenario, spec, CCS, GRID, _args(), log.append) is None
    record_oracle(tmp_path, scenario, CCS, GRID, _args(), oracle)
    back = recorded_oracle(tmp_path, scenario, spec, CCS, GRID, _args(), log.append)
    assert back == oracle
    assert back.best()[:2] == (oracle.arms[0], 0.25)
    # other runs, another grid or other CCs: the recording does not stand for them
    three = _args(oracle_runs=3)
    assert recorded_oracle(tmp_path, scenario, spec, CCS, GRID, three, log.append) is None
    assert recorded_oracle(tmp_path, scenario, spec, CCS, GRID[:2], _args(), log.append) is None
    assert recorded_oracle(tmp_path, scenario, spec, ["bbr"], GRID, _args(), log.append) is None
    assert sum("other settings" in line for line in log) == 3
    # a cell a little above what its subflows' links carry (8 + 6 Mbit/s uplinks) reads back
    # capped at the goodput they carry, as the campaign stores such a probe
    released = Oracle([Arm("FullMesh", "bbr", ["X-U", "Y-U"], {0.25: [15.1, 13.2]})], 24.0)
    record_oracle(tmp_path, scenario, CCS, GRID, _args(), released)
    again = recorded_oracle(tmp_path, scenario, spec, CCS, GRID, _args(), log.append)
    assert again.arms[0].means[0.25] == [pytest.approx(14.0 * PAYLOAD_SHARE), 13.2]


def test_probes_are_timed_as_the_campaign_times_them_and_old_recordings_only_where_equal(
        tmp_path: Path):
    """A 500 ms path makes the rule lengthen the probe (a 6 s probe would be mostly slow start);
    20-60 ms paths leave it as asked. A recording made before the oracle was timed by the rule
    stands only for a scenario whose probes the rule leaves alone."""
    harmful = load_spec(ROOT / "benchmarks/scenarios/harmful.yaml")
    sender, receiver = (s.name for s in harmful.sites)
    names = harmful.subflow_names(sender, receiver)
    long, warmup = timed(harmful, sender, receiver, names, 1.0, 6.0)
    assert long > 6.0 and warmup is not None and warmup > 2.0
    fast = [n for n in names if harmful.path(*n.split("-")).delay_ms < 100]
    assert timed(harmful, sender, receiver, fast, 1.0, 6.0) == (6.0, None)

    oracle = Oracle([Arm("PCDC", "bbr", fast, {1.0: [18.8, 18.8]})], probe_seconds=12.0)
    for path, spec, kept in ((ROOT / "benchmarks/scenarios/harmful.yaml", harmful, False),
                             (ROOT / "benchmarks/scenarios/every-path.yaml",
                              load_spec(ROOT / "benchmarks/scenarios/every-path.yaml"), True)):
        record_oracle(tmp_path, path, CCS, GRID, _args(), oracle)
        file = tmp_path / f"{path.stem}.oracle.json"
        data = json.loads(file.read_text())
        del data["settings"]["timing"]  # as recorded before the rule timed the oracle
        file.write_text(json.dumps(data))
        back = recorded_oracle(tmp_path, path, spec, CCS, GRID, _args(), lambda _: None)
        assert (back == oracle) is kept, path.stem


def test_the_oracles_smallest_buffer_stands_only_when_fresh_probes_confirm_it():
    """uit-haw.yaml's oracle: FullMesh/bbr read 0.79 Mbit/s at 0.0236 MiB (within delta of
    0.845 by 0.5 %) between 0.69 at 0.0356 and 0.845 at 0.1226. A cell that would make the
    answer's OBS a miss is probed afresh first (here the recorded reruns of that scenario)."""
    grid = [0.0156, 0.0236, 0.0356, 0.0538, 0.0812, 0.1226]
    arm = Arm("FullMesh", "bbr", ["P-D", "T-D"], {
        0.0156: [0.64, 0.72], 0.0236: [0.77, 0.81], 0.0356: [0.66, 0.73],
        0.0538: [0.84, 0.75], 0.0812: [0.71, 0.75], 0.1226: [0.845, 0.845]})
    oracle = Oracle([arm], probe_seconds=504.0)
    fresh = {0.0236: [0.70, 0.74], 0.0538: [0.80, 0.81]}
    asked = []

    def measure(a, bs):
        asked.append(bs)
        return fresh[bs]

    min_arm, min_bs, checks = confirmed_min(oracle, 0.07, 0.1226, grid, 0.845, measure)
    # 0.0236 is not within delta afresh and is passed over; 0.0538 is (0.805 >= 0.786)
    assert (min_arm, min_bs) == (arm, 0.0538) and asked == [0.0236, 0.0538]
    assert [c["confirmed"] for c in checks] == [False, True]
    # an OBS within reach of the smallest cell asks for nothing
    asked.clear()
    assert confirmed_min(oracle, 0.07, 0.0236, grid, 0.845, measure)[1:] == (0.0236, [])
    assert asked == []


@pytest.mark.slow
def test_the_judge_adds_fresh_pairs_only_while_its_ratio_straddles_the_delta_line():
    def runs(values):
        it = iter(values)
        return lambda: next(it)

    # Clearly within delta after two pairs: no more runs.
    got, ref = judged_pairs(runs([10.0, 10.1]), runs([10.05, 10.0]), 2, 6, 0.07)
    assert (len(got), len(ref)) == (2, 2)
    assert judged(got, ref, 0.07)
    # Runs 15 % apart on the answer's side: the interval holds 0.93 until enough pairs.
    noisy = [0.717, 0.845, 0.80, 0.83, 0.82, 0.81]
    steady = [0.845, 0.84, 0.845, 0.84, 0.845, 0.84]
    got, ref = judged_pairs(runs(noisy), runs(steady), 2, 6, 0.07)
    assert len(got) == len(ref) > 2
    low, high = ratio_interval(got[:2], ref[:2])
    assert low < 0.93 < high
    # Never past the cap, even when it stays undecided.
    got, ref = judged_pairs(runs([0.5, 1.0] * 3), runs([0.9, 0.8] * 3), 2, 3, 0.07)
    assert len(got) == len(ref) == 3

"""The accuracy benchmark's recorded oracle (benchmarks/accuracy.py `--oracle-dir`): written once,
read back equal for the same settings, and ignored (measured afresh) for any other."""

from __future__ import annotations

from argparse import Namespace
from pathlib import Path

from benchmarks.accuracy import Arm, Oracle, record_oracle, recorded_oracle

GRID = [0.0156, 0.0625, 0.25]
CCS = ["bbr", "cubic"]


def _args(**over) -> Namespace:
    return Namespace(**{"oracle_runs": 2, "oracle_duration": 6.0, **over})


def test_a_recorded_oracle_reads_back_for_the_same_settings_only(tmp_path: Path):
    scenario = Path("benchmarks/scenarios/every-path.yaml")
    oracle = Oracle([
        Arm("FullMesh", "bbr", ["X-U", "Y-U"], {0.0156: [5.0, 5.5], 0.25: [13.1, 13.2]}),
        Arm("PCDC", "cubic", ["X-U"], {0.0625: [7.4, 7.6]}),
    ], probe_seconds=504.0)
    log: list[str] = []
    assert recorded_oracle(tmp_path, scenario, CCS, GRID, _args(), log.append) is None
    record_oracle(tmp_path, scenario, CCS, GRID, _args(), oracle)
    back = recorded_oracle(tmp_path, scenario, CCS, GRID, _args(), log.append)
    assert back == oracle
    assert back.best()[:2] == (oracle.arms[0], 0.25)
    # other runs, another grid or other CCs: the recording does not stand for them
    assert recorded_oracle(tmp_path, scenario, CCS, GRID, _args(oracle_runs=3), log.append) is None
    assert recorded_oracle(tmp_path, scenario, CCS, GRID[:2], _args(), log.append) is None
    assert recorded_oracle(tmp_path, scenario, ["bbr"], GRID, _args(), log.append) is None
    assert sum("other settings" in line for line in log) == 3

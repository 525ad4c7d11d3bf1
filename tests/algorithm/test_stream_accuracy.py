"""The stream oracle's pure parts (benchmarks/stream_accuracy.py): a probe's figures read as the
stream rule reads them, the best carrying configuration, and the ratio's convention. The
figures come from the product's own frame statistics (`probes.frames.frame_stats`) and the
carrying test is the product's stream rule (`stream_choice.carries`)."""

from __future__ import annotations

import math
from datetime import timedelta

import pytest

from benchmarks.stream_accuracy import (
    Cell,
    best_carrying,
    inside,
    mean_p99,
    ratio,
    record_oracle,
    recorded_oracle,
    run_of,
    within_delta,
)
from probes.base import MeasurementRequest, MeasurementResult, TrafficProfile
from probes.frames import FrameRecord, frame_stats
from service.algorithm.stream_choice import StreamRun
from tests.support import ago

RATE = 4.0  # Mbit/s: 25 frames/s of 20,000 bytes
DELTA = 0.07


def probed(delay_ms: float, *, goodput: float = RATE, lost: int = 0, spread: float = 2.0
           ) -> MeasurementResult:
    """A paced probe's result: 100 frames whose delays rise evenly by `spread` ms to
    `delay_ms`, the last `lost` of them lost; its frame figures from the product's statistics."""
    records = [FrameRecord(k, k * 40_000, None if k >= 100 - lost else
                           k * 40_000 + round((delay_ms - spread + spread * k / 99) * 1000),
                           20_000)
               for k in range(100)]
    request = MeasurementRequest(sender="A", receiver="B", cc="reno", duration_s=4,
                                 path_manager="FullMesh",
                                 profile=TrafficProfile.paced(25, 20_000))
    at = ago(days=1)
    return MeasurementResult(request=request, tool="mpcoa-paced", tool_version="1",
                             goodput_mbps=goodput, frames=frame_stats(records),
                             started_at=at, ended_at=at + timedelta(seconds=4))


def runs(*results: MeasurementResult) -> list[StreamRun]:
    return [run_of(r) for r in results]


def test_a_probe_is_read_as_the_stream_rule_reads_a_stored_one():
    r = run_of(probed(40.0, lost=3))
    assert r.goodput_mbps == RATE
    assert r.lost_fraction == pytest.approx(0.03)
    assert r.p99_ms == pytest.approx(frame_stats([
        FrameRecord(k, k * 40_000, k * 40_000 + round((38 + 2 * k / 99) * 1000), 20_000)
        for k in range(97)]).delay_p99_ms)
    # a probe without frames (a bulk tool) carries nothing
    bare = probed(40.0).model_copy(update={"frames": None})
    assert run_of(bare).p99_ms is None and mean_p99([run_of(bare)]) == math.inf


def test_the_best_is_the_carrying_cell_with_the_smallest_p99():
    fast_but_lossy = Cell("FullMesh", "bbr", ("D-U", "D-T"), 0.05)
    fast_but_short = Cell("FullMesh", "cubic", ("D-U", "D-T"), 0.05)  # under the rate
    good = Cell("PCDC", "reno", ("D-U",), 0.14)
    good_bigger = Cell("PCDC", "reno", ("D-U",), 0.5)  # the same p99: the smaller buffer wins
    bloated = Cell("PCDC", "reno", ("D-U",), 2.0)
    cells = {
        fast_but_lossy: runs(probed(20.0, lost=5), probed(20.0, lost=5)),
        fast_but_short: runs(probed(20.0, goodput=3.0), probed(20.0, goodput=3.0)),
        good_bigger: runs(probed(36.0), probed(36.0)),
        good: runs(probed(36.0), probed(36.0)),
        bloated: runs(probed(180.0), probed(190.0)),
    }
    cell, p99 = best_carrying(cells, RATE, max_loss=0.01)
    assert cell == good
    assert p99 == pytest.approx(mean_p99(cells[good]))
    assert best_carrying({fast_but_lossy: cells[fast_but_lossy]}, RATE, 0.01) is None


def test_the_ratio_is_best_over_answer_and_good_from_one_over_one_plus_delta():
    # the answer 5 % slower than the best: within (1 + delta)
    r = ratio(36.0, 37.8)
    assert r == pytest.approx(36.0 / 37.8) and within_delta(r, DELTA)
    # exactly at the limit, and past it
    assert within_delta(ratio(36.0, 36.0 * (1 + DELTA)), DELTA)
    assert not within_delta(ratio(36.0, 40.0), DELTA)
    # a fresh answer probe better than the best's fresh probes: above 1, fine
    assert ratio(36.0, 34.7) > 1 and within_delta(ratio(36.0, 34.7), DELTA)
    # an answer that does not carry the stream: ratio 0
    assert ratio(36.0, math.inf) == 0.0 and not within_delta(0.0, DELTA)


def test_fresh_probes_inside_the_stated_interval():
    assert inside([33.2, 40.8], 34.7) is True
    assert inside([33.2, 40.8], 44.0) is False
    assert inside(None, 34.7) is None


def test_a_recorded_oracle_is_reused_only_for_the_same_settings(tmp_path):
    """`--oracle-dir`: the campaign side judged again without re-running the oracle."""
    cells = {Cell("PCDC", "reno", ("D-U",), 0.05): [StreamRun(4.0, 35.0, 0.0),
                                                   StreamRun(4.0, 36.5, 0.0)],
             Cell("FullMesh", "bbr", ("D-U", "D-T"), 0.0156): [StreamRun(2.4, None, 1.0)]}
    settings = {"stream": "stream:25Hz:20000B", "ccs": ["reno"], "grid_mib": [0.05],
                "runs": 2, "duration_s": 6.0}
    path = tmp_path / "shared.yaml"
    record_oracle(tmp_path, path, settings, cells, 360.0)
    assert recorded_oracle(tmp_path, path, settings, print) == (cells, 360.0)
    assert recorded_oracle(tmp_path, path, {**settings, "runs": 3}, print) is None
    assert recorded_oracle(None, path, settings, print) is None


def test_the_shipped_stream_scenarios_load_and_one_path_is_jittery_and_lossy():
    from pathlib import Path

    from probes.testbed.spec import load_spec

    root = Path(__file__).resolve().parents[2]
    for name in ("benchmarks/scenarios/shared.yaml", "probes/testbed/scenarios/uit-haw.yaml"):
        assert load_spec(root / name).paths
    radio = load_spec(root / "benchmarks/scenarios/stream-radio.yaml")
    rough = [name for name, p in radio.paths.items() if p.jitter_ms and p.loss_pct]
    assert rough == ["R-B"] and not radio.paths["W-B"].loss_pct


def test_each_scenario_gives_one_line_and_a_failed_one_says_why(monkeypatch, capsys, tmp_path):
    """`run_scenarios`, the loop both stream benchmarks share: a JSON line per scenario, an
    error row for one that raised, the product's database in a folder of the run's own."""
    import argparse
    import json
    import os
    from pathlib import Path

    from benchmarks.oracle import run_scenarios

    monkeypatch.setenv("MPCOA_DATABASE_URL", "sqlite:///unused")
    monkeypatch.setenv("MPCOA_DATA_DIR", str(tmp_path))
    seen = []

    def scenario(path, args, log):
        seen.append(os.environ["MPCOA_DATABASE_URL"])
        log("measuring")
        if path.stem == "broken":
            raise RuntimeError("no measured configuration carries the stream")
        return {"scenario": path.stem, "ratio": 1.0}

    args = argparse.Namespace(scenarios=[Path("a/good.yaml"), Path("broken.yaml")],
                              stream_mbps=3.0, quiet=False)
    assert run_scenarios(args, scenario, "mpcoa-test-") == 0
    out, err = capsys.readouterr()
    assert [json.loads(line) for line in out.splitlines()] == [
        {"scenario": "good", "ratio": 1.0},
        {"scenario": "broken", "error": "no measured configuration carries the stream"}]
    assert "scenario a/good.yaml, stream 3 Mbit/s" in err and err.count("measuring") == 2
    assert seen[0].startswith("sqlite:///") and "mpcoa-test-" in seen[0]
    Path(seen[0].removeprefix("sqlite:///")).parent.rmdir()  # empty: nothing touched the database

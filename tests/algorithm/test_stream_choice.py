"""Deciding for streams: carry the rate, smallest p99 frame delay, smallest buffer within
(1 + delta) of the arm's best; repeats only where they change the decision."""

from __future__ import annotations

import random

import pytest

from service.algorithm.arm import Arm
from service.algorithm.stream_choice import StreamRun, carries, decide_stream

GRID = [0.25, 0.5, 1.0, 2.0, 4.0]
RATE = 8.0  # Mbit/s: 25 frames/s of 40,000 bytes
CUBIC, BBR, RENO = Arm("FullMesh", "cubic"), Arm("PCDC", "bbr"), Arm("FullMesh", "reno")


def truth(arm: Arm, bs: float) -> tuple[float, float, float]:
    """(goodput, p99 ms, lost) of a made-up network: cubic bloats with the buffer, bbr keeps
    its queue short but needs 1 MiB to carry the rate, reno never carries it."""
    if arm == CUBIC:
        return (RATE if bs >= 0.5 else 6.0), 60 + 40 * bs, 0.0
    if arm == BBR:
        return (RATE if bs >= 1.0 else 5.0), 70.0 - 2 * bs, 0.0
    return 5.5, 50.0, 0.0


def measured(runs_per_point: int = 2, noise: float = 0.0, seed: int = 0):
    rng = random.Random(seed)
    out: dict = {}
    for arm in (CUBIC, BBR, RENO):
        for bs in GRID:
            gp, p99, lost = truth(arm, bs)
            out.setdefault(arm, {})[bs] = [
                StreamRun(gp, p99 * (1 + rng.gauss(0, noise)), lost)
                for _ in range(runs_per_point)]
    return out


def test_nothing_measured_asks_for_the_whole_grid_twice():
    d = decide_stream([CUBIC, BBR], GRID, {}, rate_mbps=RATE, delta=0.07)
    assert not d.settled and len(d.probes) == 2 * len(GRID)


def test_the_rule_on_exact_data():
    d = decide_stream([CUBIC, BBR, RENO], GRID, measured(), rate_mbps=RATE, delta=0.07)
    assert d.settled, d.probes
    # carrying points: cubic 0.5 (80 ms), 1 (100), ...; bbr 1 (68), 2 (66), 4 (62)
    assert (d.opm, d.occ) == ("PCDC", "bbr")
    assert d.best_p99_ms == pytest.approx(62.0) and d.best_bs_mib == 4.0
    # smallest bbr buffer within 7 % of 62 ms (66.34): 2 MiB at 66 ms, not 1 MiB at 68
    assert d.obs_mib == 2.0 and d.p99_ms == pytest.approx(66.0)
    assert d.not_carrying == {"FullMesh/reno": "goodput 5.5 Mbit/s at best (0.25 MiB) under "
                              "the rate 8"}
    assert d.carrying == ("FullMesh/cubic", "PCDC/bbr")
    assert d.pm_settled and d.cc_settled and d.alternatives == ()


def test_a_wider_delta_takes_a_smaller_buffer():
    runs = measured()
    for bs in GRID:  # bbr carries the rate at every buffer here: no carrying edge
        runs[BBR][bs] = [StreamRun(RATE, 70.0 - 2 * bs, 0.0)] * 2
    assert decide_stream([CUBIC, BBR], GRID, runs, rate_mbps=RATE, delta=0.07).obs_mib == 2.0
    d = decide_stream([CUBIC, BBR], GRID, runs, rate_mbps=RATE, delta=0.1)
    assert (d.occ, d.obs_mib) == ("bbr", 1.0)  # 68 <= 1.1 x 62
    assert d.skipped_edge_mib is None


def test_a_buffer_at_the_carrying_edge_is_passed_for_the_next_that_qualifies():
    # bbr carries from 1 MiB on (68 ms, within 1.1 x 62), not at 0.5: 1 MiB is at the edge
    d = decide_stream([CUBIC, BBR], GRID, measured(), rate_mbps=RATE, delta=0.1)
    assert (d.occ, d.obs_mib, d.skipped_edge_mib) == ("bbr", 2.0, 1.0)
    # where nothing above the edge qualifies, the edge it is (cubic: 80 ms at 0.5, 100 at 1)
    d = decide_stream([CUBIC], GRID, measured(), rate_mbps=RATE, delta=0.07)
    assert (d.obs_mib, d.skipped_edge_mib) == (0.5, None)


def test_lost_frames_keep_an_arm_out():
    runs = measured()
    for bs in GRID:
        runs[BBR][bs] = [StreamRun(RATE, 40.0, 0.05)] * 2
    d = decide_stream([CUBIC, BBR], GRID, runs, rate_mbps=RATE, delta=0.07)
    assert d.occ == "cubic" and d.obs_mib == 0.5
    assert "5.0% of frames lost" in d.not_carrying["PCDC/bbr"]
    assert carries([StreamRun(RATE * 0.99, 10.0, 0.0)], RATE, 0.01)  # within the 2 % binning
    assert not carries([StreamRun(RATE, None, 0.0)], RATE, 0.01)


def test_rivals_within_reach_are_repeated_then_named():
    runs = measured()
    runs[CUBIC][0.25] = [StreamRun(RATE, 61.0, 0.0), StreamRun(RATE, 65.0, 0.0)]  # rival
    runs[BBR][4.0] = [StreamRun(RATE, 60.0, 0.0), StreamRun(RATE, 64.0, 0.0)]
    d = decide_stream([CUBIC, BBR], GRID, runs, rate_mbps=RATE, delta=0.07)
    assert not d.settled
    assert {(p.cc, p.bs_mib) for p in d.probes} >= {("cubic", 0.25), ("bbr", 4.0)}
    more = {**runs, CUBIC: {**runs[CUBIC], 0.25: runs[CUBIC][0.25] * 2},
            BBR: {**runs[BBR], 4.0: runs[BBR][4.0] * 2}}
    d = decide_stream([CUBIC, BBR], GRID, more, rate_mbps=RATE, delta=0.07, max_runs=4)
    assert [a.label for a in d.alternatives] == ["FullMesh/cubic"]
    assert not d.pm_settled and not d.cc_settled


def test_one_run_per_point_has_no_interval():
    d = decide_stream([CUBIC, BBR], GRID, measured(runs_per_point=1), rate_mbps=RATE,
                      delta=0.07, min_runs=1)
    assert d.occ == "bbr" and d.p99_interval() is None


def test_the_interval_pools_only_points_that_carry_the_stream():
    """A point that does not carry the stream has frames waiting for seconds, its p99 runs
    thousands of ms apart; pooled in, that spread gave a shared-testbed answer of 37 ms the
    interval -79 to 153 ms. Carrying points alone say how a carried stream's p99 varies."""
    runs = measured(runs_per_point=2)
    for bs in GRID:  # bbr carries from 1 MiB; below it the stream backs up in the sender
        if bs < 1.0:
            runs[BBR][bs] = [StreamRun(5.0, 2000.0, 0.0), StreamRun(5.0, 4000.0, 0.0)]
    for bs in GRID:  # a run-to-run spread of 1 ms on every carrying point
        for arm in (CUBIC, BBR):
            if truth(arm, bs)[0] >= RATE:
                p99 = truth(arm, bs)[1]
                runs[arm][bs] = [StreamRun(RATE, p99 - 0.5, 0.0), StreamRun(RATE, p99 + 0.5, 0.0)]
    d = decide_stream([CUBIC, BBR, RENO], GRID, runs, rate_mbps=RATE, delta=0.07)
    assert (d.occ, d.obs_mib) == ("bbr", 2.0)
    lo, hi = d.p99_interval()
    assert 0 < lo < d.p99_ms < hi
    # the carried spread (1 ms a point) and the host's drift (`stream_interval`: ±10 % or so of
    # 66 ms), not the waiting frames' seconds
    assert hi - lo < 20.0


def test_the_interval_is_the_arms_own_spread_not_an_erratic_rivals():
    """Seen on the shared testbed: FullMesh carried the stream but every other run held frames
    for 120-270 ms behind its slow subflow; pooled with it, PCDC's tight p99 (34-38 ms over 24
    runs) was stated as -43 to 113 ms. Each arm's interval comes from its own points."""
    runs = measured(runs_per_point=2)
    for bs in GRID:
        if truth(BBR, bs)[0] >= RATE:  # bbr: 1 ms apart
            p99 = truth(BBR, bs)[1]
            runs[BBR][bs] = [StreamRun(RATE, p99 - 0.5, 0.0), StreamRun(RATE, p99 + 0.5, 0.0)]
        if truth(CUBIC, bs)[0] >= RATE:  # cubic carries too, but erratically
            p99 = truth(CUBIC, bs)[1]
            runs[CUBIC][bs] = [StreamRun(RATE, p99, 0.0), StreamRun(RATE, p99 + 200.0, 0.0)]
    d = decide_stream([CUBIC, BBR, RENO], GRID, runs, rate_mbps=RATE, delta=0.07)
    assert d.occ == "bbr"
    lo, hi = d.p99_interval()
    assert hi - lo < 20.0  # bbr's 1 ms and the host's drift (above), not cubic's 200 ms


def test_bad_inputs():
    with pytest.raises(ValueError):
        decide_stream([CUBIC], GRID, {}, rate_mbps=0, delta=0.07)


@pytest.mark.parametrize("seed", range(20))
def test_the_answer_is_within_delta_of_the_best_under_noise(seed):
    """Driven like a campaign: run what it asks (5 % run-to-run noise on p99) until settled;
    the answer's true p99 is within (1 + delta) of the best configuration's, give or take the
    noise the intervals allow."""
    rng = random.Random(seed)
    runs: dict = {}
    for _ in range(50):
        d = decide_stream([CUBIC, BBR, RENO], GRID, runs, rate_mbps=RATE, delta=0.07)
        if d.settled:
            break
        for p in d.probes:
            arm = Arm(p.pm, p.cc)
            gp, p99, lost = truth(arm, p.bs_mib)
            runs.setdefault(arm, {}).setdefault(p.bs_mib, []).append(
                StreamRun(gp, p99 * (1 + rng.gauss(0, 0.05)), lost))
    assert d.settled
    best = min(truth(a, bs)[1] for a in (CUBIC, BBR, RENO) for bs in GRID
               if truth(a, bs)[0] >= RATE)
    answer = truth(Arm(d.opm, d.occ), d.obs_mib)[1]
    assert answer <= (1 + 0.07) * best * 1.05

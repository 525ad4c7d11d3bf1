"""The adaptive stream sweep: every arm at the grid's middle, the leader's smallest buffer within
(1 + delta) of its best by bisection, repeats only for what could still win, a point that does
not carry decided by one probe, and a stop once settled."""

from __future__ import annotations

import random

import pytest

from service.algorithm.adaptive import MAX_RUNS
from service.algorithm.arm import Arm
from service.algorithm.stream_choice import StreamRun
from service.algorithm.stream_sweep import (
    decide_stream_sweep,
    reference_buffer,
)

pytestmark = pytest.mark.fast

GRID = [0.02, 0.03, 0.04, 0.06, 0.08, 0.11, 0.15, 0.2, 0.3]
RATE = 4.0
RENO, CUBIC, FM = Arm("PCDC", "reno"), Arm("PCDC", "cubic"), Arm("FullMesh", "reno")
ARMS = [RENO, CUBIC, FM]


def network(arm: Arm, bs: float) -> tuple[float, float | None]:
    """(goodput, p99 ms): PCDC carries from 0.04 MiB at 35 ms (reno) or 45 ms (cubic), a little
    bloat above 0.15 MiB; FullMesh carries from 0.06 MiB at 130 ms; nothing carries below."""
    edge = 0.06 if arm == FM else 0.04
    if bs < edge:
        return 1.5, None  # stalled: no frame delay
    base = {RENO: 35.0, CUBIC: 45.0, FM: 130.0}[arm]
    return RATE, base + (20.0 * (bs - 0.15) if bs > 0.15 else 0.0)


def sweep(truth=network, noise: float = 0.5, seed: int = 1, delta: float = 0.07,
          arms=ARMS, limit: int = 200):
    """Run the rule to its end against `truth`; (decision, probes in order)."""
    rng = random.Random(seed)
    runs: dict = {}
    probes = []
    for _ in range(limit):
        d = decide_stream_sweep(arms, GRID, runs, rate_mbps=RATE, delta=delta)
        if not d.probes:
            return d, probes
        w = d.probes[0]
        probes.append((Arm(w.pm, w.cc), w.bs_mib))
        gp, p99 = truth(Arm(w.pm, w.cc), w.bs_mib)
        run = StreamRun(gp, None if p99 is None else p99 + rng.gauss(0, noise),
                        0.0 if p99 is not None else 1.0)
        runs.setdefault(Arm(w.pm, w.cc), {}).setdefault(w.bs_mib, []).append(run)
    raise AssertionError("the sweep did not stop")


def test_every_arm_starts_at_the_grids_middle():
    d = decide_stream_sweep(ARMS, GRID, {}, rate_mbps=RATE, delta=0.07)
    assert reference_buffer(GRID) == 0.08
    assert [(p.pm, p.cc, p.bs_mib) for p in d.probes] == [(a.pm, a.cc, 0.08) for a in ARMS]
    assert not d.settled


def test_it_settles_on_the_leaders_smallest_buffer_off_the_carrying_edge():
    d, probes = sweep()
    assert d.settled and (d.opm, d.occ) == ("PCDC", "reno")
    # 0.04 carries but 0.03 does not: the edge; the next one up is the answer
    assert d.obs_mib == 0.06 and d.skipped_edge_mib == 0.04
    assert d.p99_ms == pytest.approx(35.0, abs=2) and d.p99_interval() is not None
    # far fewer probes than the grid's 27 points x 2 runs
    assert len(probes) <= 16, probes


def test_a_point_that_does_not_carry_is_decided_by_one_probe():
    _d, probes = sweep()
    for arm in ARMS:
        for bs in GRID:
            if network(arm, bs)[1] is None:
                assert probes.count((arm, bs)) <= 1


def test_an_arm_clearly_worse_is_eliminated_after_its_reference_probe():
    d, probes = sweep()
    assert probes.count((FM, 0.08)) == 1  # 130 ms against 35: never repeated, never descended
    assert not any(a == FM and bs != 0.08 for a, bs in probes)
    assert d.pm_settled and d.cc_settled and not d.alternatives


def test_a_contender_is_repeated_while_it_could_still_win():
    def close(arm, bs):  # cubic 1 ms behind reno, with 3 ms of noise: they cannot be told apart
        gp, p99 = network(arm, bs)
        return gp, (p99 - 9.0 if arm == CUBIC and p99 is not None else p99)

    d, probes = sweep(truth=close, noise=3.0, seed=0)
    assert d.settled
    reps = {arm: max(probes.count((arm, bs)) for bs in GRID) for arm in (RENO, CUBIC)}
    assert min(reps.values()) >= 3  # repeated while they overlap
    assert max(reps.values()) <= MAX_RUNS  # then an alternative within reach
    other = "PCDC/cubic" if d.occ == "reno" else "PCDC/reno"
    assert [a.label for a in d.alternatives] == [other] and not d.cc_settled


def test_one_outlying_run_does_not_make_a_far_worse_arm_a_contender():
    ok = lambda p99: StreamRun(RATE, p99, 0.0)  # noqa: E731
    runs = {RENO: {0.08: [ok(38), ok(576), ok(38), ok(47)]},  # one run held frames for 0.5 s
            CUBIC: {0.08: [ok(41), ok(40)]}, FM: {0.08: [ok(122)]}}
    d = decide_stream_sweep(ARMS, GRID, runs, rate_mbps=RATE, delta=0.07)
    assert d.probes and all((p.pm, p.cc) == ("PCDC", "cubic") for p in d.probes)  # the leader
    assert "FullMesh/reno" not in [a.label for a in d.alternatives]


def test_an_arm_that_does_not_carry_at_the_middle_is_tried_once_at_the_top():
    def late(arm, bs):  # FullMesh needs the largest buffer
        if arm == FM:
            return (RATE, 30.0) if bs >= 0.3 else (1.0, None)
        return network(arm, bs)

    d, probes = sweep(truth=late)
    assert (FM, 0.3) in probes and d.opm == "FullMesh"


def test_nothing_carries_settles_with_every_arms_reason():
    d, probes = sweep(truth=lambda arm, bs: (1.0, None))
    assert d.settled and d.opm is None
    assert len(probes) == 2 * len(ARMS)  # the middle and the top, once each
    assert sorted(d.not_carrying) == sorted(f"{a.pm}/{a.cc}" for a in ARMS)


def test_bad_input_is_refused():
    with pytest.raises(ValueError):
        decide_stream_sweep(ARMS, GRID, {}, rate_mbps=0, delta=0.07)
    with pytest.raises(ValueError):
        decide_stream_sweep(ARMS, [], {}, rate_mbps=RATE, delta=0.07)

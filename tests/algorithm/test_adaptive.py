"""Adaptive calibration's decision logic (issue 12), on real measurements kept as test data:
tests/data/asymmetric_campaign_buffer_runs.json, a grid campaign's buffer runs on
benchmarks/scenarios/asymmetric.yaml (6 arms x 7 buffers x 4 runs of 5 s; command in the file).
The replay answers each probe with the next recorded run of that (arm, buffer)."""

import json
from collections import defaultdict
from pathlib import Path

import pytest

from service.algorithm.adaptive import decide
from service.algorithm.measured_curve import MeasuredCurve
from service.algorithm.solver import solve

DATA = Path(__file__).resolve().parents[1] / "data" / "asymmetric_campaign_buffer_runs.json"


def _recorded():
    runs = json.loads(DATA.read_text())["runs"]
    table = defaultdict(list)
    for r in runs:
        table[(r["pm"], r["cc"], r["bs_mib"])].append(r["mbps"])
    arms = sorted({(r["pm"], r["cc"]) for r in runs})
    grid = sorted({r["bs_mib"] for r in runs})
    return table, arms, grid


def _exhaustive(table, arms, grid, delta):
    """The answer from every recorded run: the same rule over all the data."""
    curves = [MeasuredCurve.from_points(pm, cc, [(bs, v) for bs in grid
                                                 for v in table[(pm, cc, bs)]], False)
              for pm, cc in arms]
    return solve(curves, delta, grid[0], grid[-1])


def _replay(table, arms, grid, delta, grid_used=None):
    grid_used = grid_used or grid
    samples = defaultdict(lambda: defaultdict(list))
    probes = 0
    for _ in range(500):
        d = decide(arms, grid_used, samples, delta)
        if d.settled:
            return d, probes
        for p in d.probes:
            recorded = table[(p.pm, p.cc, p.bs_mib)]
            have = samples[(p.pm, p.cc)][p.bs_mib]
            have.append(recorded[len(have) % len(recorded)])
            probes += 1
    raise AssertionError("never settled")


@pytest.mark.parametrize("delta", [0.07, 0.15])
def test_adaptive_agrees_with_the_exhaustive_answer_on_real_runs(delta):
    table, arms, grid = _recorded()
    grid_probes = sum(len(v) for v in table.values())  # 168
    full = _exhaustive(table, arms, grid, delta)
    d, probes = _replay(table, arms, grid, delta)
    # The same configuration, or one whose exhaustive mean at the adaptive OBS is within delta
    # of the exhaustive best.
    mean_there = sum(table[(d.opm, d.occ, d.obs_mib)]) / len(table[(d.opm, d.occ, d.obs_mib)])
    assert (d.opm, d.occ, d.obs_mib) == (full.opm, full.occ, full.obs_mib) or (
        mean_there >= (1 - delta) * full.tp_max_mbps)
    assert probes <= 0.5 * grid_probes, probes
    print(f"delta {delta}: adaptive {d.opm}/{d.occ} {d.obs_mib} MiB in {probes} probes; "
          f"exhaustive {full.opm}/{full.occ} {full.obs_mib} MiB from {grid_probes}")


def _synthetic(curves: dict, grid, noise=0.0):
    return {(pm, cc, bs): [f(bs) - noise, f(bs) + noise] * 2
            for (pm, cc), f in curves.items() for bs in grid}


def test_a_dominant_arm_wins_and_the_others_are_eliminated_at_the_top():
    grid = [0.0625, 0.125, 0.25, 0.5, 1.0, 2.0]
    curves = {("PCDC", "cubic"): lambda b: 20 * min(1, b / 0.5),
              ("FullMesh", "cubic"): lambda b: 8 * min(1, b / 0.5),
              ("FullMesh", "reno"): lambda b: 5 * min(1, b / 0.5)}
    table = _synthetic(curves, grid, noise=0.2)
    d, probes = _replay(table, sorted(curves), grid, 0.07)
    assert (d.opm, d.occ, d.obs_mib) == ("PCDC", "cubic", 0.5)
    assert set(d.eliminated) == {"FullMesh/cubic", "FullMesh/reno"}
    assert probes < len(table) * 4 / 2


def test_arms_within_noise_take_the_smaller_buffer():
    grid = [0.0625, 0.125, 0.25, 0.5, 1.0, 2.0]
    curves = {("PCDC", "bbr"): lambda b: 10 * min(1, b / 1.0),
              ("FullMesh", "bbr"): lambda b: 10.1 * min(1, b / 0.25)}
    d, _ = _replay(_synthetic(curves, grid, noise=0.1), sorted(curves), grid, 0.07)
    assert (d.opm, d.occ, d.obs_mib) == ("FullMesh", "bbr", 0.25)


def test_every_survivor_has_three_buffers_for_the_fit():
    grid = [0.125, 0.25, 0.5, 1.0, 2.0, 4.0]
    curves = {("PCDC", "reno"): lambda b: 9.0}  # flat: reaches the target everywhere
    d, _ = _replay(_synthetic(curves, grid, noise=0.05), sorted(curves), grid, 0.07)
    assert d.obs_mib == 0.125

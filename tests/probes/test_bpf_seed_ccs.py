"""Seed 002's congestion controls as BPF struct_ops, live: EWTCP (a/w_r per ACK, a = 1/sqrt(n))
and the seed's own design, "cs218" (LIA's increase plus a delay window, bestRTT/lastRTT, once a
subflow has had more than five ACKs in a row).

The same functional checks as the coupled controls' (tests/probes/test_bpf_coupled.py, whose
helpers and beds these share): every subflow of an MPTCP connection runs the control and the
coupling map empties when the subflows go. And what cs218's delay window is for: it grows the
window faster than Reno's in congestion avoidance on the same path. The statistical goals --
over two disjoint paths >= 0.9 of the better path's TCP goodput, and EWTCP (coupled only
through n) taking more than LIA at one bottleneck -- are judged over rounds by
benchmarks/coupling.py, which prints their figures (docs/testbed.md).
"""

from __future__ import annotations

import itertools
import statistics

import pytest

from probes.bpf import cc as bpf_cc
from probes.bpf import coupling as C
from tests.probes.test_bpf_cc import tcp_flow
from tests.probes.test_bpf_coupled import (  # noqa: F401 - the module's BPF lock fixture
    _bed,
    _bpf_registrations_alone,
    _coupled_run_ok,
    _map_entries,
    registered,
)
from tests.support import wait_for

pytestmark = pytest.mark.netns

SEED = ("ewtcp", "cs218")


@pytest.fixture(scope="module")
def seed_ccs():
    yield from registered([*SEED, "lia"])


@pytest.fixture(scope="module")
def shared_bed():
    yield from _bed(C.shared_spec)


def test_names_are_buildable():
    for cc in SEED:
        assert bpf_cc.check_name(cc) == cc and cc in bpf_cc.COUPLED
        assert len(bpf_cc.map_name(cc)) <= 15 and len(f"mpcoa_c_{cc}") <= 15


@pytest.mark.parametrize("cc", SEED)
def test_every_subflow_runs_it_and_the_map_empties(shared_bed, seed_ccs, cc):
    r = C.do_no_harm(shared_bed, cc, "reno", 4.0, port=5490)
    _coupled_run_ok(r, cc)
    assert r["mptcp_mbps"] > 0, r
    wait_for(lambda: _map_entries(f"mpcoa_c_{cc}") == 0, 10, f"the {cc} map to empty")


def judged(measure, key: str, ok) -> tuple[float, list]:
    """Measure; once more if outside the bound; the value judged is the mean of the runs."""
    runs = [measure()]
    if not ok(runs[0][key]):
        runs.append(measure())
    return statistics.fmean(r[key] for r in runs), runs


def _ca_growth_per_rtt(samples: list) -> float:
    """Median growth of the window, in segments per smoothed RTT, over the stretches where the
    flow is in congestion avoidance (state Open, cwnd >= ssthresh) after its first loss."""
    rates = []
    started = False
    for a, b in itertools.pairwise(samples):
        started = started or b[1] in (2, 3, 4)
        if not started or a[1] != 0 or b[1] != 0 or a[2] < a[3] or b[0] <= a[0]:
            continue
        if b[2] > a[2] and a[4]:
            rates.append((b[2] - a[2]) / (b[0] - a[0]) * (a[4] / 1e6))
        elif b[2] == a[2]:
            rates.append(0.0)
    assert len(rates) >= 50, f"too few congestion-avoidance samples: {len(rates)}"
    return statistics.fmean(rates)


def test_cs218_grows_faster_than_reno_in_congestion_avoidance(testbed2x2, seed_ccs):
    def pair() -> dict:
        reno = tcp_flow(testbed2x2, "reno", 6.0, 5331)
        cs = tcp_flow(testbed2x2, "cs218", 6.0, 5332)
        assert reno["cc"] == "reno" and cs["cc"] == "cs218"
        g_reno, g_cs = _ca_growth_per_rtt(reno["samples"]), _ca_growth_per_rtt(cs["samples"])
        return {"ratio": g_cs / g_reno, "reno": g_reno, "cs218": g_cs}

    ratio, runs = judged(pair, "ratio", lambda v: v >= 1.2)
    print("cs218 / reno growth per RTT:", [(round(r["cs218"], 2), round(r["reno"], 2))
                                           for r in runs])
    assert ratio >= 1.2, runs

"""Coupled MPTCP congestion controls (LIA, OLIA, BALIA, wVegas) as BPF struct_ops, live.

Real clang, bpftool, kernel MPTCP and testbed (marker netns: root). What is checked here is
that each control works: a short run beside a TCP flow of its base control through one
bottleneck, with every subflow of the connection running it, its coupling map empty once the
subflows are released, and plain TCP left to Reno's halving; a campaign's prober measures
with it; unregistering it takes its maps with it. RFC 6356's three goals (do no harm, improve
throughput, balance congestion) and the order between uncoupled and coupled controls are
statistical: their figures move with the machine's load, so `benchmarks/coupling.py` judges
them over enough rounds (its exit status says whether they held; docs/testbed.md has the
figures). Registrations are host-wide: the module holds tests.support.host_lock alone, and
its fixture unregisters exactly what it registered.
"""

from __future__ import annotations

import json
import statistics
import subprocess
from collections.abc import Callable

import pytest

from probes.base import MeasurementRequest
from probes.bpf import cc as bpf_cc
from probes.bpf import coupling as C
from probes.testbed import lifecycle as tbmod
from tests.probes.conftest import assert_nothing_left, unique_name
from tests.probes.test_bpf_cc import loss_events, tcp_flow
from tests.probes.test_testbed_live import CAPACITY_MBPS
from tests.support import host_lock, wait_for

pytestmark = pytest.mark.netns

COUPLED = ("lia", "olia", "balia", "wvegas")
RUN_S = 5.0  # a functional run (goodput counts after the 3 s warm-up): data, not a figure


@pytest.fixture(scope="module", autouse=True)
def _bpf_registrations_alone():
    """BPF registrations are host-wide: no other test process registers, unregisters or lists
    congestion controls for a campaign meanwhile (tests.support.host_lock)."""
    with host_lock("congestion-controls", exclusive=True):
        yield


def registered(ccs: list[str]):
    """Register `ccs` for a module's tests; unregister exactly what this registered (the
    registrations are host-wide) and check none of it is left."""
    before = dict(C.LOADED)
    try:
        C.ensure_loaded(ccs)
        yield
    finally:
        mine = {k: v for k, v in C.LOADED.items() if before.get(k) != v}
        bpf_cc.unload(list(mine), map_ids=mine)
        for k in mine:
            C.LOADED.pop(k, None)
        left = bpf_cc.ours()
        assert not any(i in mine.values() for ids in left.values() for i in ids), left


@pytest.fixture(scope="module")
def coupled_ccs():
    yield from registered([*COUPLED, "vegas"])


def _bed(spec_fn: Callable[[str], object]):
    name = unique_name("c")
    try:
        yield tbmod.up(spec_fn(name))
    finally:
        st = tbmod.testbed_status(name)
        tbmod.down(name)
        assert_nothing_left(name, st.get("delayline_pid"))


@pytest.fixture(scope="module")
def shared_bed():
    yield from _bed(C.shared_spec)


def _coupled_run_ok(r: dict, cc: str) -> None:
    assert r["cc_used"] == cc, r
    assert r["subflows"] == 2, r
    assert r["ss_cc"] == [cc], r  # every subflow of the connection runs it


# --------------------------------------------------------------------------- names, fallback


def test_paper_names_are_buildable():
    for cc in COUPLED:
        assert bpf_cc.check_name(cc) == cc
        assert bpf_cc.map_name(cc) == f"mpcoa_{cc}" and len(bpf_cc.map_name(cc)) <= 15
    assert set(COUPLED) <= set(bpf_cc.COUPLED) <= set(bpf_cc.SUPPORTED)


@pytest.mark.parametrize("cc", ["lia", "olia", "balia"])
def test_plain_tcp_is_reno(testbed2x2, coupled_ccs, cc):
    """Without the MPTCP ULP there is no connection to couple with: Reno's halving on loss,
    and nothing is stored in the coupling map."""
    C.ensure_loaded([cc])
    # entries of connections that are not this test's (an MPTCP connection of an earlier
    # registration still closing) may be in a map of that name: this flow must add none
    held = _map_entries(f"mpcoa_c_{cc}")
    for _attempt in range(2):
        out = tcp_flow(testbed2x2, cc, 4.0, 5321)
        assert out["cc"] == cc
        ev = loss_events(out["samples"])
        if len(ev) >= 3:
            break
    assert len(ev) >= 3, (len(ev), out["samples"][-1])
    ratios = [round(ssth / w, 3) for w, ssth, _ in ev if w]
    assert abs(statistics.median(ratios) - 0.5) <= 0.04, ratios
    assert _map_entries(f"mpcoa_c_{cc}") <= held


def _map_entries(name: str) -> int:
    cp = subprocess.run(["bpftool", "-j", "map", "dump", "name", name],
                        capture_output=True, text=True, timeout=30, check=False)
    assert cp.returncode == 0, cp.stderr
    return len(json.loads(cp.stdout or "[]"))


def _map_ids(name: str) -> list[int]:
    cp = subprocess.run(["bpftool", "-j", "map", "show"],
                        capture_output=True, text=True, timeout=30, check=True)
    return [m["id"] for m in json.loads(cp.stdout or "[]") if m.get("name") == name]


def test_campaign_prober_measures_olia(testbed2x2, coupled_ccs):
    """What a campaign does with "olia" (service/flows/campaign/calibration.py): keep it when both
    sites' kernels offer it, then measure with iperf3 under mptcpize; no longer dropped."""
    from service.flows.campaign.probing import TestbedProber

    C.ensure_loaded(["olia"])
    prober = TestbedProber(testbed2x2.name)
    assert "olia" in prober.available_ccs()
    r = prober.measure(MeasurementRequest(sender="A", receiver="B", cc="olia", duration_s=4))
    assert r.mptcp_ok, r.fallback_reason
    assert r.kernel["sender_cc_used"] == "olia"
    assert r.subflow_count == 4 and all(v > 0 for v in r.subflow_bytes.values())
    # what the testbed's links allow, and data moved: the figure itself moves with the machine's
    # load (9.4 of 18 Mbit/s with four test processes beside it), benchmarks/coupling.py has it
    assert 0 < r.goodput_mbps <= 1.05 * CAPACITY_MBPS, r.goodput_mbps


# --------------------------------------------------------------------------- each control


@pytest.mark.parametrize("cc", COUPLED)
def test_the_control_runs_on_every_subflow_and_its_map_empties(shared_bed, coupled_ccs, cc):
    """A short run beside one TCP flow of the control's base: every subflow of the MPTCP
    connection runs `cc`, both flows carry data, and once the subflows are released the
    control's coupling map holds no entry."""
    base = C.BASE_CC[cc]
    r = C.do_no_harm(shared_bed, cc, base, RUN_S, port=5430 + 2 * COUPLED.index(cc))
    _coupled_run_ok(r, cc)
    assert r["tcp_cc_used"] == base, r
    assert r["mptcp_mbps"] > 0 and r["tcp_mbps"] > 0, r
    wait_for(lambda: _map_entries(f"mpcoa_c_{cc}") == 0, 10,
             f"the {cc} coupling map to empty after the run")


# --------------------------------------------------------------------------- cleanup


def test_release_and_unload_leave_no_maps(shared_bed, coupled_ccs):
    """Entries go when the subflows are released; the maps go with the unregistered control."""
    ours = [c for c in COUPLED if c in C.LOADED]  # one left registered by another user is not
    if not ours:                                   # ours to unload: test one this module loaded
        pytest.fail(f"every one of {COUPLED} was registered by someone else; cannot test our "
                    "unload")
    cc = ours[0]
    r = C.do_no_harm(shared_bed, cc, C.BASE_CC[cc], RUN_S, port=5480)
    _coupled_run_ok(r, cc)
    wait_for(lambda: _map_entries(f"mpcoa_c_{cc}") == 0, 10, f"the {cc} map to empty")
    ids = _map_ids(f"mpcoa_c_{cc}")
    assert ids
    assert bpf_cc.unload([cc], map_ids={cc: C.LOADED.pop(cc)}) == [cc]
    wait_for(lambda: not set(ids) & set(_map_ids(f"mpcoa_c_{cc}")), 10,
             f"the {cc} maps to go with its registration")
    assert cc not in bpf_cc.available()

"""The single-connection impact method: phase windows (pure) and flags switched on a live
connection (real namespaces, kernel MPTCP, the userspace path manager)."""

from __future__ import annotations

import pytest

from probes.testbed import lifecycle as tbmod
from probes.tools.phased_impact import PhasedRequest, impact_phases, measure_phased


def test_impact_phases_are_tp0_then_each_subflow_excluded():
    assert impact_phases(["U-D", "U-O", "T-D"]) == [
        ["U-D", "U-O", "T-D"], ["U-O", "T-D"], ["U-D", "T-D"], ["U-D", "U-O"]]


def test_phase_windows_follow_settle_and_measure():
    req = PhasedRequest("A", "B", [["U-D"], ["T-D"], ["U-D", "T-D"]], settle_s=2,
                        measure_s=3, first_settle_s=4)
    assert req.boundaries() == [0.0, 7.0, 12.0, 17.0]
    assert [req.window(k) for k in range(3)] == [(4.0, 7.0), (9.0, 12.0), (14.0, 17.0)]
    assert req.duration_s == 17.0


@pytest.mark.parametrize("bad", [
    dict(phases=[]), dict(phases=[["U-D"], []]), dict(phases=[["U-D"]], measure_s=0.5),
    dict(phases=[["U-D"]], settle_s=-1.0),
])
def test_bad_phases_are_refused(bad):
    with pytest.raises(ValueError):
        PhasedRequest("A", "B", **bad)


@pytest.mark.netns
def test_flags_switch_in_phases_on_one_connection(testbed2x2):
    """Excluding a subflow mid-connection stops its payload, re-enabling it restarts it, and
    every phase has its own goodput; nothing of the run is left behind."""
    sf = testbed2x2.spec.subflow_names("A", "B")
    req = PhasedRequest("A", "B", [sf, [s for s in sf if s != "U-D"], sf], cc="cubic",
                        settle_s=2, measure_s=3)
    res = measure_phased(testbed2x2, req)
    assert res.flag_errors == []
    first, without, again = res.phases
    assert [p.intervals for p in res.phases] == [3, 3, 3]
    assert all(p.goodput_mbps and p.goodput_mbps > 1.0 for p in res.phases), res.phases
    assert all(p.sampled for p in res.phases), res.phases
    assert without.excluded == ["U-D"] and without.leaks == []
    # a subflow that moved nothing in a window may be missing from its samples: it counts 0, as
    # the leak check counts it
    assert without.subflow_bytes.get("U-D", 0) <= 64 * 1024, without.subflow_bytes
    assert first.subflow_bytes.get("U-D", 0) > 1_000_000, (first, res.raw)
    assert again.subflow_bytes.get("U-D", 0) > 1_000_000, (again, res.raw)
    switched = [e for e in res.upm_events if e.get("action") == "phase_flags"]
    assert [(e["phase"], e["backup"]) for e in switched] == [(1, True), (2, False)]
    assert tbmod.testbed_status(testbed2x2.name)["healthy"]

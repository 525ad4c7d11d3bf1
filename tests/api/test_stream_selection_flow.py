"""A stream campaign chooses PCDC's subflows by p99 frame delay, through the real flow on the
database: its selection probes are paced, a jittery subflow that adds bulk goodput is left out,
the sweep's PCDC arm runs what was kept, and the answer, the dashboard and the report show the
path."""

from __future__ import annotations

import json

import pytest

from probes.frames import FrameStats
from service.algorithm.objective import Objective
from service.algorithm.topology import TopologySpec
from service.flows.campaign import recording
from service.flows.campaign.calibration import next_step
from service.flows.campaign.executor import profile_of
from service.flows.campaign.finish import finish_campaign
from service.flows.takeaways import report
from service.flows.takeaways.report_data import report_data
from service.settings import Settings
from service.state import state_of
from service.state.selected import selected_subsets, subset_of_key
from service.store import inventory, recommendations
from service.store.measurements import MeasurementRecord
from tests.conftest import new_campaign

from .conftest import HAW, UIT
from .stepping import KernelOffers, probe_times

STREAM = {"kind": "stream", "bitrate_mbps": 0.3, "frame_rate_hz": 25}


def _used(step, names) -> frozenset[str]:
    return frozenset(step.allowed_subflows) if step.allowed_subflows else frozenset(names)


def _figures(step, names) -> tuple[float, float | None]:
    """(goodput, p99 ms) of a step: bulk, P-D carries 0.45, T-D 0.34 and both 0.75 Mbit/s; a
    paced 0.3 Mbit/s stream, P-D alone at 60 ms p99, T-D alone (jittery) at 400 ms, and both
    at 250 ms: frames wait for T-D's segments at reassembly."""
    used = _used(step, names)
    wobble = 1.0 + (0.01 if step.run % 2 else -0.01)
    if profile_of(Objective.model_validate(STREAM), step.phase).kind == "bulk":
        return {frozenset({"P-D"}): 0.45, frozenset({"T-D"}): 0.34}.get(used, 0.75) * wobble, None
    p99 = {frozenset({"P-D"}): 60.0, frozenset({"T-D"}): 400.0}.get(used, 250.0)
    return 0.3, p99 * wobble


def _record(session, campaign_id, step, names) -> None:
    goodput, p99 = _figures(step, names)
    raw = None
    if p99 is not None:
        frames = FrameStats(frames_sent=125, frames_received=125, frames_lost=0,
                            lost_fraction=0.0, delay_p99_ms=p99, delay_p50_ms=p99 / 2)
        raw = json.dumps({"frames": frames.model_dump(mode="json")})
    recording.record(session, MeasurementRecord(
        campaign_id=campaign_id, phase=step.phase, pm=step.pm, cc=step.cc, bs_mib=step.bs_mib,
        run=step.run, excluded_subflow=step.excluded_subflow,
        subflows=sorted(_used(step, names)), duration_s=2, goodput_mbps=[goodput, goodput],
        tool="mpcoa-paced" if raw else "test", raw_output=raw, **probe_times()))


def test_a_stream_drops_a_jittery_subflow_that_adds_goodput(db_session, client, auth):
    settings = Settings(run_campaigns=False, _env_file=None)
    topology = inventory.ensure_topology(
        db_session, spec=TopologySpec.model_validate({"local": UIT, "remote": HAW}))
    names = [sf.name for sf in topology.subflows]
    c = new_campaign(db_session, topology.id, ccs=["cubic"], runs=2, duration_s=2, mode="grid",
                     buffer_grid_mib=[0.05, 0.1, 0.2],
                     objective=Objective.model_validate(STREAM))
    prober = KernelOffers({"cubic"})
    steps = []
    while (advance := next_step(db_session, campaign_id=c.id, prober=prober,
                                settings=settings)).step is not None:
        steps.append(advance.step)
        _record(db_session, c.id, advance.step, names)
    assert advance.finish, c.error

    selection = [s for s in steps if s.phase == "selection"]
    probed = {subset_of_key(s.excluded_subflow) for s in selection}
    assert {("P-D",), ("T-D",), ("P-D", "T-D")} <= probed
    # bulk, both subflows together measured 0.75 against 0.45: a goodput selection keeps both
    assert selected_subsets(c) == {"cubic": ["P-D"]}
    note = state_of(c).selection.ccs["cubic"]
    assert note.metric == "p99_frame_delay" and "p99 frame delay" in note.why
    assert note.buffer_check is None  # a goodput check: not made for a stream
    start, stop = note.path
    assert start.decision == "start"
    assert start.estimate.p99_ms == pytest.approx(60.0, rel=0.02)
    assert stop.decision == "stop" and stop.subflow == "T-D"
    assert stop.gain.p99_change > 2  # both subflows: p99 more than 3 x higher
    assert stop.estimate.carries and stop.settled
    # the stream's PCDC arm ran what the selection kept; FullMesh every subflow
    for s in steps:
        if s.phase == "buffer" and s.pm == "PCDC":
            assert s.allowed_subflows == ("P-D",) or list(s.allowed_subflows) == ["P-D"]

    rec = recommendations.get_recommendation(
        db_session,
        recommendation_id=finish_campaign(db_session, campaign_id=c.id).recommendation_id)
    db_session.commit()
    assert rec.opm == "PCDC" and rec.outputs["subflows_used"] == ["P-D"]
    choice = rec.outputs["subset_choice"]
    assert choice["method"] == "measured selection by p99 frame delay"
    assert choice["subset"] == ["P-D"] and "lowers the p99 frame delay" in choice["why"]
    assert [p["decision"] for p in choice["path"]] == ["start", "stop"]

    page = client.get(f"/dashboard/recommendations/{rec.id}", headers=auth)
    assert page.status_code == 200, page.text
    assert "p99 frame delay ms" in page.text and "measured selection by p99" in page.text
    impact = client.get(f"/dashboard/topologies/{topology.id}/impact", headers=auth)
    assert impact.status_code == 200, impact.text
    assert "By frame delay" in impact.text  # the campaign's selection card

    # the report's selection page plots the path in milliseconds
    data = report_data(db_session, campaign_id=c.id)
    page = report._selection_page(data)
    assert page.axes[0].get_ylabel() == "cubic\np99 frame delay (ms)"
    assert report.render_pdf(data).startswith(b"%PDF")


def test_a_streams_selection_runs_on_the_reference_cc_and_the_others_share_it(db_session):
    """A stream below capacity fills no window: which subflows hold frames back is the paths'
    doing, so the selection's paced probes run on one CC and every other CC shares its SP*."""
    settings = Settings(run_campaigns=False, _env_file=None)
    topology = inventory.ensure_topology(
        db_session, spec=TopologySpec.model_validate({"local": UIT, "remote": HAW}))
    names = [sf.name for sf in topology.subflows]
    c = new_campaign(db_session, topology.id, ccs=["cubic", "reno"], runs=2, duration_s=2,
                     mode="adaptive", buffer_grid_mib=[0.05, 0.1, 0.2],
                     objective=Objective.model_validate(STREAM))
    prober = KernelOffers({"cubic", "reno"})
    steps = []
    while (advance := next_step(db_session, campaign_id=c.id, prober=prober,
                                settings=settings)).step is not None:
        steps.append(advance.step)
        _record(db_session, c.id, advance.step, names)
    assert advance.finish, c.error
    selection = [s for s in steps if s.phase == "selection"]
    assert selection and len({s.cc for s in selection}) == 1
    reference = selection[0].cc
    assert selected_subsets(c) == {"cubic": ["P-D"], "reno": ["P-D"]}
    other = next(cc for cc in ("cubic", "reno") if cc != reference)
    assert state_of(c).selection.ccs[other].shared_from == reference
    assert state_of(c).selection.ccs[reference].shared_from is None
    for s in steps:  # both CCs' PCDC arms run the shared SP*
        if s.phase == "buffer" and s.pm == "PCDC":
            assert list(s.allowed_subflows) == ["P-D"]

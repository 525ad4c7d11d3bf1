"""A stream campaign in adaptive mode sweeps its buffers by the adaptive stream rule: a fraction
of the grid's probes, a stalled point probed once, and the stored decision is the answer."""

from __future__ import annotations

import json

import pytest

from models import Recommendation
from probes.frames import FrameStats
from service.algorithm.objective import Objective
from service.algorithm.topology import TopologySpec
from service.flows.answers.decided import decided_stream
from service.flows.answers.stream_answer import stream_answer
from service.flows.campaign import recording
from service.flows.campaign.calibration import next_step
from service.flows.campaign.finish import finish_campaign
from service.settings import Settings
from service.state import state_of
from service.store import inventory
from service.store.measurements import MeasurementRecord
from tests.conftest import new_campaign

from .conftest import HU, SRL
from .stepping import KernelOffers, probe_times

pytestmark = pytest.mark.postgres

GRID = [0.02, 0.03, 0.04, 0.06, 0.08, 0.11, 0.15]


def frames(bs: float, cc: str) -> tuple[float, FrameStats]:
    """(goodput, frames): nothing below 0.04 MiB carries (the probe stalled), reno 30 ms, cubic
    60 ms from there."""
    if bs < 0.04:
        return 0.3, FrameStats(frames_sent=50, frames_received=5, frames_lost=45,
                               lost_fraction=0.9, delay_p99_ms=900.0, stalled="stalled")
    p99 = (30.0 if cc == "reno" else 60.0) + 10 * bs
    return 2.0, FrameStats(frames_sent=50, frames_received=50, frames_lost=0,
                           lost_fraction=0.0, delay_p99_ms=p99)


def test_a_stream_campaign_sweeps_adaptively_and_answers_with_its_decision(db_session):
    settings = Settings(run_campaigns=False, impact_max_runs=1, _env_file=None)
    objective = Objective.model_validate({"kind": "stream", "bitrate_mbps": 2})
    spec = TopologySpec.model_validate({"local": {**SRL, "isps": SRL["isps"][:1]},
                                        "remote": {**HU, "isps": HU["isps"][:1]}})
    c = new_campaign(db_session, inventory.ensure_topology(db_session, spec=spec).id,
                     ccs=["reno", "cubic"], runs=2, duration_s=2, buffer_grid_mib=GRID,
                     mode="adaptive", objective=objective)
    db_session.flush()
    buffer_steps = []
    prober = KernelOffers({"reno", "cubic"})
    while (advance := next_step(db_session, campaign_id=c.id, prober=prober,
                                settings=settings)).step is not None:
        step = advance.step
        tp, raw = 2.0, None
        if step.phase == "buffer":
            buffer_steps.append((step.pm, step.cc, step.bs_mib))
            tp, stats = frames(step.bs_mib, step.cc)
            raw = json.dumps({"frames": stats.model_dump(mode="json")})
        recording.record(db_session, MeasurementRecord(
            campaign_id=c.id, phase=step.phase, pm=step.pm, cc=step.cc, bs_mib=step.bs_mib,
            run=step.run, excluded_subflow=step.excluded_subflow, subflows=["U-C"],
            duration_s=2, goodput_mbps=[tp, tp], tool="mpcoa-paced", raw_output=raw,
            **probe_times()))
    assert advance.finish, c.error
    # one subflow: PCDC is FullMesh's probe, so two arms; the grid would be 2 x 7 x 2 probes
    assert {(pm, cc) for pm, cc, _ in buffer_steps} == {("FullMesh", "reno"),
                                                        ("FullMesh", "cubic")}
    assert len(buffer_steps) <= 10, buffer_steps
    for point in set(buffer_steps):
        if point[2] < 0.04:
            assert buffer_steps.count(point) == 1  # a stalled point: one probe
    decision = decided_stream(c)
    assert decision is not None and decision.settled
    assert state_of(c).sweep_decision.stop == "settled"
    answer = stream_answer(db_session, c, objective, c.delta)
    d = answer.decision
    # 0.04 MiB is at the carrying edge (0.03 stalled): the next buffer up is the answer
    assert (d.opm, d.occ, d.obs_mib) == ("FullMesh", "reno", 0.06)
    assert d.p99_ms == pytest.approx(30.6) and d.skipped_edge_mib == 0.04
    assert answer.outputs()["settled"] and answer.error is None
    # finished, the decision is the campaign's stored answer
    rec = db_session.get(Recommendation,
                         finish_campaign(db_session, campaign_id=c.id).recommendation_id)
    assert (rec.opm, rec.occ, rec.obs_mib) == ("FullMesh", "reno", 0.06)
    assert rec.outputs["stream"]["p99_ms"] == pytest.approx(30.6)


def test_a_failed_probe_at_the_best_arms_reference_point_is_asked_again(db_session):
    """A rejected probe (a backup subflow took reinjected bytes) says nothing about the stream:
    reno, the best arm, keeps its place when its first probe at the grid's middle failed."""
    settings = Settings(run_campaigns=False, impact_max_runs=1, _env_file=None)
    objective = Objective.model_validate({"kind": "stream", "bitrate_mbps": 2})
    spec = TopologySpec.model_validate({"local": {**SRL, "isps": SRL["isps"][:1]},
                                        "remote": {**HU, "isps": HU["isps"][:1]}})
    c = new_campaign(db_session, inventory.ensure_topology(db_session, spec=spec).id,
                     ccs=["reno", "cubic"], runs=2, duration_s=2, buffer_grid_mib=GRID,
                     mode="adaptive", objective=objective)
    db_session.flush()
    buffer_steps, failed = [], []
    prober = KernelOffers({"reno", "cubic"})
    while (advance := next_step(db_session, campaign_id=c.id, prober=prober,
                                settings=settings)).step is not None:
        step = advance.step
        tp, raw, status, error = 2.0, None, "ok", None
        if step.phase == "buffer":
            buffer_steps.append((step.pm, step.cc, step.bs_mib))
            tp, stats = frames(step.bs_mib, step.cc)
            raw = json.dumps({"frames": stats.model_dump(mode="json")})
            if step.cc == "reno" and not failed:
                failed.append(step.bs_mib)
                status, error = "failed", "subflow U-C: excluded but carried 4625 bytes"
        recording.record(db_session, MeasurementRecord(
            campaign_id=c.id, phase=step.phase, pm=step.pm, cc=step.cc, bs_mib=step.bs_mib,
            run=step.run, excluded_subflow=step.excluded_subflow, subflows=["U-C"],
            duration_s=2, goodput_mbps=[tp, tp] if status == "ok" else [],
            tool="mpcoa-paced", raw_output=raw if status == "ok" else None, status=status,
            error=error, **probe_times()))
    assert advance.finish, c.error
    assert failed and buffer_steps.count(("FullMesh", "reno", failed[0])) >= 2  # asked again
    d = stream_answer(db_session, c, objective, c.delta).decision
    assert (d.opm, d.occ) == ("FullMesh", "reno")
    assert "FullMesh/reno" in d.carrying

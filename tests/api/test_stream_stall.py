"""A paced probe whose connection stalled (the tool ended it at its duration plus a margin, its
unwritten frames lost, the cause stored with its frames) decides its point: the stream sweep
makes no other run there, and the answer says the point did not carry the stream and why."""

from __future__ import annotations

import json

import pytest

from probes.frames import FrameStats
from service.algorithm.objective import Objective
from service.flows.answers.stream_answer import stream_answer
from service.flows.campaign import recording
from service.flows.campaign.calibration import next_step
from service.settings import Settings
from service.store.measurements import MeasurementRecord

from .stepping import KernelOffers, probe_times
from .test_grid_extension import _campaign

pytestmark = pytest.mark.postgres

STALL = "the connection stalled: frame 7 of 50 not written within the duration plus 2 s"


def frames(stalled: bool) -> FrameStats:
    if stalled:  # 7 frames written, 5 arrived: the rest lost
        return FrameStats(frames_sent=50, frames_received=5, frames_lost=45, lost_fraction=0.9,
                          delay_p99_ms=900.0, stalled=STALL)
    return FrameStats(frames_sent=50, frames_received=50, frames_lost=0, lost_fraction=0.0,
                      delay_p99_ms=40.0)


@pytest.mark.parametrize("stalled_at", [(0.1,), (0.1, 0.2, 0.4)])
def test_a_stalled_point_is_decided_by_its_one_probe(db_session, stalled_at):
    """Stalls at the smallest buffer; then at every buffer (no arm carries: each says why)."""
    settings = Settings(run_campaigns=False, impact_max_runs=1, _env_file=None)
    objective = Objective.model_validate({"kind": "stream", "bitrate_mbps": 2})
    c = _campaign(db_session, objective=objective)
    c.runs = 2
    db_session.flush()
    prober = KernelOffers({"reno"})
    buffer_steps = []
    while (advance := next_step(db_session, campaign_id=c.id, prober=prober,
                                settings=settings)).step is not None:
        step = advance.step
        stall = step.phase == "buffer" and step.bs_mib in stalled_at
        raw = None
        if step.phase == "buffer":
            buffer_steps.append((step.pm, step.bs_mib, step.run))
            raw = json.dumps({"frames": frames(stall).model_dump(mode="json")})
        tp = 0.2 if stall else 2.0
        recording.record(db_session, MeasurementRecord(
            campaign_id=c.id, phase=step.phase, pm=step.pm, cc=step.cc, bs_mib=step.bs_mib,
            run=step.run, excluded_subflow=step.excluded_subflow, subflows=["U-C"],
            duration_s=2, goodput_mbps=[tp, tp], tool="mpcoa-paced", raw_output=raw,
            **probe_times()))
    assert advance.finish, c.error
    pms = sorted({pm for pm, _, _ in buffer_steps})
    assert pms
    for pm in pms:
        runs = {bs: sorted(r for p, b, r in buffer_steps if (p, b) == (pm, bs))
                for bs in c.buffer_grid_mib}
        # the stalled point: one probe, never retried into the same stall; the others: both
        assert runs == {bs: [1] if bs in stalled_at else [1, 2] for bs in c.buffer_grid_mib}
    answer = stream_answer(db_session, c, objective, c.delta)
    d = answer.decision
    assert d is not None
    stalled = [p for p in answer.points if p["bs_mib"] in stalled_at]
    assert len(stalled) == len(pms) * len(stalled_at)
    assert all(p["stalled"] == [STALL] and p["lost_fraction"] == [0.9] for p in stalled)
    assert not any("stalled" in p for p in answer.points if p["bs_mib"] not in stalled_at)
    if len(stalled_at) < len(c.buffer_grid_mib):
        assert d.opm is not None and d.obs_mib not in stalled_at
    else:  # nothing carries: each arm's reason names the stall
        assert d.opm is None and answer.error == "stream_not_carried"
        assert sorted(d.not_carrying) == sorted(f"{pm}/reno" for pm in pms)
        assert all(f"at 0.1 MiB {STALL}" in why for why in d.not_carrying.values())

"""Finishing a campaign returns what it did and left to do (`finish.Finished`): the answer
stored, the changes since the previous calibration recorded, and for a recalibration the re-apply
its executor hands on (`scheduling.reapply.after_finish`); a campaign already final says so
with no events. Seeded through the campaign's own flow (`next_step`, `recording`)."""

from __future__ import annotations

from sqlalchemy import select

from models import RecalibrationEvent
from service.algorithm.topology import TopologySpec
from service.flows.campaign.finish import (
    AnswerStored,
    Finished,
    ReapplyDue,
    RecalibrationRecorded,
    finish_campaign,
)
from service.flows.scheduling import reapply
from service.settings import Settings
from service.store import inventory
from tests.conftest import new_campaign

from .conftest import HU, SRL
from .stepping import drive


def _calibrated(session, topology_id: int, reason: str, knee_mib: float):
    settings = Settings(run_campaigns=False, impact_max_runs=1, _env_file=None)
    c = new_campaign(session, topology_id, reason=reason, ccs=["reno"], runs=1, duration_s=2,
                     buffer_grid_mib=[0.1, 0.2, 0.4], mode="grid")
    drive(session, c, lambda s: 9.0 * min(1.0, s.bs_mib / knee_mib) + 0.01 * s.run, settings,
          ccs={"reno"})
    return c


def test_finishing_returns_its_events_and_a_second_finish_none(db_session):
    spec = TopologySpec.model_validate({"local": {**SRL, "isps": SRL["isps"][:1]},
                                        "remote": {**HU, "isps": HU["isps"][:2]}})
    topology_id = inventory.ensure_topology(db_session, spec=spec).id
    first = _calibrated(db_session, topology_id, "tests", 0.1)
    done = finish_campaign(db_session, campaign_id=first.id)
    assert isinstance(done, Finished) and done.recommendation_id == first.recommendation_id
    assert done.recommendation_id is not None
    assert done.events == (AnswerStored(first.recommendation_id), RecalibrationRecorded(()))
    assert done.reapply_due is None  # a user's own calibration is the user's to apply
    assert reapply.after_finish(done, Settings(_env_file=None)) == []

    # a scheduled recalibration that came out otherwise (a larger buffer): its changes recorded,
    # and a re-apply due
    second = _calibrated(db_session, topology_id, "scheduled", 0.4)
    done = finish_campaign(db_session, campaign_id=second.id)
    recorded = db_session.scalars(select(RecalibrationEvent.id).where(
        RecalibrationEvent.campaign_id == second.id).order_by(RecalibrationEvent.id)).all()
    assert recorded and done.events[1] == RecalibrationRecorded(tuple(recorded))
    assert done.reapply_due == ReapplyDue(second.id, topology_id)
    db_session.commit()

    again = finish_campaign(db_session, campaign_id=second.id)  # a redelivered turn
    assert again == Finished(second.id, second.recommendation_id)

"""Warm recalibration: a scheduled campaign checks the last calibrated answer
with a few probes (the chosen arm at OBS, T*'s arm at its buffer) and only sweeps again when they
drifted; events say which happened."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import select

from models.history import RecalibrationEvent
from service.flows.answers.recommend import recommend
from service.flows.campaign.finish import finish_campaign
from service.flows.campaign.warm import WARM_RUNS, checks, drifted
from service.flows.scheduling.recalibration import queue_due_campaigns
from service.settings import Settings
from service.state import state_of
from service.store import campaigns, schedules
from tests.algorithm.paper_data import CCS
from tests.builders import post_topology

from .calibration import seed_srl_hu
from .conftest import HU, SRL
from .stepping import drive

pytestmark = pytest.mark.slow  # whole campaigns driven step by step: seconds of CPU each


def _calibrated_then_due(client, auth, db_session):
    """A calibrated topology (answer given) whose recalibration schedule just came due."""
    topo = post_topology(client, auth, SRL, HU)
    first = seed_srl_hu(db_session, topo["id"])["campaign"]
    rec = recommend(db_session, topology_id=topo["id"], queue_campaign=False).recommendation
    row = schedules.set_schedule(db_session, topology_id=topo["id"], cron="*/5 * * * *",
                                 parameters={"runs": 1, "ccs": list(CCS)})
    db_session.commit()
    settings = Settings(run_campaigns=False, _env_file=None)
    (cid,) = queue_due_campaigns(db_session, settings=settings,
                                 now=schedules.next_run(row) + timedelta(seconds=1))
    return first, rec, campaigns.get_campaign(db_session, campaign_id=cid), settings


def _answer_warm_probes(db_session, campaign, settings, goodput) -> list:
    """Measure every warm probe the campaign asks for with `goodput(step)`; the steps."""
    return drive(db_session, campaign, goodput, settings, ccs=CCS,
                 subflows=lambda step: step.allowed_subflows or ["all"],
                 stop=lambda step: step.phase != "warm")


def test_a_steady_network_confirms_the_last_answer_with_a_few_probes(client, auth, db_session):
    first, rec, warm, settings = _calibrated_then_due(client, auth, db_session)
    assert state_of(warm).warm.from_campaign == first.id
    t_star = rec.outputs["t_star"]

    def steady(step):  # what the last answer promised, give or take 2 %
        promised = rec.otp_mbps if step.bs_mib == rec.obs_mib and step.cc == rec.occ else (
            t_star["tp_mbps"])
        return promised * (1.02 if step.run % 2 else 0.98)

    steps = _answer_warm_probes(db_session, warm, settings, steady)
    # The chosen arm at OBS and T*'s arm at its buffer, WARM_RUNS each: nothing else.
    assert {(s.pm, s.cc, s.bs_mib) for s in steps} == {
        (rec.opm, rec.occ, rec.obs_mib), (t_star["pm"], t_star["cc"], t_star["bs_mib"])}
    assert len(steps) == 2 * WARM_RUNS and state_of(warm).budget.planned == 2 * WARM_RUNS
    rec_id = finish_campaign(db_session, campaign_id=warm.id).recommendation_id
    again = db_session.get(type(rec), rec_id)
    assert (again.opm, again.occ, again.obs_mib) == (rec.opm, rec.occ, rec.obs_mib)
    assert "warm_confirmed" in again.quality_flags
    assert warm.state == "done" and state_of(warm).warm.verdict == "warm_confirmed"
    kinds = db_session.scalars(select(RecalibrationEvent.kind).where(
        RecalibrationEvent.campaign_id == warm.id)).all()
    assert kinds == ["warm_confirmed", "warm_confirmed"]


def test_drift_widens_to_the_full_campaign(client, auth, db_session):
    _first, rec, warm, settings = _calibrated_then_due(client, auth, db_session)

    def halved(step):  # the chosen arm lost half its goodput; T*'s arm is as promised
        if step.bs_mib == rec.obs_mib and step.cc == rec.occ:
            return rec.otp_mbps / 2
        return rec.outputs["t_star"]["tp_mbps"]

    steps = _answer_warm_probes(db_session, warm, settings, halved)
    assert steps[-1].phase == "impact"  # the full campaign goes on after the checks
    assert state_of(warm).warm.verdict == "warm_drifted"
    events = db_session.scalars(select(RecalibrationEvent).where(
        RecalibrationEvent.campaign_id == warm.id)).all()
    assert [(e.kind, e.change_pct) for e in events] == [("warm_drifted", pytest.approx(-50.0))]
    # progress: the warm probes plus the whole plan
    assert state_of(warm).budget.planned > 2 * WARM_RUNS + len(CCS)


def test_drift_needs_more_than_delta_and_more_than_the_noise():
    assert drifted([9.5, 9.6, 9.4], 10.0, 0.07) == (False, pytest.approx(0.7))
    assert drifted([8.0, 8.1, 7.9], 10.0, 0.07)[0] is True
    # noisy checks: a 20 % move inside a wide interval is not called drift
    off, tolerance = drifted([4.0, 12.0, 8.0], 10.0, 0.07)
    assert off is False and tolerance > 2.0


def test_a_check_probes_pcdc_on_the_subset_the_campaign_measured(client, auth, db_session):
    """An adaptive campaign probed its PCDC arms on the measured selection's SP*, not Ω's: T*'s
    arm is checked on that subset, else a check of a configuration never measured would call
    drift."""
    first, rec, _warm, _settings = _calibrated_then_due(client, auth, db_session)
    other = next(cc for cc in CCS if cc != rec.occ)
    every = [sf.name for sf in first.topology.subflows]
    measured = every[:1]
    campaigns.update_state(first, selection={"done": True, "ccs": {
        other: {"subset": measured, "usable": True}}})
    rec.outputs = {**rec.outputs, "t_star": {"pm": "PCDC", "cc": other, "bs_mib": 1.0,
                                             "tp_mbps": 10.0}}
    found = {c.step_base.cc: c.step_base.allowed_subflows for c in checks(
        db_session, recommendation=rec, campaign_id=first.id) if c.step_base.pm == "PCDC"}
    assert found[other] == tuple(measured)

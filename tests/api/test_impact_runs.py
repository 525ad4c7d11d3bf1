"""The impact phase decides SP* on settled signs: an Omega whose confidence interval contains 0
gets more runs while the budget allows, and what stays unsettled is flagged."""

from __future__ import annotations

from service.algorithm.topology import TopologySpec
from service.flows.campaign import recording
from service.flows.campaign.budget import impact_runs
from service.flows.campaign.calibration import next_step
from service.settings import Settings
from service.state import state_of
from service.store import campaigns, inventory
from service.store.measurements import MeasurementRecord
from tests.conftest import new_campaign

from .conftest import HU, SRL
from .stepping import KernelOffers, probe_times

RENO = KernelOffers({"reno"})


def _topology(session) -> int:
    spec = TopologySpec.model_validate({"local": {**SRL, "isps": SRL["isps"][:2]},
                                    "remote": {**HU, "isps": HU["isps"][:1]}})
    return inventory.ensure_topology(session, spec=spec).id


def _record_run(session, cid, run, tp0, tpi):
    for excluded, tp in [("", tp0), *tpi.items()]:
        recording.record(
            session, MeasurementRecord(
                campaign_id=cid, phase="impact", pm="FullMesh", cc="reno", bs_mib=0.0,
            run=run, excluded_subflow=excluded, subflows=["U-C", "K-C"], duration_s=2,
            goodput_mbps=[tp, tp], tool="test", **probe_times()),
        )


def test_unsettled_signs_get_more_runs_then_are_flagged(db_session):
    settings = Settings(run_campaigns=False, impact_max_runs=3, _env_file=None)
    topology_id = _topology(db_session)
    c = new_campaign(db_session, topology_id, ccs=["reno"], runs=1, duration_s=2,
                     buffer_grid_mib=[0.1, 0.2, 0.4], mode="grid")
    # Run 1: U-C clearly helps (Omega 0.5), K-C is near 0 (Omega -0.02).
    _record_run(db_session, c.id, 1, 10.0, {"U-C": 5.0, "K-C": 10.2})
    advance = next_step(db_session, campaign_id=c.id, prober=RENO, settings=settings)
    # One run gives no interval: every sign is unsettled, so a second impact run comes first.
    assert advance.step.phase == "impact" and advance.step.run == 2
    assert impact_runs(c) == {"reno": 2}
    # K-C -0.03: two close negative Omegas; a third run could settle the sign, so it comes.
    _record_run(db_session, c.id, 2, 10.0, {"U-C": 5.2, "K-C": 10.3})
    advance = next_step(db_session, campaign_id=c.id, prober=RENO, settings=settings)
    assert advance.step.phase == "impact" and advance.step.run == 3
    _record_run(db_session, c.id, 3, 10.0, {"U-C": 4.9, "K-C": 9.8})  # K-C +0.02: straddles 0
    advance = next_step(db_session, campaign_id=c.id, prober=RENO, settings=settings)
    # impact_max_runs reached: the buffer sweep starts, and K-C is noted as unsettled.
    assert advance.step.phase == "buffer"
    assert campaigns.report(c)["unsettled_omegas"] == {"reno": ["K-C"]}
    assert state_of(c).budget.planned == 3 * 3 + 2 * 3  # three impact runs of 3 probes, the sweep


def test_no_extra_impact_run_past_the_budget(db_session):
    settings = Settings(run_campaigns=False, impact_max_runs=5, _env_file=None)
    topology_id = _topology(db_session)
    # Budget: the one impact run (3 probes) and the sweep (2 PM x 3 buffers), 2 s each.
    c = new_campaign(db_session, topology_id, ccs=["reno"], runs=1, duration_s=2,
                     buffer_grid_mib=[0.1, 0.2, 0.4], probe_seconds_budget=18,
                     mode="grid")
    _record_run(db_session, c.id, 1, 10.0, {"U-C": 5.0, "K-C": 10.2})
    advance = next_step(db_session, campaign_id=c.id, prober=RENO, settings=settings)
    assert advance.step.phase == "buffer"
    assert sorted(campaigns.report(c)["unsettled_omegas"]["reno"]) == ["K-C", "U-C"]

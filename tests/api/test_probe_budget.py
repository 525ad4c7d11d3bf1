"""One budget: the probe-seconds a campaign plans and spends per phase (impact, sweep, warm),
`probes_total` as their sum, and `remaining_s` with one meaning (probe time left) in the store's
fleet rows and in GET /campaigns."""

from __future__ import annotations

from service.algorithm.topology import TopologySpec
from service.flows.campaign import budget
from service.flows.campaign.calibration import next_step
from service.flows.campaign.finish import finish_campaign
from service.settings import Settings
from service.state import put_state, state_of
from service.store import inventory
from tests.conftest import new_campaign

from .conftest import HU, SRL
from .stepping import KernelOffers, drive, record_step

DURATION_S = 2  # what record_step stores per probe


def _campaign(session):
    spec = TopologySpec.model_validate({"local": {**SRL, "isps": SRL["isps"][:1]},
                                    "remote": {**HU, "isps": HU["isps"][:2]}})
    topology_id = inventory.ensure_topology(session, spec=spec).id
    return new_campaign(session, topology_id, ccs=["reno"], runs=1, duration_s=DURATION_S,
                        buffer_grid_mib=[0.1, 0.2, 0.4], mode="grid")


def test_the_plan_and_the_spending_per_phase(client, auth, db_session):
    settings = Settings(run_campaigns=False, impact_max_runs=1, _env_file=None)
    c = _campaign(db_session)
    db_session.commit()
    # The plan from the start: 1 CC x 1 run x (TP_0 + 2 TP_i); 2 PMs x 3 buffers x 1 run.
    planned = budget.summary(c)["planned"]
    assert planned == {"impact": {"probes": 3, "probe_seconds": 6.0},
                       "sweep": {"probes": 6, "probe_seconds": 12.0}}
    assert state_of(c).budget.planned == 9
    shown = client.get(f"/campaigns/{c.id}", headers=auth).json()
    assert shown["notes"]["probe_budget"]["planned"] == planned
    assert shown["remaining_s"] == 9 * DURATION_S and shown["progress"] == 0.0

    first = next_step(db_session, campaign_id=c.id, prober=KernelOffers({"reno"}),
                      settings=settings).step
    record_step(db_session, c.id, first, 9.0)
    db_session.commit()
    shown = client.get(f"/campaigns/{c.id}", headers=auth).json()
    assert shown["remaining_s"] == (9 - 1) * DURATION_S == budget.remaining_s(c)
    assert shown["notes"]["probe_budget"]["spent"] == {
        "impact": {"probes": 1, "probe_seconds": 2.0}}

    recorded = {"impact": 1, "sweep": 0}
    for step in drive(db_session, c, lambda s: 9.0 * min(1.0, s.bs_mib / 0.1), settings,
                      ccs={"reno"}):
        recorded["sweep" if step.phase == "buffer" else "impact"] += 1
    finish_campaign(db_session, campaign_id=c.id)
    db_session.commit()
    # A flat sweep fails the quality gate: more rounds were planned, and all of them spent.
    b = state_of(c).budget
    assert recorded["impact"] == 3 and recorded["sweep"] == 6 * (1 + b.extra_rounds)
    spent = budget.summary(c)["spent"]
    assert spent == {phase: {"probes": n, "probe_seconds": n * DURATION_S * 1.0}
                     for phase, n in recorded.items()}
    assert sum(v["probes"] for v in spent.values()) == b.done == b.planned
    assert sum(v["probe_seconds"] for v in spent.values()) == state_of(c).budget.used_s
    shown = client.get(f"/campaigns/{c.id}", headers=auth).json()
    assert shown["state"] == "done" and shown["remaining_s"] == 0 and shown["progress"] == 1.0


def test_a_budget_that_cannot_cover_the_impact_phase_fails_the_campaign(db_session):
    c = _campaign(db_session)
    put_state(c, state_of(c).with_budget(cap_s=2 * DURATION_S))  # 2 probes of the impact phase's 3
    settings = Settings(run_campaigns=False, impact_max_runs=1, _env_file=None)
    drive(db_session, c, lambda _s: 9.0, settings, ccs={"reno"}, finishes=False)
    assert c.state == "failed" and "before the impact phase ended" in c.error
    assert budget.summary(c)["spent"]["impact"]["probes"] == 2
    assert budget.remaining_s(c) == 0

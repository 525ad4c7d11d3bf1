"""The autotune phase under a budget that runs short half-way through a point: the point the
budget covered when it began is finished (both runs), and none is begun after it."""

from __future__ import annotations

from service.algorithm.autotune_ceiling import CEILING_RUNS
from service.algorithm.topology import TopologySpec
from service.flows.campaign import budget
from service.flows.campaign.finish import finish_campaign
from service.settings import Settings
from service.state import put_state, state_of
from service.store import inventory, recommendations
from tests.conftest import new_campaign

from .conftest import HU, SRL
from .stepping import drive, record_step

DURATION_S = 2  # what record_step charges per probe unless told


def _goodput(step) -> float:
    if step.phase in ("impact", "selection"):
        return 10.0
    jitter = 0.05 if step.run % 2 else -0.05
    return 10.0 * min(1.0, step.bs_mib / 0.4) + jitter


def test_a_begun_ceiling_is_finished_when_its_first_probe_ran_long(db_session):
    settings = Settings(run_campaigns=False, impact_max_runs=1, _env_file=None)
    spec = TopologySpec.model_validate({"local": {**SRL, "isps": SRL["isps"][:1]},
                                        "remote": {**HU, "isps": HU["isps"][:2]}})
    topology_id = inventory.ensure_topology(db_session, spec=spec).id
    c = new_campaign(db_session, topology_id, ccs=["reno"], runs=2, duration_s=DURATION_S,
                     buffer_grid_mib=[0.1, 0.2, 0.4, 0.8], mode="adaptive")
    before = drive(db_session, c, _goodput, settings, ccs={"reno"},
                   stop=lambda s: s.phase == "autotune")
    first = before[-1]
    assert first.phase == "autotune" and first.run == 1, first
    # The budget covers exactly this point's runs at the expected cost; then the first probe
    # runs five times as long as planned (a busy host), which leaves less than one probe.
    b = state_of(c).budget
    put_state(c, state_of(c).with_budget(
        cap_s=b.used_s + CEILING_RUNS * budget.probe_cost_s(c)))
    record_step(db_session, c.id, first, _goodput(first), duration_s=5 * DURATION_S)
    assert not budget.affords(c)
    after = drive(db_session, c, _goodput, settings, ccs={"reno"})
    # the point is finished, and no other is begun
    assert [(s.phase, s.bs_mib, s.run) for s in after] == [("autotune", first.bs_mib, 2)]
    rec = recommendations.get_recommendation(
        db_session, recommendation_id=finish_campaign(db_session, campaign_id=c.id)
        .recommendation_id)
    # one ceiling, measured twice: the answer's ceiling is it, with an interval of its own
    assert rec.outputs["autotune_max_mib"] == first.bs_mib
    low, high = rec.outputs["autotune_interval_mbps"]
    assert low < high

"""A turn (`calibration.next_step`) reads the campaign's measurements once: every phase asks its
context (`phases.base.Context.measurements`), not the table, for what was stored."""

from __future__ import annotations

from sqlalchemy import event

from models import MeasurementPhase
from service.algorithm.topology import TopologySpec
from service.flows.campaign.calibration import next_step
from service.settings import Settings
from service.store import inventory
from tests.conftest import new_campaign

from .conftest import HU, SRL
from .stepping import KernelOffers, drive


def test_a_turn_reads_the_measurements_once(db_session):
    settings = Settings(run_campaigns=False, impact_max_runs=1, _env_file=None)
    spec = TopologySpec.model_validate({"local": {**SRL, "isps": SRL["isps"][:1]},
                                        "remote": {**HU, "isps": HU["isps"][:2]}})
    topology_id = inventory.ensure_topology(db_session, spec=spec).id
    c = new_campaign(db_session, topology_id, ccs=["reno"], runs=1, duration_s=2,
                     buffer_grid_mib=[0.1, 0.2, 0.4], mode="grid")
    # every impact probe answered; the sweep's first probe asked, not recorded
    steps = drive(db_session, c, lambda s: 9.0, settings, ccs={"reno"},
                  stop=lambda s: s.phase == MeasurementPhase.SWEEP)
    assert steps[-1].phase == MeasurementPhase.SWEEP and len(steps) == 4  # TP_0, 2 TP_i

    statements: list[str] = []

    def seen(conn, cursor, statement, *args) -> None:
        if "FROM measurements" in statement:
            statements.append(statement)

    engine = db_session.get_bind()
    event.listen(engine, "before_cursor_execute", seen)
    try:
        # the ccs, warm and impact phases pass (the impact results are stored), and the grid
        # sweep asks for the same probe: each read what was measured
        again = next_step(db_session, campaign_id=c.id, prober=KernelOffers({"reno"}),
                          settings=settings).step
    finally:
        event.remove(engine, "before_cursor_execute", seen)
    assert again == steps[-1]
    assert len(statements) == 1, statements

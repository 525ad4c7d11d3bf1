"""An adaptive campaign through the real flow on a path whose capacity cycles (field-lte.yaml's
40 s LTE cycle, simulated: each probe's 1 s goodputs follow the capacity at the time it ran):
the answer is not settled from runs of one phase, says the path varies and by how much, and its
interval covers that; on a steady path the answer says nothing of it."""

from __future__ import annotations

import random
from datetime import timedelta

from service.algorithm.adaptive.time_spread import SETTLE_SPAN_S, VARYING_MAX_RUNS
from service.algorithm.topology import TopologySpec
from service.flows.campaign import recording
from service.flows.campaign.calibration import next_step
from service.flows.campaign.finish import finish_campaign
from service.settings import Settings
from service.state import state_of
from service.store import inventory, measurements, recommendations
from service.store.measurements import MeasurementRecord
from tests.conftest import new_campaign
from tests.support import ago

from .conftest import HU, SRL
from .stepping import KernelOffers

GRID = [0.05, 0.1, 0.2, 0.4, 0.8, 1.6]
LTE_STEPS = [(0, 10.0), (8, 3.0), (14, 6.0), (24, 1.5), (30, 8.0)]
GAP_S = 9.0  # one probe of 5 s and what runs around it


def _capacity(t: float, moving: bool) -> float:
    if not moving:
        return 10.0
    return 4.0 + [rate for start, rate in LTE_STEPS if t % 40 >= start][-1]


def _run(db_session, moving: bool):
    settings = Settings(run_campaigns=False, impact_max_runs=1, _env_file=None)
    spec = TopologySpec.model_validate({"local": {**SRL, "isps": SRL["isps"][:1]},
                                        "remote": {**HU, "isps": HU["isps"][:2]}})
    topology_id = inventory.ensure_topology(db_session, spec=spec).id
    c = new_campaign(db_session, topology_id, ccs=["reno", "cubic"], runs=2, duration_s=5,
                     buffer_grid_mib=GRID, mode="adaptive")
    rng = random.Random(7)
    knee = {"reno": 0.4, "cubic": 0.2}
    clock, t0 = 0.0, ago(days=1)
    prober = KernelOffers(("reno", "cubic"))
    while (advance := next_step(db_session, campaign_id=c.id, prober=prober,
                                settings=settings)).step is not None:
        step = advance.step
        shape = min(1.0, step.bs_mib / knee[step.cc]) if step.phase == "buffer" else 1.0
        series = [_capacity(clock + k + 0.5, moving) * 0.9 * shape * (1 + rng.gauss(0, 0.03))
                  for k in range(5)]
        start = t0 + timedelta(seconds=clock)
        recording.record(db_session, MeasurementRecord(
            campaign_id=c.id, phase=step.phase, pm=step.pm, cc=step.cc, bs_mib=step.bs_mib,
            run=step.run, excluded_subflow=step.excluded_subflow, subflows=["U-C"],
            duration_s=5, goodput_mbps=series, tool="test", started_at=start,
            finished_at=start + timedelta(seconds=5)))
        clock += GAP_S
    assert advance.finish, c.error
    note = state_of(c).sweep_decision
    runs = [m for m in measurements.list_buffer_runs(db_session, campaign_id=c.id)
            if (m.pm, m.cc, float(m.bs_mib))
            == (note.decision.opm, note.decision.occ, note.decision.obs_mib)]
    rec = recommendations.get_recommendation(
        db_session,
        recommendation_id=finish_campaign(db_session, campaign_id=c.id).recommendation_id)
    return c, note, runs, rec


def test_an_answer_on_a_cycling_path_is_spread_in_time_and_says_it_varies(db_session):
    _, note, runs, rec = _run(db_session, moving=True)
    assert note.stop == "settled"
    variation = note.variation.to_dict()
    assert variation["varies"] is True
    # not settled from one phase: the answer's runs spread over a minute, or as many as allowed
    starts = sorted(m.started_at for m in runs)
    assert (len(runs) >= 4 and (starts[-1] - starts[0]).total_seconds() >= 60) or (
        len(runs) >= VARYING_MAX_RUNS)
    promise = rec.outputs["promise"]
    assert promise["variation"] == variation
    assert "path_varies" in rec.quality_flags
    assert "the path varies" in promise["statement"]
    # the interval covers what the answer's own runs read, and most of its seconds
    means = [m.mean_goodput_mbps for m in runs]
    assert promise["low_mbps"] <= min(means) and max(means) <= promise["high_mbps"]
    assert promise["low_mbps"] <= variation["p10_mbps"] < variation["p90_mbps"]
    assert variation["spread_mbps"] > 0.2 * rec.otp_mbps


def test_an_answer_on_a_steady_path_does_not_say_it_varies(db_session):
    _, note, runs, rec = _run(db_session, moving=False)
    assert note.stop == "settled"
    assert note.variation.varies is False
    assert "path_varies" not in rec.quality_flags
    assert "varies" not in rec.outputs["promise"]["statement"]
    starts = sorted(m.started_at for m in runs)
    # two runs of one phase are not enough even here: a third, or a span of SETTLE_SPAN_S
    assert len(runs) >= 3 or (starts[-1] - starts[0]).total_seconds() >= SETTLE_SPAN_S

"""Synthetic campaigns through the service's own pipeline, from the paper's Tables 2 and 4.

Impact-phase runs have TP_i / TP_0 = 1 - Omega (Table 2); buffer-phase runs follow the Table 4
curves plus seeded noise. The service then derives Omegas, SP* and fits from what was recorded.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import numpy as np

from service.flows.campaign import recording
from service.flows.campaign.derive import fit_from_runs, impact_from_runs
from service.store import campaigns, results
from service.store.measurements import MeasurementRecord
from tests.algorithm.paper_data import CCS, TABLE2, TABLE4
from tests.conftest import new_campaign
from tests.support import ago

GRID = [0.5, 2.5, 5.0, 7.5, 10.0, 12.5, 15.0, 17.5, 20.0, 22.5, 25.0, 27.5, 30.0]
RUNS = 3
RTT_MS = 310.0


def seed_srl_hu(session, topology_id: int, noise: float = 0.3, seed: int = 7,
                runs: int = RUNS, t0: datetime | None = None, commit: bool = True,
                model_kind: str | None = "paper") -> dict:
    """A finished SRL-HU campaign with measurements, impact factors and fits; returns counts.
    `model_kind` None: production's default model. `t0`: when its first probe ran (a day ago
    unless given: its data fresh)."""
    rng = np.random.default_rng(seed)
    kind = {} if model_kind is None else {"model_kind": model_kind}
    campaign = new_campaign(
        session, topology_id, ccs=list(CCS), buffer_grid_mib=GRID, runs=runs, duration_s=10,
        **kind,
    )
    campaigns.set_state(session, campaign_id=campaign.id, state="running")
    t0 = t0 or ago(days=1)
    subflows = list(TABLE2["SRL-HU"])
    count = 0

    def record(**kw):
        nonlocal count
        start = t0 + timedelta(seconds=15 * count)
        recording.record(
            session, MeasurementRecord(
            campaign_id=campaign.id,
            duration_s=10,
            tool="synthetic",
            tool_version="1",
            raw_output="{}",
            started_at=start,
            finished_at=start + timedelta(seconds=10),
            rtt_ms={sf: RTT_MS for sf in kw["subflows"]},
            **kw),
        )
        count += 1

    for k, cc in enumerate(CCS):
        for run in range(runs):
            record(phase="impact", pm="FullMesh", cc=cc, bs_mib=30.0, run=run,
                   subflows=subflows, goodput_mbps=[50.0] * 10)
            for sf in subflows:
                omega = TABLE2["SRL-HU"][sf][k]
                record(phase="impact", pm="FullMesh", cc=cc, bs_mib=30.0, run=run,
                       excluded_subflow=sf, subflows=[s for s in subflows if s != sf],
                       goodput_mbps=[50.0 * (1 - omega)] * 10)
    impact = impact_from_runs(session, campaign_id=campaign.id, subflows=subflows)
    results.store_impact(session, campaign_id=campaign.id, results=impact)
    subsets = {r.cc: r.subset for r in impact}
    for pm, curves in TABLE4["SRL-HU"].items():
        for cc, (a, b, c) in curves.items():
            for bs in GRID:
                for run in range(runs):
                    tp = a + b * bs + c * bs * bs + rng.normal(0, noise)
                    used = subflows if pm == "FullMesh" else subsets[cc]
                    record(phase="buffer", pm=pm, cc=cc, bs_mib=bs, run=run, subflows=used,
                           goodput_mbps=[max(tp, 0.0)] * 3)
    fits = fit_from_runs(session, campaign=campaign).fits
    stored = results.store_fits(session, campaign_id=campaign.id, fits=fits)
    campaigns.set_state(session, campaign_id=campaign.id, state="done")
    if commit:
        session.commit()
    return {"campaign": campaign, "measurements": count, "fits": stored, "impact": impact}

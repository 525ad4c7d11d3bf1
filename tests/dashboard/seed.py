"""Data for the dashboard tests, stored through the service layer as the workers would store it.

- SRL -> HU (the paper's worst scenario) with two campaigns: an older one that only measured
  impact factors (some Omegas of the other sign), and a finished one whose impact factors and fits
  are derived by the service from recorded runs (Table 2 Omegas; Table 4 curves plus noise).
- UiT -> HAW with a running campaign (for the live progress) and nothing else (empty states).
- UNIS -> HiN with a finished campaign whose runs are so noisy that its fits fail the quality gate.
- HU -> SRL with a finished stream campaign (paced probes with their `frames.csv`) and its answer.

Campaigns take production's default settings (model kind, mode), as `mpcoa demo` and the API's
queued campaigns do.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import numpy as np
from sqlalchemy.orm import Session

from probes.vocabulary import ISP, Site
from service.algorithm.impact import impact_from_omegas
from service.algorithm.objective import Objective
from service.algorithm.topology import TopologySpec
from service.flows.answers.recommend import recommend
from service.flows.campaign import recording
from service.flows.campaign.derive import fit_from_runs
from service.store import campaigns, inventory, results
from service.store.measurements import MeasurementRecord
from tests.algorithm.paper_data import CCS, SITES, TABLE2, TABLE4
from tests.api.calibration import seed_srl_hu
from tests.api.stream_seed import STREAM, seed_stream
from tests.conftest import new_campaign

GRID = [0.5, 2.5, 5.0, 7.5, 10.0, 12.5, 15.0, 17.5, 20.0, 22.5, 25.0, 27.5, 30.0]
RUNS = 2
RTT_MS = 310.0
# Free text is the one place a user can put markup; the pages must show it, not run it.
HOSTILE_DESCRIPTION = '<script>window.__pwned = 1</script><b>SRL & "lab"</b>'
# The older campaign's Omegas differ in sign from Table 2 here: (subflow, cc) -> value.
FLIPPED = {("K-CU", "reno"): 0.052, ("P-C", "cubic"): 0.118, ("U-CU", "olia"): -0.044}


def site(name: str) -> Site:
    return Site(
        name=name,
        isps=[ISP(name=n, label=lb, down_kbps=d, up_kbps=u) for n, lb, d, u in SITES[name]],
    )


@dataclass
class Seeded:
    topology_id: int  # SRL -> HU, calibrated
    old_campaign_id: int
    campaign_id: int
    empty_topology_id: int  # UiT -> HAW, nothing measured yet
    running_campaign_id: int
    noisy_topology_id: int  # UNIS -> HiN, fits below the quality gate
    noisy_campaign_id: int
    omegas: dict[tuple[str, str], float]  # (subflow, cc) -> stored Omega of the newest campaign
    stream_topology_id: int = 0  # HU -> SRL, a stream campaign and its answer
    stream_campaign_id: int = 0
    stream_recommendation_id: int = 0


def seed(session: Session) -> Seeded:
    srl = inventory.create_site(session, spec=site("SRL"), description=HOSTILE_DESCRIPTION)
    hu = inventory.create_site(session, spec=site("HU"))
    subflows = TopologySpec(local=site("SRL"), remote=site("HU")).subflow_names()
    topology = inventory.create_topology(
        session,
        local_site_id=srl.id,
        remote_site_id=hu.id,
        rtts_ms={name: RTT_MS for name in subflows},
    )

    # An earlier calibration that measured impact factors only.
    old = new_campaign(
        session, topology.id, ccs=list(CCS), buffer_grid_mib=GRID, runs=RUNS, duration_s=10
    )
    campaigns.set_state(session, campaign_id=old.id, state="running")
    old_results = []
    for k, cc in enumerate(CCS):
        omegas = {sf: FLIPPED.get((sf, cc), TABLE2["SRL-HU"][sf][k]) for sf in subflows}
        old_results.append(impact_from_omegas(cc, omegas))
    results.store_impact(session, campaign_id=old.id, results=old_results)
    campaigns.set_state(session, campaign_id=old.id, state="done")

    campaign = _calibrate(session, topology.id, subflows)

    uit = inventory.create_site(session, spec=site("UiT"))
    haw = inventory.create_site(session, spec=site("HAW"))
    empty = inventory.create_topology(session, local_site_id=uit.id, remote_site_id=haw.id)
    running = new_campaign(
        session,
        empty.id,
        ccs=["cubic", "reno"],
        buffer_grid_mib=[1.0, 2.0, 4.0],
        runs=1,
        duration_s=5,
    )
    campaigns.set_state(session, campaign_id=running.id, state="running")

    unis = inventory.create_site(session, spec=site("UNIS"))
    hin = inventory.create_site(session, spec=site("HiN"))
    noisy = inventory.create_topology(session, local_site_id=unis.id, remote_site_id=hin.id)
    noisy_campaign = _noisy_calibration(session, noisy.id)

    reverse = inventory.create_topology(session, local_site_id=hu.id, remote_site_id=srl.id)
    stream_campaign = seed_stream(session, reverse.id)
    stream_answer = recommend(session, topology_id=reverse.id, queue_campaign=False,
                              objective=Objective.model_validate(STREAM))
    session.commit()

    omegas = {
        (sf, r.cc): value
        for r in results.impact_results(session, campaign_id=campaign.id)
        for sf, value in r.omegas.items()
    }
    return Seeded(
        topology.id, old.id, campaign.id, empty.id, running.id, noisy.id, noisy_campaign.id, omegas,
        reverse.id, stream_campaign.id, stream_answer.recommendation_id or 0,
    )


def _noisy_calibration(session: Session, topology_id: int):
    """Buffer-phase runs of UNIS-HiN (Table 4) drowned in noise: R^2 well below 0.90."""
    rng = np.random.default_rng(5)
    campaign = new_campaign(
        session, topology_id, ccs=list(CCS), buffer_grid_mib=GRID, runs=RUNS, duration_s=10,
        mode="grid",
    )
    campaigns.set_state(session, campaign_id=campaign.id, state="running")
    start = datetime.now(UTC) - timedelta(days=1)
    for pm, curves in TABLE4["UNIS-HiN"].items():
        for cc, (a, b, c) in curves.items():
            for bs in GRID:
                for run in range(RUNS):
                    tp = a + b * bs + c * bs * bs + rng.normal(0, 70.0)
                    recording.record(
                        session, MeasurementRecord(
                        campaign_id=campaign.id,
                        phase="buffer",
                        pm=pm,
                        cc=cc,
                        bs_mib=bs,
                        run=run,
                        subflows=["U-U"],
                        duration_s=10,
                        goodput_mbps=[max(tp, 1.0)] * 3,
                        tool="synthetic",
                        started_at=start,
                        finished_at=start),
                    )
    fits = fit_from_runs(session, campaign=campaign).fits
    results.store_fits(session, campaign_id=campaign.id, fits=fits)
    campaigns.set_state(session, campaign_id=campaign.id, state="done")
    return campaign


def _calibrate(session: Session, topology_id: int, subflows: list[str]):
    """A finished campaign: runs recorded, then Omegas, SP* and fits derived by the service."""
    del subflows  # the SRL-HU topology's own
    t0 = datetime.now(UTC) - timedelta(days=2)
    return seed_srl_hu(
        session, topology_id, seed=11, runs=RUNS, t0=t0, commit=False, model_kind=None
    )["campaign"]

"""A provisional answer, before any calibration: the paper's rules (Section 5.3 and 6) --
FullMesh for a homogeneous topology, PCDC for a heterogeneous one, buffer 50 % of Eq. 1 -- and
the campaign that will calibrate the topology, as the caller gives it (`Calibrating`: a request
queues one, or reuses the one queued/running, so that a later request gets a calibrated answer;
a finishing campaign queues none)."""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy.orm import Session

from models import Campaign, Recommendation, utcnow
from probes.vocabulary import FULLMESH, PCDC, PathManager

from ...algorithm.objective import Objective
from ...store import recommendations
from .answer import Outputs
from .eq1 import traditional_eq1
from .snapshot import TopologySnapshot

#: The campaign that will calibrate the topology (None: none) and whether it was queued now.
Calibrating = Callable[[], tuple[Campaign | None, bool]]


def provisional_answer(
    session: Session,
    snap: TopologySnapshot,
    delta: float,
    lo: float,
    hi: float,
    flags: list[str],
    inputs: dict,
    calibrating: Calibrating,
    more_provenance: dict | None = None,
    objective: Objective | None = None,
) -> tuple[Recommendation, Campaign | None, bool]:
    """The stored answer, the campaign that will calibrate the topology (`calibrating()`) and
    whether it was created now."""
    spec = snap.spec
    homogeneous = spec.is_homogeneous()
    opm = FULLMESH if homogeneous else PCDC
    names = spec.subflow_names()
    eq1 = traditional_eq1(snap, names, None, None)
    notes = _notes(opm, homogeneous)
    obs = None
    if eq1.available:
        obs = eq1.fallback_mib
        eq1.obs_ratio = 0.5
        notes.append("OBS = 50 % of the traditional buffer (Eq. 1), the paper's fallback")
        if not lo <= obs <= hi:
            # the answer stays within the bounds it reports, as a calibrated one does
            edge = "bs_min_mib" if obs < lo else "bs_max_mib"
            notes.append(f"50 % of Eq. 1 is {obs:.6g} MiB, outside [{lo:g}, {hi:g}] MiB: OBS "
                         f"is {edge}")
            flags.append("obs_at_bound")
            obs = min(max(obs, lo), hi)
            eq1.obs_ratio = obs / eq1.buffer_mib if eq1.buffer_mib else None
    else:
        flags.append("eq1_rtt_unknown")
        notes.append("OBS unknown: Eq. 1 needs the subflows' RTTs")
    flags.append("provisional")
    objective = objective or Objective()
    campaign, created = calibrating()
    if objective.is_stream:
        notes.append("provisional for a stream: the paper's bulk rules; the stream campaign "
                     "answers by p99 frame delay")
        if campaign is not None and campaign.objective_key != objective.key():
            notes.append(f"campaign {campaign.id} (running) measures another objective; a "
                         "stream campaign is queued by the next question after it ends")
    outputs = Outputs(subflows_used=names, notes=notes)
    if campaign is not None:
        outputs.poll_url = f"/campaigns/{campaign.id}"
    rec = recommendations.add_recommendation(
        session,
        topology_id=snap.id,
        campaign_id=campaign.id if campaign else None,
        kind="provisional",
        delta=delta,
        bs_min_mib=lo,
        bs_max_mib=hi,
        inputs=inputs,
        opm=opm,
        occ=None,
        obs_mib=obs,
        otp_mbps=None,
        tp_max_mbps=None,
        outputs=outputs.model_dump(mode="json"),
        traditional=eq1.model_dump(mode="json"),
        provenance={
            "source": "provisional",
            "rule": "homogeneous -> FullMesh, heterogeneous -> PCDC; buffer 50 % of Eq. 1",
            "homogeneous": homogeneous,
            "campaign_id": campaign.id if campaign else None,
            "campaign_state": campaign.state if campaign else None,
            "fit_ids": [],
            "measurement_count": 0,
            "run_count": 0,
            "data_age_s": None,
            "warnings": [],
            **(more_provenance or {}),
        },
        quality_flags=flags,
        created_at=utcnow(),
    )
    return rec, campaign, created


def _notes(opm: PathManager, homogeneous: bool) -> list[str]:
    notes = [
        f"provisional: no calibrated data yet; {opm} because the topology is "
        f"{'homogeneous' if homogeneous else 'heterogeneous'} (paper, Section 5.3)",
        "OCC: the paper gives no rule without measurements; keep the kernel's default until "
        "the campaign finishes",
    ]
    if opm == PCDC:
        notes.append("PCDC's subset SP* needs impact factors; until then it uses every subflow")
    return notes

"""The main job: a topology and delta in, OPM / OCC / OBS / OTP out, with its provenance.

Calibrated: the topology's latest finished campaign with fits answers (`calibrated_answer`: an
adaptive campaign's stored decision, else the one solve the dashboard shows too); Eq. 1 is
computed over the subflows the answer uses. Provisional (no calibrated data yet, or none usable):
the paper's rules, and a campaign is queued (`provisional_answer`; queueing is this request
path's alone). Every answer is stored (`stored_answer`); a repeated calibrated question may get
the stored row back instead (`reuse`). Caching answers across requests is `answer_cache`'s job.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from sqlalchemy.orm import Session

from models import Campaign

from ...algorithm import topology as algo
from ...algorithm.objective import Objective
from ...algorithm.solver import DEFAULT_DELTA, check_bounds
from ...errors import Invalid
from ...settings import Settings
from ...store import campaigns as campaign_store
from ...store import inventory
from .snapshot import snapshot_by_id, snapshot_of
from .stored_answer import StoredAnswer, answer

_UNSET_MIN, _UNSET_MAX = 1e-12, 1e12  # stand-ins for a bound the request leaves out


class QueueCampaign(Protocol):
    """How a request queues the campaign a provisional answer promises: the topology's active
    campaign, or a new one; (campaign, queued anew). The request path's, given by the caller
    (`flows.campaign.dispatch.campaign_for_question`): answers sit below the campaign domain,
    so nothing here can start a campaign by itself."""

    def __call__(self, session: Session, topology_id: int, delta: float, settings: Settings,
                 objective: Objective) -> tuple[Campaign, bool]: ...


def recommend(
    session: Session,
    *,
    topology_id: int | None = None,
    topology: algo.TopologySpec | None = None,
    rtts_ms: Mapping[str, float] | None = None,
    delta: float = DEFAULT_DELTA,
    bs_min_mib: float | None = None,
    bs_max_mib: float | None = None,
    queue_campaign: bool = True,
    settings: Settings | None = None,
    reuse: bool = False,
    finished: Campaign | None = None,
    objective: Objective | None = None,
    queue: QueueCampaign | None = None,
) -> StoredAnswer:
    """Answer for a stored topology (by id) or an inline one (stored on the way); always stored.

    Buffer bounds left out: a calibrated answer is solved on the buffers its campaign measured
    (a fitted curve is not extrapolated), a provisional one reports the paper's 0.5..30 MiB.
    `queue_campaign`: a provisional answer queues a campaign (with `settings`' defaults, by
    `queue`).
    `reuse`: a calibrated question asked before returns the stored answer (no new row).
    `objective`: bulk (default) or a stream: only campaigns of the same objective answer it.
    `finished`: the campaign whose end this answer reports (it may answer from an earlier
    calibration, e.g. a warm check that confirmed it): its flags and notes go with the answer.
    """
    _check_request(delta, bs_min_mib, bs_max_mib, topology_id, topology, rtts_ms)
    if topology is not None:
        snap = snapshot_of(inventory.ensure_topology(session, spec=topology, rtts_ms=rtts_ms))
    else:
        snap = snapshot_by_id(session, topology_id)
    objective = objective or Objective()

    def calibrating() -> tuple[Campaign | None, bool]:
        if not queue_campaign:
            return campaign_store.active_campaign(session, topology_id=snap.id), False
        if settings is None or queue is None:
            raise ValueError("settings, queue: a provisional answer that queues a campaign "
                             "needs them")
        return queue(session, snap.id, delta, settings, objective)

    return answer(session, snap, objective, delta, bs_min_mib, bs_max_mib, reuse=reuse,
                  finished=finished, calibrating=calibrating)


def _check_request(delta, bs_min, bs_max, topology_id, topology, rtts_ms) -> None:
    try:
        # A missing bound stands aside (the other is checked alone; the pair when both given).
        check_bounds(delta, _UNSET_MIN if bs_min is None else bs_min,
                     _UNSET_MAX if bs_max is None else bs_max)
    except ValueError as exc:
        field_name = str(exc).split(":", 1)[0]
        raise Invalid(str(exc), ("body", field_name)) from exc
    if (topology_id is None) == (topology is None):
        raise Invalid("give exactly one of topology_id and topology", ("body", "topology_id"))
    if topology_id is not None and rtts_ms:
        raise Invalid(
            "rtts_ms goes with an inline topology; use PATCH /topologies/{id}",
            ("body", "rtts_ms"),
        )

"""The main job: a topology and delta in, OPM / OCC / OBS / OTP out, with its provenance.

Calibrated: the topology's latest finished campaign with fits answers (`calibrated_answer`, on
the one solve the dashboard shows too); Eq. 1 is computed over the subflows the answer uses.
Provisional (no calibrated data yet, or none usable): the paper's rules, and a campaign is queued
(`provisional_answer`). Every answer is stored; a repeated calibrated question may get the stored
row back instead (`reuse`). Caching answers across requests is `answer_cache`'s job.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.orm import Session

from models import Campaign, Recommendation, utcnow

from ..algorithm import topology as algo
from ..algorithm.objective import Objective, objective_of
from ..algorithm.solver import DEFAULT_BS_MAX_MIB, DEFAULT_BS_MIN_MIB, DEFAULT_DELTA, check_bounds
from ..errors import Invalid
from ..settings import Settings
from ..store import campaigns as campaign_store
from ..store import inventory, recommendations
from .answer import Outputs, StreamOutcome
from .answer_cache import STALE_AFTER_S, stale_at
from .calibrated import CalibratedAnswer, answer_subflows, calibrated_answer
from .eq1 import traditional_eq1
from .provisional import provisional_answer
from .snapshot import TopologySnapshot, snapshot_by_id, snapshot_of
from .stream_answer import StreamAnswer, stream_answer

_UNSET_MIN, _UNSET_MAX = 1e-12, 1e12  # stand-ins for a bound the request leaves out


@dataclass
class Outcome:
    # None only when `reuse` found the answer stored: then `recommendation_id` names it.
    recommendation: Recommendation | None
    campaign_id: int | None  # provisional: the campaign that will calibrate the topology
    campaign_created: bool = False
    recommendation_id: int | None = None
    kind: str = ""
    stale_at: datetime | None = None  # a calibrated answer's data turns stale then

    def __post_init__(self) -> None:
        if self.recommendation is not None:
            self.recommendation_id = self.recommendation.id
            self.kind = self.recommendation.kind

    @property
    def provisional(self) -> bool:
        return self.kind == "provisional"


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
) -> Outcome:
    """Answer for a stored topology (by id) or an inline one (stored on the way); always stored.

    Buffer bounds left out: a calibrated answer is solved on the buffers its campaign measured
    (a fitted curve is not extrapolated), a provisional one reports the paper's 0.5..30 MiB.
    `queue_campaign`: a provisional answer queues a campaign (with `settings`' defaults).
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
    flags: list[str] = []
    objective = objective or Objective()
    campaign = recommendations.latest_calibrated_campaign(
        session, topology_id=snap.id, objective_key=objective.key())
    if campaign is not None:
        outcome = _from_campaign(session, snap, campaign, objective, delta, bs_min_mib,
                                 bs_max_mib, reuse, finished, flags)
        if outcome is not None:
            return outcome
    _add_finished(flags, finished)
    lo = DEFAULT_BS_MIN_MIB if bs_min_mib is None else bs_min_mib
    hi = DEFAULT_BS_MAX_MIB if bs_max_mib is None else bs_max_mib
    if queue_campaign and settings is None:
        raise ValueError("settings: a provisional answer that queues a campaign needs them")
    rec, active, created = provisional_answer(
        session, snap, delta, lo, hi, flags, _inputs(snap, delta, lo, hi, objective),
        settings if queue_campaign else None, _notes_of(finished), objective,
    )
    return Outcome(recommendation=rec, campaign_id=active.id if active else None,
                   campaign_created=created)


def campaign_answer(
    session: Session, campaign: Campaign, *, delta: float, bs_min_mib: float | None,
    bs_max_mib: float | None,
) -> tuple[Recommendation | None, list[str]]:
    """The answer this finished campaign gives (whether or not it is its topology's latest),
    stored as `recommend` stores it with the campaign's flags; (None, why) when it gives none."""
    flags: list[str] = []
    outcome = _from_campaign(
        session, snapshot_by_id(session, campaign.topology_id), campaign,
        objective_of(campaign.objective), delta, bs_min_mib, bs_max_mib, False, campaign, flags)
    return (outcome.recommendation if outcome else None), flags


def _from_campaign(session, snap, campaign: Campaign, objective: Objective, delta, bs_min,
                   bs_max, reuse: bool, finished: Campaign | None,
                   flags: list[str]) -> Outcome | None:
    """The calibrated (or stream) answer of `campaign`, stored; None with why in `flags`."""
    if objective.is_stream:
        stream = stream_answer(session, campaign, objective, delta)
        if stream.error is None:
            return _store_stream(session, snap, campaign, delta, objective, stream, reuse,
                                 finished)
        flags.append(stream.error)
        return None
    answer = calibrated_answer(session, snap, campaign, delta, bs_min, bs_max)
    if answer.error is None:
        return _store_calibrated(session, snap, campaign.id, delta, answer, reuse, finished)
    flags.append(answer.error)
    flags.extend(answer.flags_after_stale)
    return None


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


def _add_finished(flags: list[str], finished: Campaign | None) -> None:
    if finished is not None:
        flags.extend(f for f in campaign_store.flags(finished) if f not in flags)


def _notes_of(finished: Campaign | None) -> dict:
    return {} if finished is None else {"campaign_notes": campaign_store.report(finished)}


def _store_calibrated(
    session, snap, campaign_id, delta, answer: CalibratedAnswer, reuse: bool,
    finished: Campaign | None,
) -> Outcome:
    """A new row for the answer, or with `reuse` the stored answer to the same question (same
    campaign, inputs and flags): a repeated question costs no INSERT and no COMMIT."""
    now = utcnow()
    age = (now - answer.newest_at).total_seconds() if answer.newest_at else None
    flags = list(answer.flags_before_stale)
    if age is not None and age > STALE_AFTER_S:
        flags.append("stale_data")
    flags.extend(answer.flags_after_stale)
    _add_finished(flags, finished)
    inputs = _inputs(snap, delta, answer.bs_min_mib, answer.bs_max_mib)
    turns_stale = stale_at(answer.newest_at)
    if reuse:
        stored = recommendations.find_calibrated(
            session, campaign_id=campaign_id, inputs=inputs, quality_flags=flags
        )
        if stored is not None:
            return Outcome(recommendation=stored, campaign_id=campaign_id, stale_at=turns_stale)
    rec = recommendations.add_recommendation(
        session,
        topology_id=snap.id,
        campaign_id=campaign_id,
        kind="calibrated",
        delta=delta,
        bs_min_mib=answer.bs_min_mib,
        bs_max_mib=answer.bs_max_mib,
        inputs=inputs,
        opm=answer.solution.opm,
        occ=answer.solution.occ,
        obs_mib=answer.solution.obs_mib,
        otp_mbps=answer.solution.otp_mbps,
        tp_max_mbps=answer.solution.tp_max_mbps,
        outputs=answer.outputs.model_dump(mode="json"),
        traditional=answer.eq1.model_dump(mode="json"),
        provenance={**answer.provenance, "data_age_s": age, **_notes_of(finished)},
        quality_flags=flags,
        created_at=now,
    )
    return Outcome(recommendation=rec, campaign_id=campaign_id, stale_at=turns_stale)


def _store_stream(
    session, snap, campaign: Campaign, delta, objective: Objective, answer: StreamAnswer,
    reuse: bool, finished: Campaign | None,
) -> Outcome:
    """A stream campaign's answer, stored like a calibrated one (`_store_calibrated`)."""
    d = answer.decision
    assert d is not None
    assert d.opm is not None
    assert d.occ is not None
    campaign_id = campaign.id
    flags: list[str] = [] if d.settled else ["stream:unsettled"]
    # the subflows its PCDC arm was probed on, stated as a bulk answer states them
    used, standby = answer_subflows(session, snap, campaign, d.opm, d.occ, flags)
    _add_finished(flags, finished)
    grid = [p["bs_mib"] for p in answer.points]
    inputs = _inputs(snap, delta, min(grid), max(grid), objective)
    if reuse:
        stored = recommendations.find_calibrated(
            session, campaign_id=campaign_id, inputs=inputs, quality_flags=flags)
        if stored is not None:
            return Outcome(recommendation=stored, campaign_id=campaign_id)
    interval = d.p99_interval()
    notes = [f"stream of {objective.rate_mbps:.3g} Mbit/s ({objective.rate_hz:g} frames/s of "
             f"{objective.frame_bytes} bytes): p99 frame delay "
             + (f"{interval[0]:.1f}-{interval[1]:.1f} ms ({d.confidence:.0%})" if interval
                else f"{d.p99_ms:.1f} ms") + f" at {d.obs_mib:g} MiB; the arm's best "
             f"{d.best_p99_ms:.1f} ms at {d.best_bs_mib:g} MiB"]
    if d.skipped_edge_mib is not None:
        notes.append(f"{d.skipped_edge_mib:g} MiB was within the limit but at the edge of "
                     "carrying the stream (the buffer below did not): one step up is kept")
    if (u := answer.clock_offset_uncertainty_ms) is not None:
        notes.append(
            f"frame delays between two hosts' clocks, their offset known within {u:.3g} ms: "
            + ("one-way delays" if answer.delay_clock == "one_way" else
               "more than delta of the least delay, so every delay is relative to its flow's "
               "minimum (propagation delay left out)"))
    outputs = Outputs(subflows_used=used, standby_subflows=standby, notes=notes,
                      stream=StreamOutcome.model_validate(answer.outputs()))
    rec = recommendations.add_recommendation(
        session, topology_id=snap.id, campaign_id=campaign_id, kind="calibrated", delta=delta,
        bs_min_mib=min(grid), bs_max_mib=max(grid), inputs=inputs, opm=d.opm, occ=d.occ,
        obs_mib=d.obs_mib, otp_mbps=d.goodput_mbps, tp_max_mbps=None,
        outputs=outputs.model_dump(mode="json"),
        traditional=traditional_eq1(snap, used, None, d.obs_mib).model_dump(mode="json"),
        provenance={"source": "stream", "campaign_id": campaign_id,
                    "rule": "carry the rate, smallest p99 frame delay, smallest buffer within "
                    "(1 + delta) of the arm's best (docs/design.md)",
                    "measurement_count": answer.measurement_count, **_notes_of(finished)},
        quality_flags=flags, created_at=utcnow())
    return Outcome(recommendation=rec, campaign_id=campaign_id)


def _inputs(snap: TopologySnapshot, delta: float, bs_min: float, bs_max: float,
            objective: Objective | None = None) -> dict:
    inputs = {
        "topology_id": snap.id,
        "topology": snap.spec.model_dump(mode="json"),
        "rtts_ms": snap.rtts_ms,
        "delta": delta,
        "bs_min_mib": bs_min,
        "bs_max_mib": bs_max,
    }
    if objective is not None and objective.is_stream:  # a bulk answer's inputs stay as they were
        inputs["objective"] = objective.stored()
    return inputs

"""An answer stored as a recommendation row: the topology's latest calibration answers (its
calibrated or stream answer), else the paper's provisional rules. Both the request path
(`recommend`) and finishing a campaign (`finish.finish_campaign`) store answers through here.

Whether a provisional answer queues a campaign is the caller's (`calibrating`): only the request
path may start one, so nothing here, and nothing that finishing a campaign runs, reaches
`dispatch.start_campaign` (an import-linter contract in pyproject.toml keeps it so).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.orm import Session

from models import Campaign, Recommendation, utcnow

from ...algorithm.objective import Objective, objective_of
from ...algorithm.solver import DEFAULT_BS_MAX_MIB, DEFAULT_BS_MIN_MIB
from ...store import campaigns as campaign_store
from ...store import recommendations
from .answer import Outputs, StreamOutputs
from .answer_cache import stale_at
from .calibrated import (
    CalibratedAnswer,
    answer_subflows,
    calibrated_answer,
    stream_subset_choice,
)
from .eq1 import traditional_eq1
from .provisional import Calibrating, provisional_answer
from .snapshot import TopologySnapshot, snapshot_by_id
from .stream_answer import StreamAnswer, stream_answer


@dataclass
class StoredAnswer:
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


def answer(
    session: Session,
    snap: TopologySnapshot,
    objective: Objective,
    delta: float,
    bs_min_mib: float | None,
    bs_max_mib: float | None,
    *,
    reuse: bool,
    finished: Campaign | None,
    calibrating: Calibrating,
) -> StoredAnswer:
    """The stored answer for `snap` (see `recommend.recommend` for the arguments); a provisional
    answer names the campaign `calibrating()` gives (the topology's active one, or one queued)."""
    flags: list[str] = []
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
    rec, active, created = provisional_answer(
        session, snap, delta, lo, hi, flags, _inputs(snap, delta, lo, hi, objective),
        calibrating, _notes_of(finished), objective,
    )
    return StoredAnswer(recommendation=rec, campaign_id=active.id if active else None,
                        campaign_created=created)


def answer_at_finish(session: Session, campaign: Campaign) -> StoredAnswer:
    """The answer reporting `campaign`'s end, on its delta and the buffers it measured (a fitted
    curve is not extrapolated), with its flags and notes. It may come from an earlier
    calibration (a warm check that confirmed it); a provisional one queues nothing."""
    lo, hi = campaign_store.buffer_range(campaign)
    snap = snapshot_by_id(session, campaign.topology_id)

    def active() -> tuple[Campaign | None, bool]:
        return campaign_store.active_campaign(session, topology_id=snap.id), False

    return answer(session, snap, objective_of(campaign.objective), campaign.delta, lo, hi,
                  reuse=False, finished=campaign, calibrating=active)


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
                   flags: list[str]) -> StoredAnswer | None:
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


def _add_finished(flags: list[str], finished: Campaign | None) -> None:
    if finished is not None:
        flags.extend(f for f in campaign_store.flags(finished) if f not in flags)


def _notes_of(finished: Campaign | None) -> dict:
    return {} if finished is None else {"campaign_notes": campaign_store.report(finished)}


def _store_calibrated(
    session, snap, campaign_id, delta, answer: CalibratedAnswer, reuse: bool,
    finished: Campaign | None,
) -> StoredAnswer:
    """A new row for the answer, or with `reuse` the stored answer to the same question (same
    campaign, inputs and flags): a repeated question costs no INSERT and no COMMIT."""
    now = utcnow()
    age = (now - answer.newest_at).total_seconds() if answer.newest_at else None
    flags = list(answer.flags_before_stale)
    turns_stale = stale_at(answer.newest_at)
    if turns_stale is not None and now >= turns_stale:
        flags.append("stale_data")
        # Stale already, it stays so: the clock changes nothing more, so the answer is
        # cached (flagged) until the generation changes, like any other.
        turns_stale = None
    flags.extend(answer.flags_after_stale)
    _add_finished(flags, finished)
    inputs = _inputs(snap, delta, answer.bs_min_mib, answer.bs_max_mib)
    if reuse:
        stored = recommendations.find_calibrated(
            session, campaign_id=campaign_id, inputs=inputs, quality_flags=flags
        )
        if stored is not None:
            return StoredAnswer(recommendation=stored, campaign_id=campaign_id,
                                stale_at=turns_stale)
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
    return StoredAnswer(recommendation=rec, campaign_id=campaign_id, stale_at=turns_stale)


def _store_stream(
    session, snap, campaign: Campaign, delta, objective: Objective, answer: StreamAnswer,
    reuse: bool, finished: Campaign | None,
) -> StoredAnswer:
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
            return StoredAnswer(recommendation=stored, campaign_id=campaign_id)
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
                      stream=StreamOutputs.model_validate(answer.outputs()),
                      subset_choice=stream_subset_choice(campaign, d.opm, d.occ))
    rec = recommendations.add_recommendation(
        session, topology_id=snap.id, campaign_id=campaign_id, kind="calibrated", delta=delta,
        bs_min_mib=min(grid), bs_max_mib=max(grid), inputs=inputs, opm=d.opm, occ=d.occ,
        obs_mib=d.obs_mib, otp_mbps=d.goodput_mbps, tp_max_mbps=None,
        outputs=outputs.model_dump(mode="json"),
        traditional=traditional_eq1(snap, used, None, d.obs_mib).model_dump(mode="json"),
        provenance={"source": "stream", "campaign_id": campaign_id,
                    "rule": "carry the rate, smallest p99 frame delay, smallest buffer within "
                    "(1 + delta) of the arm's best (docs/algorithm.md)",
                    "measurement_count": answer.measurement_count, **_notes_of(finished)},
        quality_flags=flags, created_at=utcnow())
    return StoredAnswer(recommendation=rec, campaign_id=campaign_id)


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

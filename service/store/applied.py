"""Applied answers: one row per apply of an answer to a topology's sites."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from models import AppliedAnswer, Recommendation, utcnow

from ..errors import NotFound


def latest_answer(session: Session, *, topology_id: int) -> Recommendation | None:
    """The topology's newest calibrated answer, else its newest answer of any kind."""
    for kind in ("calibrated", None):
        q = select(Recommendation).where(Recommendation.topology_id == topology_id)
        if kind:
            q = q.where(Recommendation.kind == kind)
        rec = session.scalar(q.order_by(Recommendation.id.desc()).limit(1))
        if rec is not None:
            return rec
    return None


def add_apply(session: Session, *, topology_id: int, recommendation_id: int | None,
              plan: dict[str, Any]) -> AppliedAnswer:
    row = AppliedAnswer(topology_id=topology_id, recommendation_id=recommendation_id,
                        state="applying", plan=plan, sites={}, events=[])
    session.add(row)
    session.flush()
    return row


def get_apply(session: Session, *, apply_id: int) -> AppliedAnswer:
    row = session.get(AppliedAnswer, apply_id)
    if row is None:
        raise NotFound(f"apply {apply_id} not found")
    return row


def latest_apply(session: Session, *, topology_id: int) -> AppliedAnswer | None:
    return session.scalar(select(AppliedAnswer).where(AppliedAnswer.topology_id == topology_id)
                          .order_by(AppliedAnswer.id.desc()).limit(1))


def list_applies(session: Session, *, topology_id: int, limit: int = 20) -> list[AppliedAnswer]:
    return list(session.scalars(
        select(AppliedAnswer).where(AppliedAnswer.topology_id == topology_id)
        .order_by(AppliedAnswer.id.desc()).limit(limit)))


def set_site(session: Session, row: AppliedAnswer, site: str, report: dict[str, Any]) -> None:
    row.sites = {**(row.sites or {}), site: report}  # a new dict: JSON columns track assignment
    session.flush()


def add_event(session: Session, row: AppliedAnswer, kind: str, site: str,
              detail: dict[str, Any]) -> None:
    row.events = [*(row.events or []),
                  {"at": utcnow().isoformat(), "kind": kind, "site": site, "detail": detail}]
    session.flush()


def finish(session: Session, row: AppliedAnswer, state: str, *, error: str | None = None,
           confirmation: dict[str, Any] | None = None) -> None:
    row.state = state
    if error is not None:
        row.error = error
    if confirmation is not None:
        row.confirmation = confirmation
    now = utcnow()
    if state == "applied" and row.applied_at is None:
        row.applied_at = now
    if state != "applying":
        row.finished_at = now
    session.flush()


def claim_confirmation(session: Session, *, apply_id: int) -> bool:
    """True for exactly one caller: marks the confirmation as running if nobody did."""
    result = session.execute(
        update(AppliedAnswer).where(AppliedAnswer.id == apply_id,
                                    AppliedAnswer.state == "applying",
                                    AppliedAnswer.confirmation.is_(None))
        .values(confirmation={"running": True}))
    session.flush()
    return result.rowcount == 1

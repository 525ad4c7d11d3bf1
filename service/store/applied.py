"""Applied answers: one row per apply of an answer to a topology's sites."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from models import AppliedAnswer, Recommendation, Topology, utcnow

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


def busy_apply(session: Session, *, topology_id: int,
               states: tuple[str, ...] = ("applying", "rolling_back")) -> AppliedAnswer | None:
    """The topology's newest apply in one of `states` (not necessarily its newest apply: a
    rollback goes to the apply in force, which a failed apply may have come after)."""
    return session.scalar(select(AppliedAnswer).where(
        AppliedAnswer.topology_id == topology_id, AppliedAnswer.state.in_(states))
        .order_by(AppliedAnswer.id.desc()).limit(1))


def list_applies(session: Session, *, topology_id: int, limit: int = 20) -> list[AppliedAnswer]:
    return list(session.scalars(
        select(AppliedAnswer).where(AppliedAnswer.topology_id == topology_id)
        .order_by(AppliedAnswer.id.desc()).limit(limit)))


def lock_apply(session: Session, *, apply_id: int) -> AppliedAnswer:
    """The row, locked until the transaction ends and read afresh: its JSON columns are
    rewritten whole, so two site workers reporting at once must not both start from the same
    copy (the second would drop the first's report). PostgreSQL: SELECT ... FOR UPDATE.
    SQLite ignores FOR UPDATE and, in pysqlite's default mode, reads outside a transaction: a
    no-op UPDATE first takes its database write lock (others wait out busy_timeout), so the
    read that follows sees every report committed before it."""
    if session.get_bind().dialect.name == "sqlite":
        session.execute(update(AppliedAnswer).where(AppliedAnswer.id == apply_id)
                        .values(id=AppliedAnswer.id))
    row = session.scalar(select(AppliedAnswer).where(AppliedAnswer.id == apply_id)
                         .with_for_update().execution_options(populate_existing=True))
    if row is None:
        raise NotFound(f"apply {apply_id} not found")
    return row


def lock_topology(session: Session, *, topology_id: int) -> None:
    """Serialise the start of applies and rollbacks of one topology until the transaction
    ends: two requests must not both find no apply or rollback under way and both start one
    (PostgreSQL: the topology's row FOR UPDATE; SQLite: a no-op UPDATE takes its write lock)."""
    if session.get_bind().dialect.name == "sqlite":
        session.execute(update(Topology).where(Topology.id == topology_id)  # keeps updated_at
                        .values(id=Topology.id, updated_at=Topology.updated_at))
    session.scalar(select(Topology.id).where(Topology.id == topology_id).with_for_update())


def set_site(session: Session, row: AppliedAnswer, site: str, report: dict[str, Any]) -> None:
    """Store one site's report; `row` must come from `lock_apply` in this transaction."""
    row.sites = {**(row.sites or {}), site: report}  # a new dict: JSON columns track assignment
    session.flush()


def report_site(session: Session, *, apply_id: int, site: str,
                report: dict[str, Any]) -> AppliedAnswer:
    """A site worker's report, stored under the row's lock; returns the row with every report
    committed before this one (to tell whether both sites are done)."""
    row = lock_apply(session, apply_id=apply_id)
    set_site(session, row, site, report)
    return row


def claim_watch(session: Session, *, apply_id: int) -> AppliedAnswer | None:
    """The applied row for exactly one caller, which then asks each site's worker to start its
    watcher (both sites' tasks reach this point, in either order); None for the others."""
    row = lock_apply(session, apply_id=apply_id)
    sites = row.sites or {}
    if row.state != "applied" or any(r.get("watch_asked") for r in sites.values()):
        return None
    row.sites = {name: {**r, "watch_asked": True} for name, r in sites.items()}
    session.flush()
    return row


def append_event(session: Session, *, apply_id: int, kind: str, site: str,
                 detail: dict[str, Any]) -> AppliedAnswer:
    """One event of the apply's timeline (the failover watcher's), under the row's lock: the
    watchers of both sites and a stopping process may write at the same moment."""
    row = lock_apply(session, apply_id=apply_id)
    row.events = [*(row.events or []),
                  {"at": utcnow().isoformat(), "kind": kind, "site": site, "detail": detail}]
    session.flush()
    return row


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
    if state not in ("applying", "rolling_back"):
        row.action = None  # settled: nothing in flight (the outbox's, `store.apply_outbox`)
    session.flush()


def claim_confirmation(session: Session, *, apply_id: int,
                       stale_after_s: float | None = None) -> bool:
    """True for exactly one caller: marks the confirmation as running if nobody did, or if
    the one running started over `stale_after_s` ago (its runner died: a task delivered again
    takes it over instead of leaving the row applying)."""
    row = lock_apply(session, apply_id=apply_id)
    now = utcnow()
    conf = row.confirmation
    if row.state != "applying":
        return False
    if conf is not None:
        since = conf.get("running_since")
        if not (conf.get("running") and since and stale_after_s is not None
                and datetime.fromisoformat(since) + timedelta(seconds=stale_after_s) <= now):
            return False
    row.confirmation = {"running": True, "running_since": now.isoformat()}
    session.flush()
    return True

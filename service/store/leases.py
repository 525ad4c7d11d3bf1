"""Named leases held by one process at a time: the embedded scheduler's election.

A lease is a row of `scheduler_lease` (name, holder, expires_at). It is taken or renewed by one
conditional UPDATE (`... WHERE name = :name AND (holder = :me OR holder IS NULL OR expires_at <=
:now)`), which is atomic on both backends: SQLite serialises writers, and PostgreSQL makes a
second UPDATE of the row wait for the first's transaction and re-check the condition on the
committed row (READ COMMITTED), so of two takers exactly one gets rowcount 1. The row lock (or
SQLite's write lock) is held until the caller commits: work done in the same transaction is
fenced by the lease. Times come from the processes' clocks, so their skew must stay well below
the lease's length. Flush, never commit.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import or_, select, update
from sqlalchemy.orm import Session

from models import SchedulerLease, utcnow


def _insert_missing(session: Session, name: str) -> None:
    # ON CONFLICT DO NOTHING: two processes creating the row at once must not fail each other
    if session.get_bind().dialect.name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert
    else:
        from sqlalchemy.dialects.sqlite import insert
    row = {"name": name, "holder": None, "expires_at": None}
    session.execute(insert(SchedulerLease).values(row).on_conflict_do_nothing())


def take_lease(
    session: Session,
    *,
    name: str,
    holder: str,
    lasts: timedelta,
    now: datetime | None = None,
) -> bool:
    """Take the lease `name` for `holder` until now + lasts, or renew it if `holder` has it;
    False while another holder's lease is live."""
    now = now or utcnow()
    _insert_missing(session, name)
    result = session.execute(
        update(SchedulerLease)
        .where(
            SchedulerLease.name == name,
            or_(
                SchedulerLease.holder == holder,
                SchedulerLease.holder.is_(None),
                SchedulerLease.expires_at.is_(None),
                SchedulerLease.expires_at <= now,
            ),
        )
        .values(holder=holder, expires_at=now + lasts)
        .execution_options(synchronize_session=False)
    )
    return result.rowcount == 1


def release_lease(session: Session, *, name: str, holder: str) -> bool:
    """Give the lease back if `holder` has it (a clean shutdown: the next taker need not wait
    for it to expire); False if someone else holds it."""
    result = session.execute(
        update(SchedulerLease)
        .where(SchedulerLease.name == name, SchedulerLease.holder == holder)
        .values(holder=None, expires_at=None)
        .execution_options(synchronize_session=False)
    )
    return result.rowcount == 1


def lease_holder(session: Session, *, name: str, now: datetime | None = None) -> str | None:
    """The live holder of the lease `name`, or None (never taken, released or expired)."""
    row = session.scalar(
        select(SchedulerLease)
        .where(SchedulerLease.name == name)
        .execution_options(populate_existing=True)
    )
    if row is None or row.holder is None or row.expires_at is None:
        return None
    return row.holder if row.expires_at > (now or utcnow()) else None

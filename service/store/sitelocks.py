"""Site locks: a probe holds both of its sites' links, across campaigns and processes.

The lock is a row per site name in `site_locks`, taken under `SELECT ... FOR UPDATE` in sorted
name order (two claimers of overlapping pairs then queue instead of deadlocking). A hold is a
lease: `until` lets a dead holder's sites come free. Flush, never commit (the caller's
transaction releases the row locks).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from models import SiteLock, utcnow


def _insert_missing(session: Session, names: Sequence[str]) -> None:
    # ON CONFLICT DO NOTHING: two claimers creating the same row must not fail each other
    dialect = session.get_bind().dialect.name
    if dialect == "postgresql":
        from sqlalchemy.dialects.postgresql import insert
    else:
        from sqlalchemy.dialects.sqlite import insert
    rows = [{"site": n, "holder": None, "until": None} for n in names]
    session.execute(insert(SiteLock).values(rows).on_conflict_do_nothing())


def acquire_sites(
    session: Session,
    *,
    sites: Sequence[str],
    holder: str,
    lasts: timedelta,
    now: datetime | None = None,
) -> bool:
    """Take every site in `sites` for `holder` until now + lasts, or none of them."""
    now = now or utcnow()
    names = sorted(set(sites))
    _insert_missing(session, names)
    rows = session.scalars(
        select(SiteLock)
        .where(SiteLock.site.in_(names))
        .order_by(SiteLock.site)
        .with_for_update()
        .execution_options(populate_existing=True)
    ).all()
    busy = [r for r in rows if r.holder not in (None, holder) and r.until and r.until > now]
    if busy:
        return False
    for row in rows:
        row.holder, row.until = holder, now + lasts
    session.flush()
    return True


def renew_sites(
    session: Session, *, holder: str, lasts: timedelta, now: datetime | None = None
) -> int:
    """Push the holder's lease forward; returns how many sites it still holds."""
    now = now or utcnow()
    result = session.execute(
        update(SiteLock).where(SiteLock.holder == holder).values(until=now + lasts)
    )
    return result.rowcount


def release_sites(session: Session, *, holder: str) -> int:
    """Give back every site the holder has (idempotent)."""
    result = session.execute(
        update(SiteLock).where(SiteLock.holder == holder).values(holder=None, until=None)
    )
    return result.rowcount


def busy_sites(session: Session, *, now: datetime | None = None) -> set[str]:
    """Sites a live holder has now (a site without a row, or with an expired hold, is free)."""
    now = now or utcnow()
    return set(
        session.scalars(
            select(SiteLock.site).where(SiteLock.holder.is_not(None), SiteLock.until > now)
        )
    )


def holders(session: Session) -> dict[str, str | None]:
    """site -> current holder name (for tests and the dashboard)."""
    return {r.site: r.holder for r in session.scalars(select(SiteLock))}

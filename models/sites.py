"""Site-level rows: the lock that keeps two probes off one site's links (issue 11 item 5)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import String
from sqlalchemy.orm import Mapped, mapped_column

from .base import Base, UTCDateTime


class SiteLock(Base):
    """One row per site name; a holder owns the site's links until `until` (a lease, so a dead
    worker's hold expires instead of blocking the site forever)."""

    __tablename__ = "site_locks"

    site: Mapped[str] = mapped_column(String(32), primary_key=True)
    holder: Mapped[str | None] = mapped_column(String(64), nullable=True)
    until: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)


class SchedulerLease(Base):
    """A named lease held by one process at a time (issue 12: the API processes of one database
    elect the one that runs due schedules). Taken and renewed by a conditional UPDATE; a holder
    that dies stops renewing and `expires_at` lets the next process take over."""

    __tablename__ = "scheduler_lease"

    name: Mapped[str] = mapped_column(String(32), primary_key=True)
    holder: Mapped[str | None] = mapped_column(String(64), nullable=True)
    expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)

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

"""Site-level rows: the lock that keeps two probes off one site's links."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import ForeignKey, Integer, LargeBinary, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from .base import Base, JSONType, UTCDateTime, utcnow


class SiteLock(Base):
    """One row per site name; a holder owns the site's links until `until` (a lease, so a dead
    worker's hold expires instead of blocking the site forever)."""

    __tablename__ = "site_locks"

    site: Mapped[str] = mapped_column(String(32), primary_key=True)
    holder: Mapped[str | None] = mapped_column(String(64), nullable=True)
    until: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)


class SchedulerLease(Base):
    """A named lease held by one process at a time (the API processes of one database elect the
    one that runs due schedules). Taken and renewed by a conditional UPDATE; a holder
    that dies stops renewing and `expires_at` lets the next process take over."""

    __tablename__ = "scheduler_lease"

    name: Mapped[str] = mapped_column(String(32), primary_key=True)
    holder: Mapped[str | None] = mapped_column(String(64), nullable=True)
    expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)


class ProbeSession(Base):
    """The meeting point of a two-sided probe: the receiver site's passive
    task writes its port and addresses here and, at the end, what its server saw; the sender
    site's active task waits for `ready` and then for `done`. One row per (campaign, lease,
    step): a redelivered task finds its predecessor's row (and the pid of its server)."""

    __tablename__ = "probe_sessions"
    __table_args__ = (UniqueConstraint("campaign_id", "lease_id", "step_key"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    campaign_id: Mapped[int] = mapped_column(
        ForeignKey("campaigns.id", ondelete="CASCADE"), index=True)
    lease_id: Mapped[str] = mapped_column(String(64))
    step_key: Mapped[str] = mapped_column(String(200))
    state: Mapped[str] = mapped_column(String(16), default="starting")  # SESSION_STATES
    port: Mapped[int | None] = mapped_column(Integer, nullable=True)
    receiver_addrs: Mapped[dict[str, str]] = mapped_column(JSONType, default=dict)
    receiver_report: Mapped[dict[str, Any]] = mapped_column(JSONType, default=dict)
    server_pid: Mapped[int | None] = mapped_column(Integer, nullable=True)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    deadline: Mapped[datetime] = mapped_column(UTCDateTime)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


SESSION_STATES = ("starting", "ready", "done", "failed")


class MeasurementArtifact(Base):
    """One raw output of a probe (iperf3 JSON, a NetPerfMeter .sca/.vec/.config, a log), gzip
    compressed: what the worker that ran the probe saw, downloadable without reaching its host."""

    __tablename__ = "measurement_artifacts"
    __table_args__ = (UniqueConstraint("measurement_id", "name"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    measurement_id: Mapped[int] = mapped_column(
        ForeignKey("measurements.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(100))
    media_type: Mapped[str] = mapped_column(String(64))
    size: Mapped[int] = mapped_column(Integer)  #: bytes before compression
    gzip_data: Mapped[bytes] = mapped_column(LargeBinary)


class SiteCapabilities(Base):
    """The latest capability report of a site's worker (kernel, MPTCP, PMs, CCs, tools,
    endpoints); one row per site, replaced by each report."""

    __tablename__ = "site_capabilities"

    site_id: Mapped[int] = mapped_column(
        ForeignKey("sites.id", ondelete="CASCADE"), primary_key=True)
    report: Mapped[dict[str, Any]] = mapped_column(JSONType)
    reported_at: Mapped[datetime] = mapped_column(UTCDateTime)

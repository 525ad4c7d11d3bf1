"""Scheduled recalibration and what changed between calibrations."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Boolean, CheckConstraint, Float, ForeignKey, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from .base import Base, JSONType, UTCDateTime, utcnow

EVENT_KINDS = (
    "opm_changed", "occ_changed", "obs_moved", "omega_sign_changed",
    "warm_confirmed", "warm_drifted",  # warm recalibration's verdicts (flows/campaign/warm.py)
    # a failover queued this recalibration; its new answer's re-apply started, or was refused
    # (flows/scheduling/reapply.py)
    "path_changed", "reapply_started", "reapply_refused",
)


class RecalibrationSchedule(Base):
    """A cron schedule per topology; beat queues a campaign with these parameters when due."""

    __tablename__ = "recalibration_schedules"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    topology_id: Mapped[int] = mapped_column(
        ForeignKey("topologies.id", ondelete="CASCADE"), unique=True
    )
    cron: Mapped[str] = mapped_column(String(120))
    enabled: Mapped[bool] = mapped_column(Boolean, default=True)
    # Campaign parameters (ccs, pms, buffer_grid_mib, runs, duration_s, delta, ...); {} = defaults.
    parameters: Mapped[dict[str, Any]] = mapped_column(JSONType, default=dict)
    last_run_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    last_campaign_id: Mapped[int | None] = mapped_column(Integer, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, onupdate=utcnow)


class RecalibrationEvent(Base):
    """A change between a calibration and the one before it, worth an operator's look."""

    __tablename__ = "recalibration_events"
    __table_args__ = (
        CheckConstraint(
            "kind IN (" + ", ".join(f"'{k}'" for k in EVENT_KINDS) + ")", name="kind"
        ),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    topology_id: Mapped[int] = mapped_column(
        ForeignKey("topologies.id", ondelete="CASCADE"), index=True
    )
    campaign_id: Mapped[int] = mapped_column(ForeignKey("campaigns.id", ondelete="CASCADE"))
    previous_campaign_id: Mapped[int | None] = mapped_column(Integer, nullable=True)
    kind: Mapped[str] = mapped_column(String(32))
    subject: Mapped[str] = mapped_column(String(64), default="")  # e.g. "cubic/K-C"
    before: Mapped[Any] = mapped_column(JSONType, nullable=True)
    after: Mapped[Any] = mapped_column(JSONType, nullable=True)
    change_pct: Mapped[float | None] = mapped_column(Float, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)

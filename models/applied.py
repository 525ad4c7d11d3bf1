"""An answer applied to a topology's sites: what was set where, whether it was confirmed on the
kernel's own path manager, and what the failover watcher did."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import CheckConstraint, ForeignKey, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from .base import Base, JSONType, UTCDateTime, utcnow

# applying: the sites' workers are at it; applied: confirmed (or confirmation not asked);
# unconfirmed: the confirmation missed and the sites were rolled back; rolling_back: a rollback
# was asked and the sites' workers are at it; rolled_back: on request; failed: a site refused
# (its journal says how it was left: the previous apply in force, or as before any apply)
APPLY_STATES = ("applying", "applied", "unconfirmed", "rolling_back", "rolled_back", "failed")
# `action` is what is in flight (apply, rollback; NULL once settled): its hand-over is owed while
# `dispatched_at` is NULL (the outbox), and after `deadline_at` the sweeper settles the row from
# the sites' journals.


class AppliedAnswer(Base):
    __tablename__ = "applied_answers"
    __table_args__ = (
        CheckConstraint("state IN (" + ", ".join(f"'{s}'" for s in APPLY_STATES) + ")",
                        name="state"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    topology_id: Mapped[int] = mapped_column(
        ForeignKey("topologies.id", ondelete="CASCADE"), index=True)
    recommendation_id: Mapped[int | None] = mapped_column(
        ForeignKey("recommendations.id", ondelete="SET NULL"), nullable=True)
    state: Mapped[str] = mapped_column(String(16), default="applying")
    # the plan as shown by GET /topologies/{id}/apply-plan when the apply started
    plan: Mapped[dict[str, Any]] = mapped_column(JSONType)
    # per site name: where (namespace or worker), its journal's outcome, the steps done
    sites: Mapped[dict[str, Any]] = mapped_column(JSONType, default=dict)
    # the plain MPTCP application's figures against the answer's OTP
    confirmation: Mapped[dict[str, Any] | None] = mapped_column(JSONType, nullable=True)
    # the failover timeline: [{"at", "kind", "site", "detail"}]
    events: Mapped[list[dict[str, Any]]] = mapped_column(JSONType, default=list)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    applied_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    action: Mapped[str | None] = mapped_column(String(16), nullable=True)
    dispatched_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    deadline_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    # the embedded process running it ({"host", "pid", "start_time"}): gone -> resumed
    runner: Mapped[dict[str, Any] | None] = mapped_column(JSONType, nullable=True)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, onupdate=utcnow)

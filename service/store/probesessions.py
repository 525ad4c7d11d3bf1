"""Probe sessions: where the passive (receiver site) and active (sender site) halves of a
two-sided probe meet. Flush, never commit."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from models import ProbeSession, utcnow


def get_session(
    session: Session, *, campaign_id: int, lease_id: str, step_key: str, lock: bool = False
) -> ProbeSession | None:
    stmt = select(ProbeSession).where(
        ProbeSession.campaign_id == campaign_id, ProbeSession.lease_id == lease_id,
        ProbeSession.step_key == step_key)
    if lock:
        stmt = stmt.with_for_update()
    return session.scalars(stmt).one_or_none()


def open_session(
    session: Session, *, campaign_id: int, lease_id: str, step_key: str, deadline: datetime
) -> ProbeSession:
    """The row of this (campaign, lease, step), created in state `starting` if missing (a
    redelivered passive task gets its predecessor's row back, server pid included)."""
    row = get_session(session, campaign_id=campaign_id, lease_id=lease_id, step_key=step_key,
                      lock=True)
    if row is None:
        row = ProbeSession(campaign_id=campaign_id, lease_id=lease_id, step_key=step_key,
                           state="starting", receiver_addrs={}, receiver_report={},
                           deadline=deadline, updated_at=utcnow())
        session.add(row)
    session.flush()
    return row


def mark_ready(
    session: Session, *, row: ProbeSession, port: int, receiver_addrs: dict[str, str],
    pid: int, report: dict[str, Any],
) -> None:
    row.state, row.port, row.receiver_addrs, row.server_pid = "ready", port, receiver_addrs, pid
    row.receiver_report = report
    row.error = None
    row.updated_at = utcnow()
    session.flush()


def mark_done(session: Session, *, row: ProbeSession, report: dict[str, Any]) -> None:
    row.state, row.receiver_report, row.server_pid = "done", report, None
    row.updated_at = utcnow()
    session.flush()


def mark_failed(session: Session, *, row: ProbeSession, error: str) -> None:
    row.state, row.error, row.server_pid = "failed", error[:2000], None
    row.updated_at = utcnow()
    session.flush()


def step_sessions(session: Session, *, campaign_id: int, step_prefix: str) -> list[ProbeSession]:
    """Every session of one step of a campaign, under any lease (`step_prefix`: the step's key
    as sessions spell it, before `#<attempt>`)."""
    return list(session.scalars(select(ProbeSession).where(
        ProbeSession.campaign_id == campaign_id,
        ProbeSession.step_key.startswith(f"{step_prefix}#", autoescape=True))))

"""The applies' outbox: what is in flight on an applied answer, whether its hand-over to the
sites' workers is still owed, and when the sweeper settles it from the sites' journals.

`action` is set (apply, rollback) from the moment the apply or rollback is stored until the row
is settled; `dispatched_at` stays NULL until a worker (or this process's thread) was handed the
action, so a broker that is down leaves it owed, not lost; `deadline_at` bounds how long the row
may stay in flight whatever happens to the processes working on it.
"""

from __future__ import annotations

import os
import socket
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import or_, select, update
from sqlalchemy.orm import Session

from models import AppliedAnswer, utcnow
from probes import pidfile

ACTIONS = ("apply", "rollback")


def owe(row: AppliedAnswer, action: str, *, deadline_s: float,
        now: datetime | None = None) -> None:
    """`action` is in flight on `row` from now; its hand-over is owed until `mark_dispatched`."""
    if action not in ACTIONS:
        raise ValueError(f"unknown action {action!r}")
    now = now or utcnow()
    row.action = action
    row.dispatched_at = None
    row.runner = None
    row.deadline_at = now + timedelta(seconds=deadline_s)


def settled(row: AppliedAnswer) -> None:
    """Nothing in flight any more (the row's state says how it ended)."""
    row.action = None
    row.runner = None


def this_process() -> dict[str, Any]:
    """Who runs an embedded action: host, pid and the pid's start time (a reused pid is
    another process)."""
    return {"host": socket.gethostname(), "pid": os.getpid(),
            "start_time": pidfile.start_time(os.getpid())}


def runner_gone(runner: dict[str, Any] | None) -> bool:
    """The embedded process named by `runner` is known to be dead: it ran on this host and its
    pid no longer names it. A process on another host cannot be told: not gone."""
    if not runner or runner.get("host") != socket.gethostname():
        return False
    return not pidfile.alive(runner)


def mark_dispatched(session: Session, *, apply_id: int, action: str,
                    runner: dict[str, Any] | None = None, at: datetime | None = None) -> bool:
    """The hand-over of `action` was done (in a transaction of its own: the row's has
    committed). False when the row has moved on meanwhile (settled, another action)."""
    values: dict[str, Any] = {"dispatched_at": at or utcnow()}
    if runner is not None:
        values["runner"] = runner
    result = session.execute(update(AppliedAnswer).where(
        AppliedAnswer.id == apply_id, AppliedAnswer.action == action).values(**values))
    session.flush()
    return result.rowcount == 1


def owed_ids(session: Session, *, before: datetime) -> list[int]:
    """Rows whose hand-over has been owed since before `before` (the broker was down)."""
    return list(session.scalars(select(AppliedAnswer.id).where(
        AppliedAnswer.action.is_not(None), AppliedAnswer.dispatched_at.is_(None),
        AppliedAnswer.updated_at <= before).order_by(AppliedAnswer.id)))


def in_flight(session: Session) -> list[AppliedAnswer]:
    return list(session.scalars(select(AppliedAnswer).where(AppliedAnswer.action.is_not(None))
                                .order_by(AppliedAnswer.id)))


def overdue_ids(session: Session, *, now: datetime, deadline_s: float) -> list[int]:
    """Rows in flight past their deadline (a row from before deadlines: `deadline_s` after its
    last change)."""
    return list(session.scalars(select(AppliedAnswer.id).where(
        AppliedAnswer.action.is_not(None),
        or_(AppliedAnswer.deadline_at <= now,
            AppliedAnswer.deadline_at.is_(None)
            & (AppliedAnswer.updated_at <= now - timedelta(seconds=deadline_s))))
        .order_by(AppliedAnswer.id)))


def claim_settling(session: Session, *, apply_id: int, now: datetime, deadline_s: float,
                   force: bool = False) -> AppliedAnswer | None:
    """The overdue row for exactly one settler, which pushes its deadline on by `deadline_s`
    (a settler that dies leaves it to the next sweep); None when it is not overdue (or not in
    flight) any more. `force`: settle now, deadline or not (the action's own runner failed)."""
    from .applied import lock_apply

    row = lock_apply(session, apply_id=apply_id)
    if row.action is None:
        return None
    due = row.deadline_at or (row.updated_at + timedelta(seconds=deadline_s))
    if not force and due > now:
        return None
    row.deadline_at = now + timedelta(seconds=deadline_s)
    session.flush()
    return row

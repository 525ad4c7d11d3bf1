"""The answer generation: one counter that grows in the same transaction as any change an answer
depends on, so a cached answer is valid for exactly one value of it.

What changes an answer: a topology, a site, its ISPs or subflows (PATCH, DELETE); a finished
campaign, its fits or impact factors (a new calibration); a token revoked, re-scoped, expired or
deleted. The rule is applied here, to every session, whatever flow made the change: a write
path that forgets to invalidate cannot exist. Progress of a running campaign (measurements,
counters) and a token's `last_used_at` change no answer and leave the counter alone.

The counter is raised once per transaction, last, just before COMMIT: its row lock is held for
the shortest time and is the last lock a writer takes, so writers never deadlock on it. Readers
read it first, before anything they cache: under READ COMMITTED an answer computed after reading
value g can only be newer than g, never older.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from sqlalchemy import Connection, Engine, bindparam, event, inspect, select, update
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session, sessionmaker

from models import (
    ISP,
    AnswerGeneration,
    ApiToken,
    Campaign,
    FitRecord,
    ImpactFactor,
    Site,
    Subflow,
    Topology,
)

_ANY_CHANGE = (Topology, Site, ISP, Subflow, FitRecord, ImpactFactor)
_TABLES = frozenset(m.__table__.name for m in (*_ANY_CHANGE, Campaign, ApiToken))
_DIRTY = "answer_inputs_changed"
_TOKEN_FIELDS = ("revoked", "scope", "expires_at", "token_hash")

_CURRENT = select(AnswerGeneration.value).where(AnswerGeneration.id == bindparam("row"))
_RAISE = (
    update(AnswerGeneration)
    .where(AnswerGeneration.id == 1)
    .values(value=AnswerGeneration.value + 1)
)


def current(session: Session) -> int:
    """The generation as this transaction sees it (one primary-key read)."""
    value = session.connection().execute(_CURRENT, {"row": 1}).scalar()
    return int(value or 0)


class HeldReader:
    """Reads the generation on one connection it keeps, in autocommit: each read is one
    statement that sees what was committed before it began, with no pool checkout, ping or
    ROLLBACK around it -- the read a cached answer waits for, made as cheap as it can be.

    Reads may come from different threads, one at a time; a connection that failed is dropped
    and the next read opens a new one.
    """

    def __init__(self, session_factory: Callable[[], Session]) -> None:
        bind = session_factory.kw.get("bind") if isinstance(session_factory, sessionmaker) else None
        # Anything but sessions on an engine (sessions bound to a caller's outer transaction, a
        # factory that picks its sessions per call) is read through a session of its own.
        self._engine = bind if isinstance(bind, Engine) else None
        self._session_factory = session_factory
        self._connection: Connection | None = None
        self._lock = threading.Lock()

    def read(self) -> int:
        if self._engine is None:
            with self._session_factory() as session:
                return current(session)
        with self._lock:
            if self._connection is None:
                self._connection = self._engine.connect().execution_options(
                    isolation_level="AUTOCOMMIT")
            try:
                return int(self._connection.execute(_CURRENT, {"row": 1}).scalar() or 0)
            except DBAPIError:
                self._drop(broken=True)
                raise

    def close(self) -> None:
        with self._lock:
            self._drop(broken=False)

    def _drop(self, broken: bool) -> None:
        if self._connection is not None:
            connection, self._connection = self._connection, None
            if broken:  # not back into the pool
                connection.invalidate()
            connection.close()


def _changes_an_answer(session: Session, obj, new_or_deleted: bool) -> bool:
    if isinstance(obj, _ANY_CHANGE):
        return True
    if isinstance(obj, Campaign):  # a calibration is an answer's input once its campaign is done
        if new_or_deleted:
            return obj.__dict__.get("state") == "done"
        before = _history(obj, "state")
        return obj.__dict__.get("state") == "done" or "done" in (before.deleted or ())
    if isinstance(obj, ApiToken):  # last_used_at changes no answer; the rest of the row does
        if new_or_deleted:
            return obj in session.deleted
        return any(_history(obj, name).has_changes() for name in _TOKEN_FIELDS)
    return False


def _history(obj, name: str):
    return inspect(obj).attrs[name].history


@event.listens_for(Session, "before_flush")
def _note_changes(session: Session, _context, _instances) -> None:
    if session.info.get(_DIRTY):
        return
    changed = any(_changes_an_answer(session, o, True) for o in (*session.new, *session.deleted))
    changed = changed or any(
        _changes_an_answer(session, o, False) for o in session.dirty if session.is_modified(o)
    )
    if changed:
        session.info[_DIRTY] = True


@event.listens_for(Session, "do_orm_execute")
def _note_bulk_changes(state) -> None:
    """UPDATE / DELETE statements that bypass the unit of work (bulk deletes of old fits)."""
    if not (state.is_update or state.is_delete or state.is_insert):
        return
    table = getattr(state.statement, "table", None)
    if table is not None and table.name in _TABLES:
        state.session.info[_DIRTY] = True


@event.listens_for(Session, "before_commit")
def _raise_before_commit(session: Session) -> None:
    if session.in_nested_transaction():
        return  # the outermost commit raises it, once
    session.flush()
    if session.info.pop(_DIRTY, False):
        session.connection().execute(_RAISE)


@event.listens_for(Session, "after_rollback")
def _forget(session: Session) -> None:
    session.info.pop(_DIRTY, None)

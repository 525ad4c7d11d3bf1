"""The embedded scheduler: with no broker, the API process does what Celery beat does.

Every `beat_interval_s` a background thread ticks. A tick takes (or renews) the database's
scheduler lease and, only while it holds it, queues the campaigns whose schedule is due
(`recalibration.queue_due_campaigns`, the code beat's `recalibrate_due` runs), then hands on
stalled campaigns and the hand-overs still owed (`dispatch.recover_stalled`, `send_owed`: beat's
`resume_campaigns`), sweeps the applies (`apply_outbox.sweep`: owed hand-overs, an apply
whose process died run again here, one past its deadline settled; beat's `resume_applies`) and
starts the re-applies a recalibration's new answer still owes (`reapply.reapply_due`).
Of several API processes on one database (`mpcoa serve --workers N`, or several `mpcoa serve`
on one SQLite file) exactly one holds the lease; the others tick, find it
taken and do nothing. The due schedules are queued in the transaction that renewed the lease,
so a holder that lost its lease while paused cannot queue them too (the row stays locked until
commit). Campaigns it queues go to this process's in-process executor like any other
(`dispatch.start_campaign` hands them over after commit). A clean stop gives the lease back; a
process that dies leaves it to expire after `scheduler_lease_ttl_s`, and another takes over.

Becoming the holder also resumes the campaigns left active (`on_lead`, the in-process executor's
`resume_all`): at start-up of a lone process as before, and after a takeover the campaigns the dead
holder had queued in its memory. A process that starts beside a live holder resumes nothing: it
would drop the leases of campaigns the holder is running and probe them twice.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sqlalchemy import Engine

from ...db import get_engine, session_scope
from ...settings import Settings
from ...store import leases
from ..applying import apply_outbox
from ..applying.apply import RUNNERS
from ..campaign import dispatch
from . import reapply, recalibration

log = logging.getLogger(__name__)

LEASE_NAME = "recalibration"


def holder_id() -> str:
    """Who holds the lease: host, process id and a random tag (a restarted process with a
    reused pid is still another holder)."""
    return f"{socket.gethostname()[:40]}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


@dataclass
class Tick:
    """What one tick did; `leader` False: another process holds the lease, nothing was done."""

    leader: bool
    queued: list[int] = field(default_factory=list)
    recovered: list[int] = field(default_factory=list)
    sent: list[int] = field(default_factory=list)
    applies: dict[str, list[int]] = field(default_factory=dict)
    reapplied: list[int] = field(default_factory=list)


def tick(
    *, settings: Settings, engine: Engine, holder: str, now: datetime | None = None
) -> Tick:
    """One beat of the embedded scheduler (see the module's docstring)."""
    lasts = timedelta(seconds=settings.scheduler_lease_ttl_s)
    with session_scope(engine) as s:
        # The lease first: on SQLite the transaction then starts as a writer (a read first
        # would make a later write fail against a newer snapshot).
        if not leases.take_lease(s, name=LEASE_NAME, holder=holder, lasts=lasts, now=now):
            return Tick(leader=False)
        queued = recalibration.queue_due_campaigns(s, settings=settings, now=now)
    with session_scope(engine) as s:
        recovered = dispatch.recover_stalled(s, settings=settings)
    with session_scope(engine) as s:
        sent = dispatch.send_owed(s, settings=settings)
    applies = apply_outbox.sweep(settings, engine=engine, now=now, runners=RUNNERS)
    with session_scope(engine) as s:  # a recalibration's answer the runner did not re-apply
        started = reapply.reapply_due(s, settings=settings)
    reapply.dispatch_all(started, settings, engine=engine)
    return Tick(leader=True, queued=queued, recovered=recovered, sent=sent, applies=applies,
                reapplied=[apply_id for apply_id, _plan in started])


class EmbeddedScheduler:
    """The background thread that ticks every `beat_interval_s` until `stop`."""

    def __init__(
        self,
        settings: Settings,
        engine: Engine | None = None,
        on_lead: Callable[[], object] | None = None,
    ) -> None:
        self.settings = settings
        self.engine = engine or get_engine(settings)
        self.on_lead = on_lead
        self.holder = holder_id()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._leader = False

    def start(self) -> None:
        if self._thread is not None:
            return
        self._thread = threading.Thread(target=self._run, name="mpcoa-scheduler", daemon=True)
        self._thread.start()
        log.info("embedded scheduler %s: ticking every %.0f s", self.holder,
                 self.settings.beat_interval_s)

    def stop(self, timeout: float = 10.0) -> None:
        """Stop ticking and give the lease back (if this process has it)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
        try:
            with session_scope(self.engine) as s:
                if leases.release_lease(s, name=LEASE_NAME, holder=self.holder):
                    log.info("embedded scheduler %s: lease given back", self.holder)
        except Exception:  # the database is gone too: the lease expires on its own
            log.warning("embedded scheduler %s: could not give the lease back", self.holder)

    def _run(self) -> None:
        while not self._stop.is_set():
            self._tick_once()
            self._stop.wait(self.settings.beat_interval_s)

    def _tick_once(self) -> None:
        try:
            result = tick(settings=self.settings, engine=self.engine, holder=self.holder)
        except Exception:  # a database hiccup: the next tick tries again
            log.exception("embedded scheduler %s: tick failed", self.holder)
            return
        if result.leader != self._leader:
            self._leader = result.leader
            log.info("embedded scheduler %s: %s the scheduler lease", self.holder,
                     "holds" if result.leader else "lost")
            if result.leader and self.on_lead is not None:
                try:
                    self.on_lead()
                except Exception:
                    log.exception("embedded scheduler %s: resuming campaigns failed", self.holder)
        if result.queued or result.recovered or result.sent:
            log.info("embedded scheduler: queued %s, recovered %s, sent %s",
                     result.queued, result.recovered, result.sent)

"""The embedded executor: campaigns run in this process, one after another, on a background thread.

A scheduling shim around the executor protocol (`flows.campaign.executor`), which the Celery tasks
drive too: here the next turn is the next loop, a busy site is waited for with a sleep, and a failed
probe is retried after its backoff in this thread. So `mpcoa serve` and `mpcoa demo` need no
broker and no worker process. `install` registers it with `flows.campaign.dispatch` at start-up.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable

from sqlalchemy.engine import Engine

from models import Campaign

from ...db import get_engine, session_scope
from ...settings import Settings
from ...store import campaigns as campaign_store
from ...store import probe_lease
from . import dispatch, executor
from .finish import Finished
from .plan import ProbeStep
from .probing import Prober, default_prober_factory

log = logging.getLogger(__name__)

Progress = Callable[[Campaign, ProbeStep | None], None]
#: what the executor does with a finished campaign's events (`finish.Finished`): given by whoever
#: installs it (the domains above this one: a recalibration's re-apply, `scheduling.reapply`)
OnFinished = Callable[[Finished], None]
SITE_BUSY_WAIT_S = 1.0  # a campaign waiting for a site another campaign is probing


def run_campaign(
    campaign_id: int,
    *,
    settings: Settings,
    engine: Engine | None = None,
    prober: Prober | None = None,
    on_progress: Progress | None = None,
    stop: threading.Event | None = None,
    on_finished: OnFinished | None = None,
) -> str:
    """Run a campaign to its end in this thread; returns its final state. `on_finished`: what
    to do with the events of the turn that finished it (after that turn's commit)."""
    engine = engine or get_engine(settings)
    stop = stop or threading.Event()
    if prober is None:
        prober = default_prober_factory(settings, engine)(*executor.site_names(engine, campaign_id))
    owner = probe_lease.new_owner()  # this run's: its leases are given again to it only
    while not stop.is_set():
        turn = executor.advance_once(
            engine, campaign_id=campaign_id, prober=prober, settings=settings, owner=owner
        )
        if on_progress is not None:
            with session_scope(engine) as s:
                on_progress(campaign_store.get_campaign(s, campaign_id=campaign_id), turn.step)
        if turn.finished is not None and on_finished is not None:
            on_finished(turn.finished)
        if turn.step is None:
            return turn.state
        if turn.lease is None:  # a site is busy, or it gives way to a busier site's campaign
            stop.wait(SITE_BUSY_WAIT_S)
            continue
        _run_with_retries(engine, campaign_id, turn, prober, settings, stop)
        executor.release(engine, campaign_id=campaign_id, lease=turn.lease, owner=owner)
    return "interrupted"


def _run_with_retries(engine, campaign_id: int, turn, prober: Prober, settings, stop) -> None:
    attempt = 0
    while True:
        outcome = executor.run_step(
            engine, campaign_id=campaign_id, step=turn.step, lease=turn.lease,
            owner=turn.owner, measure=prober.measure, settings=settings, attempt=attempt,
        )
        if outcome.retry_in_s is None:
            return
        if stop.wait(outcome.retry_in_s):
            return
        attempt += 1


class InProcessExecutor:
    """One daemon thread working through queued campaign ids in order."""

    def __init__(self, settings: Settings, on_finished: OnFinished | None = None) -> None:
        self.settings = settings
        self.on_finished = on_finished
        self._queue: queue.Queue[int] = queue.Queue()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def submit(self, campaign_id: int) -> None:
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._work, name="mpcoa-campaigns", daemon=True
                )
                self._thread.start()
        self._queue.put(campaign_id)

    def resume_all(self) -> list[int]:
        """Queue every queued or running campaign (after a restart of the process)."""
        with session_scope(get_engine(self.settings)) as s:
            ids = campaign_store.active_campaign_ids(s)
            for cid in ids:  # whoever held a lease before the restart is gone
                probe_lease.drop_lease(campaign_store.get_campaign(s, campaign_id=cid))
        for cid in ids:
            self.submit(cid)
        return ids

    def stop(self) -> None:
        self._stop.set()

    def join(self, timeout_s: float) -> bool:
        """Wait for the worker thread to end after `stop` (True: it did). A process that exits
        with the thread still inside a probe can crash in the interpreter's finalisation: once
        in 690 demo stops by SIGTERM mid-campaign, the demo exited with SIGSEGV after its
        teardown."""
        thread = self._thread
        if thread is None:
            return True
        thread.join(timeout_s)
        return not thread.is_alive()

    def _work(self) -> None:
        while not self._stop.is_set():
            try:
                campaign_id = self._queue.get(timeout=0.5)
            except queue.Empty:
                continue
            try:
                run_campaign(campaign_id, settings=self.settings, stop=self._stop,
                             on_finished=self.on_finished)
            except Exception:
                log.exception(
                    "campaign %s: the in-process executor stopped on an error", campaign_id
                )


_executor: InProcessExecutor | None = None


def install(settings: Settings, on_finished: OnFinished | None = None) -> InProcessExecutor:
    """The process-wide in-process executor, registered with dispatch (created once, with the
    first caller's settings and `on_finished`: what it does with a finished campaign's events,
    `scheduling.reapply.after_finish` in the API process and the demo)."""
    global _executor
    if _executor is None:
        _executor = InProcessExecutor(settings, on_finished)
        runner = _executor
        dispatch.register_executor("inprocess", lambda cid, *_: runner.submit(cid))
    return _executor

"""The embedded executor: campaigns run in this process, one after another, on a background thread.

It drives exactly the steps the Celery tasks drive (`flows.calibration`, then `flows.finish`), with
the same retry policy (exponential backoff, then the probe is recorded as failed and the campaign
goes on), so `mpcoa serve` and `mpcoa demo` need no broker and no worker process. `install`
registers it with `flows.dispatch` at start-up.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable

from sqlalchemy.engine import Engine

from models import Campaign
from probes.base import ProbeError

from ..db import get_engine, session_scope
from ..settings import Settings
from ..store import campaigns as campaign_store
from ..store import inventory
from . import calibration, dispatch
from .finish import finish_campaign
from .plan import ProbeStep
from .probing import Prober, default_prober_factory

log = logging.getLogger(__name__)

Progress = Callable[[Campaign, ProbeStep | None], None]


def backoff_s(retry: int, factor: float, maximum: float = 60.0) -> float:
    """factor * 2^retry, capped: the same curve as Celery's retry_backoff."""
    return min(maximum, factor * 2**retry)


def site_pair(engine: Engine, campaign_id: int) -> tuple[str, str]:
    """(sender site, receiver site) of a campaign's topology."""
    with session_scope(engine) as s:
        campaign = campaign_store.get_campaign(s, campaign_id=campaign_id)
        topo = inventory.get_topology(s, topology_id=campaign.topology_id)
        return topo.local_site.name, topo.remote_site.name


def run_campaign(
    campaign_id: int,
    *,
    settings: Settings,
    engine: Engine | None = None,
    prober: Prober | None = None,
    on_progress: Progress | None = None,
    stop: threading.Event | None = None,
) -> str:
    """Run a campaign to its end in this thread; returns its final state."""
    engine = engine or get_engine(settings)
    if prober is None:
        prober = default_prober_factory(settings)(*site_pair(engine, campaign_id))
    while stop is None or not stop.is_set():
        try:
            with session_scope(engine) as s:
                advance = calibration.next_step(
                    s, campaign_id=campaign_id, prober=prober, settings=settings
                )
                if advance.finish:
                    finish_campaign(s, campaign_id=campaign_id)
        except ProbeError as exc:  # e.g. no testbed for the sites: the campaign cannot run
            with session_scope(engine) as s:
                calibration.fail_campaign(s, campaign_id=campaign_id, why=str(exc))
            continue
        step = advance.step
        with session_scope(engine) as s:
            campaign = campaign_store.get_campaign(s, campaign_id=campaign_id)
            if step is not None:
                lease = calibration.claim(
                    s, campaign_id=campaign_id, step=step, settings=settings
                )
                request = calibration.pending_request(s, campaign_id=campaign_id, step=step)
        if on_progress is not None:
            on_progress(campaign, step)
        if step is None:
            return campaign.state
        if lease is None:  # a site is busy, or it gives way to a busier site's campaign
            time.sleep(1.0)
            continue
        if request is not None:
            with calibration.lease_heartbeat(
                engine, campaign_id=campaign_id, lease_id=lease, settings=settings
            ):
                _measure_with_retries(engine, campaign_id, step, request, prober, settings, stop)
        with session_scope(engine) as s:
            calibration.release(s, campaign_id=campaign_id, lease_id=lease)
    return "interrupted"


def _measure_with_retries(engine, campaign_id, step, request, prober, settings, stop) -> None:
    for attempt in range(settings.probe_retries + 1):
        try:
            result = prober.measure(request)
        except Exception as exc:  # any crash of a probe is a failed probe, never a stuck campaign
            if not isinstance(exc, ProbeError):
                log.exception("campaign %s: probe crashed", campaign_id)
            log.warning("campaign %s: %s failed (%s)", campaign_id, step.describe(), exc)
            if attempt == settings.probe_retries:
                with session_scope(engine) as s:
                    calibration.record_failure(
                        s,
                        campaign_id=campaign_id,
                        step=step,
                        error=f"{exc} (after {attempt + 1} attempts)",
                    )
                return
            delay = backoff_s(attempt, settings.probe_retry_backoff_s)
            if stop is not None and stop.wait(delay):
                return
            if stop is None:
                time.sleep(delay)
            continue
        with session_scope(engine) as s:
            calibration.store_result(s, campaign_id=campaign_id, step=step, result=result)
        return


class InProcessExecutor:
    """One daemon thread working through queued campaign ids in order."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
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
                campaign_store.drop_lease(campaign_store.get_campaign(s, campaign_id=cid))
        for cid in ids:
            self.submit(cid)
        return ids

    def stop(self) -> None:
        self._stop.set()

    def _work(self) -> None:
        while not self._stop.is_set():
            try:
                campaign_id = self._queue.get(timeout=0.5)
            except queue.Empty:
                continue
            try:
                run_campaign(campaign_id, settings=self.settings, stop=self._stop)
            except Exception:
                log.exception(
                    "campaign %s: the in-process executor stopped on an error", campaign_id
                )


_executor: InProcessExecutor | None = None


def install(settings: Settings) -> InProcessExecutor:
    """The process-wide in-process executor, registered with dispatch (created once, with the
    first caller's settings)."""
    global _executor
    if _executor is None:
        _executor = InProcessExecutor(settings)
        dispatch.register_executor("inprocess", _executor.submit)
    return _executor

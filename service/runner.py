"""The embedded executor: campaigns run in this process, one after another, on a background thread.

It drives exactly the steps the Celery tasks drive (`service.calibration`), with the same retry
policy (exponential backoff, then the probe is recorded as failed and the campaign goes on), so
`mpcoa serve` and `mpcoa demo` need no broker and no worker process.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.engine import Engine

from models import Campaign
from probes.base import MeasurementResult, ProbeError

from . import calibration
from .db import get_engine, session_scope
from .inventory import get_topology
from .probing import Prober, TestbedProber, find_testbed
from .settings import Settings, get_settings

log = logging.getLogger(__name__)

ProberFactory = Callable[[str, str], Prober]  # (local site, remote site) -> Prober
Progress = Callable[[Campaign, "calibration.ProbeStep | None"], None]


def default_prober_factory(settings: Settings | None = None) -> ProberFactory:
    settings = settings or get_settings()

    def make(local: str, remote: str) -> Prober:
        return LazyProber(local, remote, settings.iperf3_binary)

    return make


@dataclass
class LazyProber:
    """Finds the site pair's testbed when a probe is first needed, not when a task starts."""

    local: str
    remote: str
    iperf3_binary: str | None = None
    _prober: TestbedProber | None = None

    def _get(self) -> TestbedProber:
        if self._prober is None:
            self._prober = TestbedProber(
                find_testbed(self.local, self.remote), iperf3_binary=self.iperf3_binary
            )
        return self._prober

    def available_ccs(self) -> set[str]:
        return self._get().available_ccs()

    def measure(self, request) -> MeasurementResult:
        return self._get().measure(request)


def backoff_s(retry: int, factor: float, maximum: float = 60.0) -> float:
    """factor * 2^retry, capped: the same curve as Celery's retry_backoff."""
    return min(maximum, factor * 2**retry)


def site_pair(engine: Engine, campaign_id: int) -> tuple[str, str]:
    with session_scope(engine) as s:
        campaign = calibration.get_campaign(s, campaign_id)
        topo = get_topology(s, campaign.topology_id)
        return topo.local_site.name, topo.remote_site.name


def run_campaign(
    campaign_id: int,
    *,
    engine: Engine | None = None,
    prober: Prober | None = None,
    settings: Settings | None = None,
    on_progress: Progress | None = None,
    stop: threading.Event | None = None,
) -> str:
    """Run a campaign to its end in this thread; returns its final state."""
    settings = settings or get_settings()
    engine = engine or get_engine(settings)
    if prober is None:
        prober = default_prober_factory(settings)(*site_pair(engine, campaign_id))
    while stop is None or not stop.is_set():
        try:
            with session_scope(engine) as s:
                step = calibration.next_step(s, campaign_id, prober)
        except ProbeError as exc:  # e.g. no testbed for the sites: the campaign cannot run
            with session_scope(engine) as s:
                calibration.fail_campaign(s, campaign_id, str(exc))
            continue
        with session_scope(engine) as s:
            campaign = calibration.get_campaign(s, campaign_id)
            if step is not None:
                lease = calibration.claim(s, campaign_id, step)
                request = calibration.pending_request(s, campaign_id, step)
        if on_progress is not None:
            on_progress(campaign, step)
        if step is None:
            return campaign.state
        if lease is None:  # another executor holds the campaign (it should not, embedded)
            time.sleep(1.0)
            continue
        if request is not None:
            _measure_with_retries(engine, campaign_id, step, request, prober, settings, stop)
        with session_scope(engine) as s:
            calibration.release(s, campaign_id, lease)
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
                        s, campaign_id, step, f"{exc} (after {attempt + 1} attempts)"
                    )
                return
            delay = backoff_s(attempt, settings.probe_retry_backoff_s)
            if stop is not None and stop.wait(delay):
                return
            if stop is None:
                time.sleep(delay)
            continue
        with session_scope(engine) as s:
            calibration.store_result(s, campaign_id, step, result)
        return


class InProcessExecutor:
    """One daemon thread working through queued campaign ids in order."""

    def __init__(self, settings: Settings | None = None) -> None:
        self.settings = settings or get_settings()
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
        engine = get_engine(self.settings)
        with session_scope(engine) as s:
            ids = list(
                s.scalars(
                    select(Campaign.id)
                    .where(Campaign.state.in_(("queued", "running")))
                    .order_by(Campaign.id)
                )
            )
            for cid in ids:  # whoever held a lease before the restart is gone
                calibration.drop_lease(s, cid)
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


def executor(settings: Settings | None = None) -> InProcessExecutor:
    """The process-wide in-process executor (created with the first caller's settings)."""
    global _executor
    if _executor is None:
        _executor = InProcessExecutor(settings)
    return _executor

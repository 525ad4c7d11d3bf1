"""`GET /metrics`: Prometheus figures for operators (docs/workers.md, "Metrics and alerts").

Two kinds of figures, each kept where it is correct with several API processes and Celery
workers:

- **from the database at scrape time** (`DatabaseCollector`, `service.store.metrics`): campaigns
  by state, probes done and failed by reason, probe-seconds, queue depths, site-lock waits,
  calibrations, drift events, each topology's last successful calibration. The rows are written
  by whichever process ran the probe (a Celery worker has no HTTP port to scrape, and a counter in
  one API process would miss what the others and the workers did), so counting rows is the one
  way every process's work shows up, in any scrape of any process, and survives restarts.
- **per request, in the process that served it**: answer latency. With several API processes
  (uvicorn `--workers N`, gunicorn) set `PROMETHEUS_MULTIPROC_DIR` to an empty directory shared
  by them: the histogram is then kept in files there and a scrape of any process adds up all of
  them (prometheus_client's multiprocess mode). Without it, one process's own histogram.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

from fastapi import APIRouter, Depends, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from api.deps import require_read
from service.store import metrics as figures_store

ANSWER_LATENCY = Histogram(
    "mpcoa_answer_latency_seconds",
    "Time to answer POST /recommendations, by how it was answered",
    ["source"],  # cache | solved | provisional
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0),
)


class AnswerTimer:
    """`with AnswerTimer() as t: ... t.source = "cache"`: one observation per answer."""

    def __init__(self) -> None:
        self.source = "solved"

    def __enter__(self) -> AnswerTimer:
        self._t0 = time.perf_counter()
        return self

    def __exit__(self, *exc) -> None:
        if exc[0] is None:
            ANSWER_LATENCY.labels(self.source).observe(time.perf_counter() - self._t0)


class DatabaseCollector(Collector):
    def __init__(self, session_factory, broker_url: str | None) -> None:
        self.session_factory = session_factory
        self.broker_url = broker_url

    def collect(self) -> Iterator:
        with self.session_factory() as session:
            f = figures_store.figures(session)
            site_names = figures_store.site_names(session)
        g = GaugeMetricFamily("mpcoa_campaigns", "Campaigns by state", labels=["state"])
        for state, n in f.campaigns.items():
            g.add_metric([state], n)
        yield g
        c = CounterMetricFamily("mpcoa_probes", "Probes stored, by phase, status and (failed) "
                                "reason", labels=["phase", "status", "reason"])
        for (phase, status, reason), n in sorted(f.probes.items()):
            c.add_metric([phase, status, reason], n)
        yield c
        c = CounterMetricFamily("mpcoa_probe_seconds", "Probe time spent, by phase",
                                labels=["phase"])
        for phase, s in sorted(f.probe_seconds.items()):
            c.add_metric([phase], s)
        yield c
        c = CounterMetricFamily("mpcoa_calibrations", "Campaigns finished done, by why they ran "
                                "(schedule: a recalibration)", labels=["reason"])
        for reason, n in sorted(f.calibrations.items()):
            c.add_metric([reason], n)
        yield c
        c = CounterMetricFamily("mpcoa_recalibration_events", "Changes between calibrations "
                                "(warm_drifted: drift)", labels=["kind"])
        for kind, n in sorted(f.events.items()):
            c.add_metric([kind], n)
        yield c
        yield GaugeMetricFamily("mpcoa_campaigns_waiting_for_sites",
                                "Active campaigns waiting for their sites' locks",
                                value=f.waiting_for_sites)
        yield GaugeMetricFamily("mpcoa_site_wait_longest_seconds",
                                "The longest current wait for sites' locks",
                                value=f.longest_site_wait_s)
        yield GaugeMetricFamily("mpcoa_sites_locked", "Sites held by a running probe",
                                value=f.sites_locked)
        ts = GaugeMetricFamily("mpcoa_last_calibration_timestamp_seconds",
                               "When the topology's last successful calibration finished "
                               "(Unix time)", labels=["topology_id", "local", "remote"])
        age = GaugeMetricFamily("mpcoa_last_calibration_age_seconds",
                                "Seconds since the topology's last successful calibration",
                                labels=["topology_id", "local", "remote"])
        never = GaugeMetricFamily("mpcoa_topology_calibrated",
                                  "1 if the topology has a successful calibration, else 0",
                                  labels=["topology_id", "local", "remote"])
        for tid, (local, remote, finished) in sorted(f.last_calibration.items()):
            labels = [str(tid), local, remote]
            never.add_metric(labels, 0 if finished is None else 1)
            if finished is not None:
                ts.add_metric(labels, finished.timestamp())
                age.add_metric(labels, (f.now - finished).total_seconds())
        yield from (ts, age, never)
        yield from self._queues(f.campaigns.get("queued", 0), site_names)

    def _queues(self, queued: int, site_names: list[str]) -> Iterator:
        g = GaugeMetricFamily("mpcoa_queue_depth", "Work waiting: queued campaigns (queue="
                              "campaigns) and, with a Redis broker, messages per Celery queue",
                              labels=["queue"])
        g.add_metric(["campaigns"], queued)
        up = 1
        if self.broker_url and self.broker_url.startswith(("redis://", "rediss://")):
            depths = _redis_depths(self.broker_url, site_names)
            up = 0 if depths is None else 1
            for name, n in sorted((depths or {}).items()):
                g.add_metric([name], n)
        yield g
        if self.broker_url:
            yield GaugeMetricFamily("mpcoa_broker_up", "1 if the broker answered this scrape",
                                    value=up)


def _redis_depths(url: str, site_names: list[str]) -> dict[str, int] | None:
    """Messages waiting in each site's queue and the control queue (kombu keeps a Redis list per
    queue); None when the broker does not answer within half a second."""
    import redis

    from service.messaging import CONTROL_QUEUE, site_queue

    names = [site_queue(n) for n in site_names] + [CONTROL_QUEUE]
    try:
        client = redis.Redis.from_url(url, socket_timeout=0.5, socket_connect_timeout=0.5)
        with client.pipeline() as pipe:
            for name in names:
                pipe.llen(name)
            lengths = pipe.execute()
        client.close()
    except redis.RedisError:
        return None
    return dict(zip(names, (int(n) for n in lengths), strict=True))


def registry_for(app) -> CollectorRegistry:
    registry = getattr(app.state, "metrics_registry", None)
    if registry is None:
        registry = CollectorRegistry(auto_describe=False)
        if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
            from prometheus_client import multiprocess

            multiprocess.MultiProcessCollector(registry)
        else:
            registry.register(ANSWER_LATENCY)
        registry.register(DatabaseCollector(app.state.session_factory,
                                            app.state.settings.broker_url))
        app.state.metrics_registry = registry
    return registry


router = APIRouter()


@router.get("/metrics", tags=["meta"], include_in_schema=False,
            dependencies=[Depends(require_read)])
def metrics(request: Request) -> Response:
    """Prometheus text format (docs/workers.md)."""
    return Response(generate_latest(registry_for(request.app)), media_type=CONTENT_TYPE_LATEST)

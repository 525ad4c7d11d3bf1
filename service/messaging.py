"""The broker as every flow reaches it: the client that sends tasks by name (so the API and the
flows need the Celery library but not `workers`), and the queues they go to: a site's own
(`site.<name>`: its probes, applies, watches) and the control queue (beat's jobs, the sweeps).
Campaign turns (`flows.campaign.dispatch`) and applies (`flows.applying`) share it."""

from __future__ import annotations

from functools import lru_cache

CONTROL_QUEUE = "mpcoa.control"  # beat's jobs and the resume sweeps


def site_queue(site: str) -> str:
    return f"site.{site}"


@lru_cache(maxsize=4)
def broker_client(broker_url: str):
    """One Celery client per broker URL, kept for the process (it holds the connection pool)."""
    from celery import Celery  # here: the embedded default runs without a broker

    return Celery("mpcoa-client", broker=broker_url)

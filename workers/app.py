"""The Celery app, configured from the same settings as everything else (MPCOA_*).

Queues: one per site, `site.<name>`; a campaign's tasks go to its sender site's queue, so each
site's worker runs the probes that start at its site. Reliability comes from Celery's own options:
late acknowledgement (a task a killed worker was running is delivered again), one task prefetched
at a time, broker reconnection, and retries with exponential backoff.
"""

from __future__ import annotations

from celery import Celery
from celery.signals import worker_ready, worker_shutdown

from service.messaging import CONTROL_QUEUE, site_queue
from service.settings import Settings, get_settings

__all__ = ["CONTROL_QUEUE", "app", "make_app", "site_queue"]


def make_app(settings: Settings | None = None) -> Celery:
    settings = settings or get_settings()
    app = Celery("mpcoa", broker=settings.broker_url or "memory://", include=["workers.tasks"])
    app.conf.update(
        task_serializer="json",
        accept_content=["json"],
        task_ignore_result=True,
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        task_default_queue=CONTROL_QUEUE,
        broker_connection_retry_on_startup=True,
        broker_connection_max_retries=None,  # a broker restart is waited out
        # Redis redelivers an unacknowledged task (its worker died) after this many seconds.
        broker_transport_options={"visibility_timeout": settings.broker_visibility_timeout_s},
        worker_hijack_root_logger=False,
        timezone="UTC",
        enable_utc=True,
        beat_schedule={
            "recalibrate-due-topologies": {
                "task": "mpcoa.recalibrate_due",
                "schedule": settings.beat_interval_s,
                "options": {"queue": CONTROL_QUEUE},
            },
            "sweep-applies": {
                "task": "mpcoa.resume_applies",
                "schedule": settings.beat_interval_s,
                "options": {"queue": CONTROL_QUEUE},
            },
            "resume-stalled-campaigns": {
                "task": "mpcoa.resume_campaigns",
                "schedule": settings.beat_interval_s,
                "options": {"queue": CONTROL_QUEUE},
            },
        },
    )
    return app


app = make_app()


@worker_ready.connect
def _resume_on_start(sender, **_kwargs) -> None:
    """A worker that comes back picks up the campaigns nobody is working on, and the applies
    and rollbacks left in flight (a killed worker's among them)."""
    sender.app.send_task("mpcoa.resume_campaigns", queue=CONTROL_QUEUE)
    sender.app.send_task("mpcoa.resume_applies", kwargs={"at_start": True}, queue=CONTROL_QUEUE)


@worker_shutdown.connect
def _stop_watchers(**_kwargs) -> None:
    """SIGTERM or SIGINT of the worker (a warm shutdown): its failover watchers stop with it,
    each with a `watch_stopped` event. (SIGKILL: the kernel ends them, PR_SET_PDEATHSIG.)"""
    from service.flows.applying import failover_watch

    failover_watch.stop_all("the site worker is stopping")


@worker_shutdown.connect
def _stop_paced_receivers(**_kwargs) -> None:
    """The site's long-lived paced receiver stops with its worker (SIGKILL: PR_SET_PDEATHSIG)."""
    from probes.tools import paced_server

    paced_server.stop_all()

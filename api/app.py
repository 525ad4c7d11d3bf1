"""The FastAPI application factory: the API's routers and the dashboard are added here."""

from __future__ import annotations

import gc
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial

from fastapi import FastAPI
from fastapi.responses import RedirectResponse
from sqlalchemy import text
from sqlalchemy.orm import Session, sessionmaker
from starlette.middleware.trustedhost import TrustedHostMiddleware

from api import docs, errors, metrics, openapi
from api.dashboard import login_router, static_router
from api.dashboard import router as dashboard_router
from api.deps import SessionDep
from api.middleware import BodyLimit, MethodGate, WriteGate
from api.routers import apply, campaigns, inventory, recommendations, schedules
from api.schemas import Health, Problem
from service.db import get_engine, make_sessionmaker
from service.flows.applying import apply_outbox, failover_watch
from service.flows.applying.apply import RUNNERS as APPLY_RUNNERS
from service.flows.campaign import runner
from service.flows.scheduling import reapply
from service.flows.scheduling.embedded_scheduler import EmbeddedScheduler
from service.settings import Settings, get_settings

DESCRIPTION = """
Recommends the MPTCP path manager (OPM), congestion control (OCC) and buffer size (OBS) between two
multi-homed sites (MPCOA, Chen et al. 2021), and keeps every measurement behind an answer.

Writes need an API token (`mpcoa token create NAME`), sent as `Authorization: Bearer <token>`;
reads need one too (or the dashboard's login) on a shared server, PostgreSQL or a broker, or
one that listens beyond loopback, and are open on the embedded demo (a SQLite file, no broker,
on 127.0.0.1); `MPCOA_READS_NEED_TOKEN` overrides. The server answers only the Host names it is
known by (loopback's, its address, `MPCOA_ALLOWED_HOSTS`). Units: buffer MiB, throughput Mbit/s,
bandwidth kbit/s, RTT ms.
"""

TAGS = [
    {"name": "recommendations", "description": "The main job, and Table 5"},
    {"name": "sites", "description": "Sites and their ISPs (Table 1)"},
    {"name": "topologies", "description": "Sender/receiver site pairs and their subflows"},
    {"name": "tables", "description": "The paper's Tables 2-4 for a topology"},
    {"name": "campaigns", "description": "Measurement campaigns and their progress"},
    {"name": "measurements", "description": "Every probe run, with its raw output"},
    {"name": "recalibration", "description": "Schedules, calibration history, change events"},
    {"name": "meta", "description": "Health"},
]


_frozen = False


def _freeze_start_up_objects() -> None:
    """What is loaded by the first start (modules, routes, schemas) lives as long as the
    process: frozen, the collector stops re-scanning it, and a full collection no longer stalls
    every request of a server worker for tens of milliseconds. Once per process: an object
    frozen and later dropped is freed by its reference count only, never as cyclic garbage."""
    global _frozen
    if not _frozen:
        gc.collect()
        gc.freeze()
        _frozen = True


def create_app(
    settings: Settings | None = None, session_factory: sessionmaker[Session] | None = None
) -> FastAPI:
    settings = settings or get_settings()
    if session_factory is None:
        session_factory = make_sessionmaker(get_engine(settings))
    in_process = None
    if settings.run_campaigns and settings.executor == "inprocess":
        # the executor registers with dispatch; a recalibration it finishes is re-applied
        in_process = runner.install(settings, partial(reapply.after_finish, settings=settings))

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        # No broker, so no beat: this process runs due schedules if it holds the database's
        # scheduler lease, and on taking it resumes the campaigns a previous run (or a dead
        # holder) left queued or running. Without the scheduler: resumed here.
        _freeze_start_up_objects()
        scheduler = None
        if in_process is not None and settings.embedded_scheduler:
            scheduler = EmbeddedScheduler(settings, on_lead=in_process.resume_all)
            scheduler.start()
        elif in_process is not None:
            in_process.resume_all()
            # an apply a previous run left: resumed here
            apply_outbox.sweep(settings, engine=get_engine(settings), runners=APPLY_RUNNERS)
        try:
            yield
        finally:
            if scheduler is not None:
                scheduler.stop()
            # the failover watchers this process started for embedded applies
            failover_watch.stop_all("the server is stopping")
            recommendations.close_desk(_app)

    app = FastAPI(
        lifespan=lifespan,
        title="mpcoa",
        version="0.1.0",
        description=DESCRIPTION,
        openapi_tags=TAGS,
        generate_unique_id_function=openapi.operation_id,
        responses={400: {"description": "the body is not parseable JSON", "model": Problem}},
        # Served by api.docs: behind the read rule, with local assets.
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
    )
    app.state.settings = settings
    app.state.session_factory = session_factory
    app.state.session_secret = settings.session_secret()
    errors.install(app)
    # Outermost last: the token gate answers before the body limit, both before any body read;
    # before it, a method the path does not have is 405; before all, a Host the server is not
    # known by (DNS rebinding: a page on another site whose name now points here) is 400.
    app.add_middleware(BodyLimit, max_bytes=settings.max_body_bytes)
    app.add_middleware(WriteGate)
    app.add_middleware(MethodGate)
    app.add_middleware(TrustedHostMiddleware, allowed_hosts=settings.trusted_hosts)

    app.include_router(recommendations.router)
    app.include_router(inventory.router)
    app.include_router(campaigns.router)
    app.include_router(schedules.router)
    app.include_router(metrics.router)
    app.include_router(apply.router)
    app.include_router(login_router)
    app.include_router(static_router)
    app.include_router(dashboard_router)
    docs.install(app)
    openapi.install(app)

    # Open whatever the read policy: compose's healthcheck and load balancers ask it without a
    # token, and it tells nothing of the sites (the database's kind, the executor, the policy).
    @app.get("/health", response_model=Health, tags=["meta"])
    def get_health(session: SessionDep):
        session.execute(text("SELECT 1"))
        return {
            "status": "ok",
            "database": session.get_bind().dialect.name,
            "executor": settings.executor,
            "reads_need_token": settings.reads_need_token,
        }

    # A browser pointed at the server's address lands on the dashboard, and its icon request
    # finds one (instead of a 404 in every page's console).
    @app.get("/", include_in_schema=False)
    def root() -> RedirectResponse:
        return RedirectResponse("/dashboard/", status_code=307)

    @app.get("/favicon.ico", include_in_schema=False)
    def favicon() -> RedirectResponse:
        return RedirectResponse(f"{docs.ASSETS_URL}/favicon.png", status_code=308)

    return app

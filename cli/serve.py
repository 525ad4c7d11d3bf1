"""`mpcoa serve`, `mpcoa db upgrade|downgrade|current`, `mpcoa token create|list|revoke`."""

from __future__ import annotations

from typing import Annotated, Literal

import typer

from cli.errors import EXIT_NOT_FOUND, emit_json, fail, service_failure
from cli.output import never, result_stream, say, show, table

LogLevel = Literal["critical", "error", "warning", "info", "debug", "trace"]
MAX_TOKEN_DAYS = 36_600  # a century: past it a date no longer fits in a datetime for long
# With several workers uvicorn's supervisor kills a worker that does not answer its ping in
# time and spawns another. A spawned worker answers only once it has imported the CLI (a second
# of CPU when quiet); uvicorn's 5 s default then kills every worker of a host whose cores are
# busy, over and over, and the API never answers.
WORKER_HEALTHCHECK_S = 60
db_app = typer.Typer(help="Database schema migrations (Alembic).", no_args_is_help=True)
token_app = typer.Typer(help="API tokens for the REST API's writes.", no_args_is_help=True)


def _settings():
    from service.settings import get_settings

    return get_settings()


def run_uvicorn(
    app,
    *,
    host: str,
    port: int,
    workers: int = 1,
    log_level: str = "info",
    access_log: bool = True,
    factory: bool = False,
    forwarded_allow_ips: str | None = None,
) -> None:
    """`uvicorn.run`, except that with several workers the accepted sockets get TCP_NODELAY.

    uvicorn's supervisor binds the listening socket with proto 0, and asyncio only sets
    TCP_NODELAY on accepted sockets whose proto is IPPROTO_TCP: with `--workers N` every keep-alive
    response then waits ~40 ms for the client's delayed ACK (uvicorn issue #3149). `app` must be an
    import string when workers > 1. `forwarded_allow_ips`: the proxies whose X-Forwarded-Proto
    and X-Forwarded-For are believed (None: uvicorn's default, 127.0.0.1 and ::1).
    """
    import socket

    import uvicorn
    from uvicorn.supervisors import Multiprocess

    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        workers=workers,
        log_level=log_level,
        access_log=access_log,
        factory=factory,
        forwarded_allow_ips=forwarded_allow_ips,
        timeout_worker_healthcheck=WORKER_HEALTHCHECK_S,
    )
    if config.workers > 1:
        sock = config.bind_socket()
        if sock.family in (socket.AF_INET, socket.AF_INET6) and sock.proto == 0:
            sock = socket.socket(sock.family, sock.type, socket.IPPROTO_TCP, sock.detach())
            sock.set_inheritable(True)
        Multiprocess(config, sockets=[sock]).run()
    else:
        uvicorn.Server(config).run()


def serve(
    host: str = typer.Option(None, help="bind address (default MPCOA_HOST or 127.0.0.1)"),
    port: int = typer.Option(None, min=1, max=65535, help="port (default MPCOA_PORT or 8000)"),
    migrate: bool = typer.Option(True, help="upgrade the schema to head before serving"),
    log_level: Annotated[LogLevel, typer.Option(help="uvicorn log level")] = "info",
    workers: int = typer.Option(
        1, min=1, max=64, help="worker processes (e.g. one per core; each has its own DB pool)"
    ),
    access_log: bool = typer.Option(True, help="log every request (costs CPU under load)"),
) -> None:
    """Run the REST API. With no configuration: a SQLite file in the user's data directory."""
    from api.app import create_app
    from service import db
    from service.settings_checks import is_loopback

    settings = _settings()
    if host and host != settings.host:
        # The read rule and the Host names follow the address served on; several workers
        # each build their settings from the environment.
        import os

        from service.settings import get_settings

        os.environ["MPCOA_HOST"] = host
        get_settings.cache_clear()
        settings = _settings()
    if not settings.reads_need_token and not is_loopback(settings.host):
        typer.echo(f"mpcoa: warning: reads need no token (MPCOA_READS_NEED_TOKEN=false) on "
                   f"{settings.host}: anyone who reaches it reads every site and measurement",
                   err=True)
    if workers > 1 and settings.is_embedded:
        fail("--workers > 1 needs PostgreSQL (MPCOA_DATABASE_URL)")
    try:
        settings.session_secret()
    except ValueError as exc:
        fail(str(exc))
    if migrate and settings.auto_migrate:
        db.upgrade(settings.effective_database_url)
    where = settings.sqlite_path if settings.is_embedded else "MPCOA_DATABASE_URL"
    typer.echo(f"mpcoa: database {where}, executor {settings.executor}", err=True)
    # Several workers each build the app from the environment (settings come from it anyway).
    run_uvicorn(
        create_app(settings) if workers == 1 else "api.app:create_app",
        host=settings.host,
        port=port or settings.port,
        workers=workers,
        log_level=log_level,
        access_log=access_log,
        factory=workers > 1,
        forwarded_allow_ips=settings.forwarded_allow_ips,
    )


@db_app.command("upgrade")
def db_upgrade(revision: str = typer.Argument("head"),
               as_json: bool = typer.Option(False, "--json", help="print JSON")) -> None:
    """Upgrade the schema (default: to the newest revision)."""
    from service import db
    from service.errors import Invalid

    url = _settings().effective_database_url
    try:
        db.upgrade(url, revision)
    except Invalid as exc:
        service_failure(exc)
    _at(db.current_revision(url), as_json)


@db_app.command("downgrade")
def db_downgrade(revision: str = typer.Argument(..., help="target revision, e.g. base"),
                 as_json: bool = typer.Option(False, "--json", help="print JSON")) -> None:
    """Downgrade the schema to REVISION ('base' drops every table)."""
    from service import db
    from service.errors import Invalid

    url = _settings().effective_database_url
    try:
        db.downgrade(url, revision)
    except Invalid as exc:
        service_failure(exc)
    _at(db.current_revision(url), as_json)


def _at(revision: str | None, as_json: bool) -> None:
    if as_json:
        emit_json({"revision": revision})
    else:
        say(f"at revision {revision or 'none (an empty database)'}")


@db_app.command("current")
def db_current(as_json: bool = typer.Option(False, "--json", help="print JSON")) -> None:
    """Print the schema revision of the configured database."""
    from service import db

    revision = db.current_revision(_settings().effective_database_url)
    if as_json:
        emit_json({"revision": revision})
        return
    say(revision or "no revision (an empty database: mpcoa db upgrade)")


@token_app.command("create")
def token_create(
    name: str = typer.Argument(..., help="who or what the token is for"),
    scope: Literal["write", "read"] = typer.Option(
        "write", help="'write' (reads and writes) or 'read' (reads only)"),
    expires_days: float | None = typer.Option(
        None, min=0.001, max=MAX_TOKEN_DAYS, help="expires after this many days"),
    as_json: bool = typer.Option(False, "--json", help="print JSON"),
) -> None:
    """Create a token and print it once; only its SHA-256 is stored."""
    from datetime import timedelta

    from models import utcnow
    from service import db
    from service.errors import Conflict, Invalid
    from service.store import tokens

    expires_at = utcnow() + timedelta(days=expires_days) if expires_days else None

    settings = _settings()
    if settings.auto_migrate:
        db.upgrade(settings.effective_database_url)
    try:
        with db.session_scope(db.get_engine(settings)) as session:
            value = tokens.create_token(session, name=name, scope=scope, expires_at=expires_at)
    except (Conflict, Invalid) as exc:
        service_failure(exc)
    if as_json:
        emit_json({"name": name, "scope": scope, "token": value,
                   "expires_at": expires_at.isoformat() if expires_at else None})
        return
    typer.echo(value, file=result_stream())  # shown once: -q must not swallow it


@token_app.command("list")
def token_list(as_json: bool = typer.Option(False, "--json", help="print JSON")) -> None:
    """Token names, creation and last use (never the tokens)."""
    from service import db
    from service.store import tokens

    with db.session_scope(db.get_engine(_settings())) as session:
        rows = tokens.list_tokens(session)
        if as_json:
            emit_json([{"name": r.name, "scope": r.scope, "revoked": r.revoked,
                        "created_at": r.created_at, "last_used_at": r.last_used_at,
                        "expires_at": r.expires_at} for r in rows])
            return
        if not rows:
            say("no tokens (create one: mpcoa token create NAME)")
            return
        listed = table("name", "state", "scope", "created", "last used", "expires")
        for row in rows:
            listed.add_row(row.name, "revoked" if row.revoked else "active", row.scope,
                           never(row.created_at), never(row.last_used_at),
                           never(row.expires_at))
        show(listed)


@token_app.command("revoke")
def token_revoke(name: str,
                 as_json: bool = typer.Option(False, "--json", help="print JSON")) -> None:
    """Revoke the token called NAME."""
    from service import db
    from service.errors import NotFound
    from service.store import tokens

    try:
        with db.session_scope(db.get_engine(_settings())) as session:
            tokens.revoke_token(session, name=name)
    except NotFound as exc:
        fail(exc.message, EXIT_NOT_FOUND)
    if as_json:
        emit_json({"name": name, "revoked": True})
        return
    say(f"revoked {name}")


def register(app: typer.Typer) -> None:
    app.command("serve")(serve)
    app.add_typer(db_app, name="db")
    app.add_typer(token_app, name="token")

"""`mpcoa export CAMPAIGN_ID -o FILE` and `mpcoa import FILE`: a campaign as one file and back."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from sqlalchemy.exc import DBAPIError

from cli.algorithm import fail
from service.db import session_scope, upgrade
from service.errors import ServiceError
from service.settings import get_settings

MAX_BUNDLE_BYTES = 2 * 1024**3


def database_problem(exc: DBAPIError) -> str:
    """One line for a database that cannot be read: unreachable, or not migrated."""
    first = str(exc.orig or exc).strip().splitlines()[0][:200]
    return f"database: {first} (is it reachable, and migrated: `mpcoa db upgrade`?)"


def ready_database() -> None:
    """The embedded SQLite file is migrated on first use, as every command does."""
    settings = get_settings()
    if settings.is_embedded:
        upgrade(settings.effective_database_url)


def export(
    campaign_id: Annotated[int, typer.Argument(min=1, help="campaign id")],
    output: Annotated[Path, typer.Option("-o", "--output", help="the bundle to write (.tar.gz)",
                                         dir_okay=False)],
) -> None:
    """Write a campaign's bundle: metadata, every measurement with its evidence and raw outputs,
    the derived Ω, selection, fits and answer (docs/formats.md)."""
    import shutil

    from service.flows.bundle_export import spooled_bundle

    ready_database()
    try:
        with session_scope() as s:
            spool = spooled_bundle(s, campaign_id=campaign_id)
    except ServiceError as exc:
        fail(exc.message)
    except DBAPIError as exc:
        fail(database_problem(exc))
    with spool:
        try:
            with output.open("wb") as f:
                shutil.copyfileobj(spool, f)
                size = f.tell()
        except OSError as exc:
            fail(f"{output}: {exc.strerror or exc}")
    typer.echo(f"campaign {campaign_id}: {output} ({size} bytes)")


def import_(
    path: Annotated[Path, typer.Argument(help="a bundle written by `mpcoa export`",
                                         dir_okay=False)],
) -> None:
    """Load a bundle into this database as a new campaign (new ids, provenance kept), then solve
    it again and say whether that gives the bundle's answer."""
    from service.flows.bundle_import import import_bundle, rederive, same_answer
    from service.store import recommendations

    try:
        if path.stat().st_size > MAX_BUNDLE_BYTES:
            fail(f"{path}: larger than {MAX_BUNDLE_BYTES} bytes")
        data = path.read_bytes()
    except OSError as exc:
        fail(f"{path}: {exc.strerror or exc}")
    ready_database()
    try:
        with session_scope() as s:
            done = import_bundle(s, data)
    except ServiceError as exc:
        where = ".".join(str(p) for p in exc.loc)
        fail(f"{path}: {where + ': ' if where else ''}{exc.message}")
    except DBAPIError as exc:
        fail(database_problem(exc))
    typer.echo(f"imported as campaign {done.campaign_id} of topology {done.topology_id}: "
               f"{done.measurements} measurements, {done.artifacts} raw outputs")
    if done.recommendation_id is None:
        return
    with session_scope() as s:
        solved = rederive(s, campaign_id=done.campaign_id)
        answer = recommendations.get_recommendation(s, recommendation_id=done.recommendation_id)
        same = same_answer(solved, answer)
        sol = solved.solution
        got = (f"OPM={sol.opm} OCC={sol.occ} OBS={sol.obs_mib:.6g} MiB OTP={sol.otp_mbps:.6g} "
               "Mbit/s" if sol else f"no solution ({solved.error})")
    verdict = "the bundle's answer" if same else "DIFFERS from the bundle's answer"
    typer.echo(f"re-derived: {got}: {verdict}")
    if not same:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.command("export")(export)
    app.command("import")(import_)

"""`mpcoa export CAMPAIGN_ID -o FILE` and `mpcoa import FILE`: a campaign as one file and back."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from sqlalchemy.exc import DBAPIError

from api.schemas import MAX_ID
from cli.errors import emit_json, fail, service_failure, unavailable
from service.db import session_scope, upgrade
from service.errors import ServiceError
from service.settings import get_settings

MAX_BUNDLE_BYTES = 2 * 1024**3


def ready_database() -> None:
    """The embedded SQLite file is migrated on first use, as every command does."""
    settings = get_settings()
    if settings.is_embedded:
        upgrade(settings.effective_database_url)


def read_bundle_file(path: Path) -> bytes:
    """A bundle file's bytes, or one line saying why it cannot be read."""
    try:
        if path.stat().st_size > MAX_BUNDLE_BYTES:
            fail(f"{path}: larger than {MAX_BUNDLE_BYTES} bytes")
        return path.read_bytes()
    except IsADirectoryError:
        fail(f"{path}: is a directory")
    except OSError as exc:
        fail(f"{path}: {exc.strerror or exc}")


def export(
    campaign_id: Annotated[int, typer.Argument(min=1, max=MAX_ID, help="campaign id")],
    output: Annotated[Path, typer.Option("-o", "--output", help="the bundle to write (.tar.gz)",
                                         dir_okay=False)],
    as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
) -> None:
    """Write a campaign's bundle: metadata, every measurement with its evidence and raw outputs,
    the derived Ω, selection, fits and answer (docs/formats.md)."""
    import shutil

    from service.flows.takeaways.bundle_export import spooled_bundle

    ready_database()
    try:
        with session_scope() as s:
            spool = spooled_bundle(s, campaign_id=campaign_id)
    except ServiceError as exc:
        service_failure(exc)
    except DBAPIError as exc:
        unavailable(exc)
    with spool:
        try:
            with output.open("wb") as f:
                shutil.copyfileobj(spool, f)
                size = f.tell()
        except OSError as exc:
            fail(f"{output}: {exc.strerror or exc}")
    if as_json:
        emit_json({"campaign_id": campaign_id, "path": str(output), "bytes": size})
        return
    typer.echo(f"campaign {campaign_id}: {output} ({size} bytes)")


def import_(
    path: Annotated[Path, typer.Argument(help="a bundle written by `mpcoa export`",
                                         dir_okay=False)],
    as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
) -> None:
    """Load a bundle into this database as a new campaign (new ids, provenance kept), answer it
    again as a finished campaign is answered, and say whether that gives the bundle's answer.
    The answer stored is the one derived here; exit 1 when the bundle's answer differs (it is
    kept only as the stored answer's provenance), 2 for a file that is not a valid bundle."""
    from service.flows.takeaways.bundle_import import import_bundle
    from service.store import recommendations

    data = read_bundle_file(path)
    ready_database()
    try:
        with session_scope() as s:  # one transaction: a refused bundle leaves no row behind
            done = import_bundle(s, data)
            answer = (recommendations.get_recommendation(
                s, recommendation_id=done.recommendation_id)
                if done.recommendation_id is not None else None)
            got = (f"OPM={answer.opm} OCC={answer.occ} OBS={_g(answer.obs_mib)} MiB "
                   f"OTP={_g(answer.otp_mbps)} Mbit/s" if answer else
                   f"no answer ({'; '.join(done.no_answer) or 'the data gives none'})")
    except ServiceError as exc:
        where = ".".join(str(p) for p in exc.loc)
        service_failure(exc, f"{path}: {where + ': ' if where else ''}")
    except DBAPIError as exc:
        unavailable(exc)
    if as_json:
        emit_json({"campaign_id": done.campaign_id, "topology_id": done.topology_id,
                   "measurements": done.measurements, "artifacts": done.artifacts,
                   "recommendation_id": done.recommendation_id, "answer": got,
                   "bundle_answer": done.bundle_answer, "differs": done.differs or {}})
        raise typer.Exit(1 if done.differs else 0)
    typer.echo(f"imported as campaign {done.campaign_id} of topology {done.topology_id}: "
               f"{done.measurements} measurements, {done.artifacts} raw outputs")
    if done.bundle_answer is None:
        return
    if not done.differs:
        typer.echo(f"re-derived: {got}: the bundle's answer")
        return
    typer.echo(f"re-derived: {got}: DIFFERS from the bundle's answer, which is kept only as "
               "provenance:")
    for name, both in done.differs.items():
        typer.echo(f"  {name}: bundle {both['bundle']!r}, re-derived {both['rederived']!r}")
    raise typer.Exit(1)


def _g(value: float | None) -> str:
    return "-" if value is None else f"{value:.6g}"


def register(app: typer.Typer) -> None:
    app.command("export")(export)
    app.command("import")(import_)

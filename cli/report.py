"""`mpcoa report CAMPAIGN_ID -o report.pdf [--png DIR]`: a campaign's figures, summary and
settings (service/flows/takeaways/report.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from sqlalchemy.exc import DBAPIError

from api.schemas import MAX_ID
from cli.bundle import ready_database
from cli.errors import emit_json, fail, service_failure, unavailable
from service.db import session_scope
from service.errors import ServiceError


def report(
    campaign_id: Annotated[int, typer.Argument(min=1, max=MAX_ID, help="campaign id")],
    output: Annotated[Path, typer.Option("-o", "--output", help="the PDF to write",
                                         dir_okay=False)],
    png: Annotated[Path | None, typer.Option(
        "--png", help="also write each page as DIR/report-N.png", file_okay=False)] = None,
    dpi: Annotated[int, typer.Option(min=50, max=300, help="PNG resolution")] = 100,
    as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
) -> None:
    """The paper's figures for one campaign (Ω with intervals, the selection path, every arm's
    fit with its points and the δ band, T*, OBS, Eq. 1's B, the promise and what probes
    measured), a summary table and the settings, as a PDF (and PNG pages)."""
    from service.flows.takeaways.report import render_pdf, render_pngs
    from service.flows.takeaways.report_data import report_data

    ready_database()
    try:
        with session_scope() as s:
            data = report_data(s, campaign_id=campaign_id)
            pdf = render_pdf(data)
            pngs = render_pngs(data, dpi=dpi) if png is not None else []
    except ServiceError as exc:
        service_failure(exc)
    except DBAPIError as exc:
        unavailable(exc)
    try:
        output.write_bytes(pdf)
        if png is not None:
            png.mkdir(parents=True, exist_ok=True)
            for k, page in enumerate(pngs, start=1):
                (png / f"report-{k}.png").write_bytes(page)
    except OSError as exc:
        fail(f"{exc.filename}: {exc.strerror or exc}")
    if as_json:
        emit_json({"campaign_id": campaign_id, "pdf": str(output),
                   "pngs": [str(png / f"report-{k}.png") for k in range(1, len(pngs) + 1)]
                   if png is not None else []})
        return
    typer.echo(f"campaign {campaign_id}: {output}"
               + (f" and {len(pngs)} pages in {png}/" if png is not None else ""))


def register(app: typer.Typer) -> None:
    app.command("report")(report)

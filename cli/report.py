"""`mpcoa report CAMPAIGN_ID|BUNDLE [-o report.pdf] [--png DIR]`: a campaign's figures, summary
and settings (service/flows/takeaways/report.py), from the database or straight from a bundle
file; `mpcoa show BUNDLE`: what a bundle file holds, as text or JSON. A bundle is read with no
database (service/flows/takeaways/bundle_file.py)."""

from __future__ import annotations

import re
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import typer
from sqlalchemy.exc import DBAPIError

from api.schemas import MAX_ID
from cli.bundle import read_bundle_file, ready_database
from cli.errors import emit_json, fail, service_failure, unavailable
from cli.output import JsonOpt, console, table
from cli.output import show as show_table
from service.db import session_scope
from service.errors import ServiceError

TargetArg = Annotated[str, typer.Argument(
    metavar="CAMPAIGN_ID|BUNDLE",
    help="a stored campaign's id, or a bundle file (`mpcoa export`), read with no database")]
BundleArg = Annotated[Path, typer.Argument(
    metavar="BUNDLE", help="a bundle file written by `mpcoa export` (or GET .../bundle)")]


def target_of(text: str) -> int | Path:
    """A file that exists is a bundle; otherwise the text must be a campaign id."""
    path = Path(text)
    if path.exists():
        return path
    if re.fullmatch(r"[0-9]{1,12}", text):
        number = int(text)
        if 1 <= number <= MAX_ID:
            return number
        fail(f"campaign id {text}: not in 1..{MAX_ID}")
    fail(f"{text}: no such file, and not a campaign id")


def _default_output(target: int | Path) -> Path:
    if isinstance(target, int):
        return Path(f"campaign-{target}.pdf")
    name = target.name
    for suffix in (".tar.gz", ".tgz", ".gz"):
        name = name.removesuffix(suffix)
    return Path(name + ".pdf")


@contextmanager
def _bundle(path: Path):
    """The bundle loaded into a database of its own; a file that is not a valid bundle is one
    line naming the field, as `mpcoa import` says it."""
    from service.flows.takeaways.bundle_file import opened_bundle

    data = read_bundle_file(path)
    try:
        with opened_bundle(data) as opened:
            yield opened
    except ServiceError as exc:
        where = ".".join(str(p) for p in exc.loc)
        service_failure(exc, f"{path}: {where + ': ' if where else ''}")


def report(
    target: TargetArg,
    output: Annotated[Path | None, typer.Option(
        "-o", "--output", help="the PDF to write (default: campaign-ID.pdf, or the bundle's "
        "name with .pdf)", dir_okay=False)] = None,
    png: Annotated[Path | None, typer.Option(
        "--png", help="also write each page as DIR/report-N.png", file_okay=False)] = None,
    dpi: Annotated[int, typer.Option(min=50, max=300, help="PNG resolution")] = 100,
    as_json: JsonOpt = False,
) -> None:
    """The paper's figures for one campaign (Ω with intervals, the selection path, every arm's
    fit with its points and the δ band, T*, OBS, Eq. 1's B, the promise and what probes
    measured), a summary table and the settings, as a PDF (and PNG pages); from the database,
    or from a bundle file with no database."""
    from service.flows.takeaways.report import render_pdf, render_pngs
    from service.flows.takeaways.report_data import report_data

    where = target_of(target)
    output = output or _default_output(where)
    if isinstance(where, Path):
        from service.flows.takeaways.bundle_file import report_of

        with _bundle(where) as opened:
            data = report_of(opened, where.name)
            pdf = render_pdf(data)
            pngs = render_pngs(data, dpi=dpi) if png is not None else []
    else:
        ready_database()
        try:
            with session_scope() as s:
                data = report_data(s, campaign_id=where)
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
    what = f"campaign {where}" if isinstance(where, int) else f"bundle {where}"
    if as_json:
        emit_json({"campaign_id": where if isinstance(where, int) else None,
                   "bundle": None if isinstance(where, int) else str(where),
                   "pdf": str(output),
                   "pngs": [str(png / f"report-{k}.png") for k in range(1, len(pngs) + 1)]
                   if png is not None else []})
        return
    console().print(f"{what}: {output}"
                    + (f" and {len(pngs)} pages in {png}/" if png is not None else ""),
                    markup=False, highlight=False)


def show(bundle: BundleArg, as_json: JsonOpt = False) -> None:
    """What a bundle file holds, read with no database: its source, topology, plan, probes by
    phase, and its answer against the one derived again here."""
    from service.flows.takeaways.bundle_file import summary

    if not bundle.exists():
        fail(f"{bundle}: no such file")
    with _bundle(bundle) as opened:
        doc = summary(opened)
    if as_json:
        emit_json(doc)
        return
    _print_summary(bundle, doc)


def _g(value) -> str:
    return "-" if value is None else f"{value:.6g}" if isinstance(value, float) else str(value)


def _print_summary(path: Path, doc: dict) -> None:
    out = console()
    src, t, c = doc["source"], doc["topology"], doc["campaign"]
    out.print(f"[bold]{path}[/]: campaign {src.get('campaign_id', '?')} of "
              f"{t['local']} -> {t['remote']} (subflows {', '.join(t['subflows'])})")
    out.print(f"exported {src.get('exported_at', 'at an unknown time')} from a "
              f"{src.get('database', 'unknown')} database, bundle version "
              f"{src.get('bundle_version', '?')}", markup=False, highlight=False)
    out.print(f"plan: {c['mode']}, {c['state']}; CCs {', '.join(c['ccs'])}; "
              f"{len(c['buffer_grid_mib'])} buffers; {c['runs']} runs x {_g(c['duration_s'])} s;"
              f" δ {_g(c['delta'])}", markup=False, highlight=False)
    probes = table("phase", "ok", "failed", "other", title=f"{doc['measurements']} probes, "
                   f"{doc['artifacts']} raw outputs")
    for phase, by in sorted(doc["probes"].items()):
        other = sum(n for s, n in by.items() if s not in ("ok", "failed"))
        probes.add_row(phase, str(by.get("ok", 0)), str(by.get("failed", 0)), str(other))
    show_table(probes)
    answers = table("", "OPM", "OCC", "OBS MiB", "OTP Mbit/s", "T* Mbit/s",
                    title="answer")
    for name, a in (("derived here", doc["answer"]), ("the bundle's", doc["bundle_answer"])):
        if a:
            answers.add_row(name, str(a["opm"]), str(a["occ"]), _g(a["obs_mib"]),
                            _g(a["otp_mbps"]), _g(a["tp_max_mbps"]))
    if doc["answer"] or doc["bundle_answer"]:
        show_table(answers)
    if doc["answer"] is None:
        out.print("no answer derived: " + ("; ".join(doc["no_answer"]) or "the data gives none"),
                  markup=False, highlight=False)
    if doc["differs"]:
        out.print("the answer derived here DIFFERS from the bundle's: "
                  + ", ".join(doc["differs"]), markup=False, highlight=False)
    elif doc["answer"] and doc["bundle_answer"]:
        out.print("the answer derived here is the bundle's")


def register(app: typer.Typer) -> None:
    app.command("report")(report)
    app.command("show")(show)

"""`mpcoa site add|list` and `mpcoa topology add FILE|list`: the inventory without curl.

They work on the configured database as `POST /sites` and `POST /topologies` do (the same
validation, the same rows); `--json` prints what the API's GET gives for them."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from pydantic import ValidationError

from api.schemas import MAX_ID, InlineTopology, SiteIn, SiteOut, TopologyIn, TopologyOut
from cli.bundle import ready_database
from cli.errors import emit_json, fail, service_failure, validation_message
from cli.output import JsonOpt, say, show, table
from service.db import session_scope
from service.errors import ServiceError

site_app = typer.Typer(help="Sites and their ISPs (Table 1).", no_args_is_help=True)
topology_app = typer.Typer(help="Sender/receiver site pairs and their subflows.",
                           no_args_is_help=True)

MAX_FILE_BYTES = 1024 * 1024
LimitOpt = Annotated[int, typer.Option(min=1, max=500, help="how many, at most")]
OffsetOpt = Annotated[int, typer.Option(min=0, max=MAX_ID, help="how many to skip")]


def parse_isp(text: str) -> dict:
    """`LABEL:DOWN_KBPS:UP_KBPS[:NAME][@ADDRESS]` as the API's ISP object (NAME defaults to
    LABEL; ADDRESS, IPv4 or IPv6, is checked by the API's model)."""
    spec, at, address = text.partition("@")
    parts = spec.split(":", 3)
    if len(parts) < 3:
        raise ValueError(f"--isp {text!r}: give LABEL:DOWN_KBPS:UP_KBPS[:NAME], e.g. "
                         "K:100000:40000:Kabelnett")
    label, down, up = parts[:3]
    rates = []
    for what, value in (("DOWN_KBPS", down), ("UP_KBPS", up)):
        try:
            rates.append(float(value))
        except ValueError:
            raise ValueError(f"--isp {text!r}: {what} {value!r} is not a number") from None
    return {"label": label, "name": parts[3] if len(parts) == 4 else label,
            "down_kbps": rates[0], "up_kbps": rates[1], **({"address": address} if at else {})}


def _isps(site: SiteOut) -> str:
    return ", ".join(f"{i.label}={i.name} {i.down_kbps:g}/{i.up_kbps:g} kbit/s"
                     + (f" @{i.address}" if i.address else "") for i in site.isps)


def _subflows(t: TopologyOut) -> str:
    return " ".join(s.name + (f"({s.rtt_ms:g} ms)" if s.rtt_ms is not None else "")
                    for s in t.subflows)


@site_app.command("add")
def site_add(
    name: Annotated[str, typer.Argument(help="the site's name, e.g. SRL")],
    isp: Annotated[list[str], typer.Option(
        "--isp", help="an ISP: LABEL:DOWN_KBPS:UP_KBPS[:NAME]\\[@ADDRESS] (repeat; ADDRESS "
        "IPv4 or IPv6), e.g. K:100000:40000:Kabelnett@2001:db8::2")],
    description: Annotated[str, typer.Option(help="free text")] = "",
    as_json: JsonOpt = False,
) -> None:
    """Register a site and its ISPs (as `POST /sites`)."""
    from service.store import inventory

    try:
        body = SiteIn.model_validate({"name": name, "isps": [parse_isp(i) for i in isp],
                                      "description": description})
    except ValidationError as exc:
        fail(validation_message(exc))
    except ValueError as exc:
        fail(str(exc))
    ready_database()
    try:
        with session_scope() as s:
            out = SiteOut.model_validate(
                inventory.create_site(s, spec=body.spec(), description=body.description))
    except ServiceError as exc:
        service_failure(exc)
    if as_json:
        emit_json(out.model_dump(mode="json"))
        return
    say(f"site {out.id} {out.name} added: {_isps(out)}")


@site_app.command("list")
def site_list(limit: LimitOpt = 100, offset: OffsetOpt = 0, as_json: JsonOpt = False) -> None:
    """The stored sites (as `GET /sites`): id, name, ISPs."""
    from service.store import inventory

    ready_database()
    with session_scope() as s:
        rows, total = inventory.list_sites(s, limit=limit, offset=offset)
        items = [SiteOut.model_validate(r) for r in rows]
    if as_json:
        emit_json({"items": [i.model_dump(mode="json") for i in items], "total": total,
                   "limit": limit, "offset": offset})
        return
    if not items:
        say("no sites (add one: mpcoa site add NAME --isp LABEL:DOWN:UP)")
        return
    rows = table("id", "name", "ISPs (label=name down/up)", "description",
                 title=_page("sites", len(items), total, offset))
    for site in items:
        rows.add_row(str(site.id), site.name, _isps(site), site.description or "")
    show(rows)


def _page(what: str, shown: int, total: int, offset: int) -> str | None:
    """A title only when the page is not everything: which ones of how many."""
    if shown == total:
        return None
    return f"{what} {offset + 1}-{offset + shown} of {total}"


def _read_document(path: Path) -> dict:
    from probes import documents

    try:
        doc = documents.load(path, MAX_FILE_BYTES)
    except documents.DocumentError as exc:
        fail(str(exc))
    if not isinstance(doc, dict):
        fail(f"{path}: expected an object with local and remote (sites) or local_site_id and "
             "remote_site_id")
    return doc


@topology_app.command("add")
def topology_add(
    file: Annotated[Path, typer.Argument(
        help="YAML or JSON: {local: SITE, remote: SITE, rtts_ms: {...}} (sites stored on the "
        "way, as in POST /recommendations) or {local_site_id, remote_site_id, rtts_ms} (as "
        "POST /topologies)", dir_okay=False)],
    as_json: JsonOpt = False,
) -> None:
    """Register a topology (a sender and a receiver site) from a file."""
    from api.routers.inventory import topology_out
    from service.store import inventory

    doc = _read_document(file)
    inline = "local" in doc or "remote" in doc
    try:
        body = (InlineTopology if inline else TopologyIn).model_validate(doc)
    except ValidationError as exc:
        fail(f"{file}: {validation_message(exc)}")
    ready_database()
    try:
        with session_scope() as s:
            if inline:
                local = inventory.find_site(s, body.local.name)
                remote = inventory.find_site(s, body.remote.name)
                if local is not None and remote is not None:
                    existing = inventory.find_topology(s, local_site_id=local.id,
                                                       remote_site_id=remote.id)
                    if existing is not None:
                        fail(f"{file}: topology {local.name} -> {remote.name} exists (id "
                             f"{existing.id})")
                row = inventory.ensure_topology(s, spec=body.spec(), rtts_ms=body.rtts_ms,
                                                loc=())
            else:
                row = inventory.create_topology(s, local_site_id=body.local_site_id,
                                                remote_site_id=body.remote_site_id,
                                                rtts_ms=body.rtts_ms)
            out = topology_out(row)
    except ServiceError as exc:
        service_failure(exc, f"{file}: ")
    if as_json:
        emit_json(out.model_dump(mode="json"))
        return
    say(f"topology {out.id} added: {out.local_site.name} -> {out.remote_site.name} "
        f"{_subflows(out)}")


@topology_app.command("list")
def topology_list(limit: LimitOpt = 100, offset: OffsetOpt = 0, as_json: JsonOpt = False) -> None:
    """The stored topologies (as `GET /topologies`): id, sites, subflows with their RTTs."""
    from api.routers.inventory import topology_out
    from service.store import inventory

    ready_database()
    with session_scope() as s:
        rows, total = inventory.list_topologies(s, limit=limit, offset=offset)
        items = [topology_out(r) for r in rows]
    if as_json:
        emit_json({"items": [i.model_dump(mode="json") for i in items], "total": total,
                   "limit": limit, "offset": offset})
        return
    if not items:
        say("no topologies (add one: mpcoa topology add FILE)")
        return
    rows = table("id", "sender -> receiver", "subflows (RTT)",
                 title=_page("topologies", len(items), total, offset))
    for t in items:
        rows.add_row(str(t.id), f"{t.local_site.name} -> {t.remote_site.name}", _subflows(t))
    show(rows)

"""A campaign as one file to take home: `export_bundle` (docs/formats.md, "Campaign bundle")."""

from __future__ import annotations

import io
import json
import platform
import tempfile
from typing import Any, BinaryIO

from sqlalchemy.orm import Session

from models import Campaign, Topology, utcnow

from ...state import state_of
from ...state.selected import selection_note
from ...store import artifacts as artifact_store
from ...store import bundle_rows as rows
from ...store import campaigns as campaign_store
from ...store import inventory, measurements, results
from ...store import recommendations as recommendation_store
from . import bundle_archive as archive
from . import measurement_table

# A bundle is built in a temporary file: in memory up to this size, on disk beyond it.
SPOOL_BYTES = 8 * 2**20


def export_bundle(session: Session, *, campaign_id: int) -> bytes:
    """The campaign's bundle (.tar.gz bytes); NotFound for an unknown campaign."""
    buf = io.BytesIO()
    write_bundle(session, campaign_id=campaign_id, fileobj=buf)
    return buf.getvalue()


def spooled_bundle(session: Session, *, campaign_id: int) -> BinaryIO:
    """The campaign's bundle in a temporary file, at its start: memory stays bounded however
    many raw outputs the campaign holds (the caller closes it; NotFound before anything is
    written for an unknown campaign)."""
    spool = tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES)  # noqa: SIM115 -- the caller's
    try:
        write_bundle(session, campaign_id=campaign_id, fileobj=spool)
        spool.seek(0)
    except BaseException:
        spool.close()
        raise
    return spool


def write_bundle(session: Session, *, campaign_id: int, fileobj: BinaryIO) -> None:
    """Write the bundle into `fileobj`, reading each raw output from the database only when its
    turn comes (the rows, the tables and one raw output are in memory at once)."""
    document, tables, listed = _contents(session, campaign_id=campaign_id)
    archive.write_to(fileobj, document, tables, (
        (k, name, artifact_store.get_artifact(session, measurement_id=mid, name=name)[1])
        for k, mid, name in listed))


def build_bundle(session: Session, *, campaign_id: int) -> archive.Bundle:
    """The bundle with every raw output in memory (`export_bundle`'s contents, to inspect)."""
    document, tables, listed = _contents(session, campaign_id=campaign_id)
    artifacts: dict[int, dict[str, bytes]] = {}
    for k, mid, name in listed:
        artifacts.setdefault(k, {})[name] = artifact_store.get_artifact(
            session, measurement_id=mid, name=name)[1]
    return archive.Bundle(document=document, artifacts=artifacts, tables=tables)


def _contents(session: Session, *, campaign_id: int):
    """The document, the tables, and the raw outputs to add: (index in the document,
    measurement id, name), in the archive's order."""
    campaign = campaign_store.get_campaign(session, campaign_id=campaign_id)
    topology = inventory.get_topology(session, topology_id=campaign.topology_id)
    measured = measurements.list_runs(session, campaign_id=campaign.id,
                                      phases=measurement_table.PHASES)
    index_of = {m.id: k for k, m in enumerate(measured)}
    to_add: list[tuple[int, int, str]] = []
    listed: dict[int, list[dict[str, Any]]] = {}
    for a in rows.artifact_rows(session, measurement_ids=list(index_of)):
        k = index_of[a.measurement_id]
        to_add.append((k, a.measurement_id, a.name))
        listed.setdefault(k, []).append(
            {"name": a.name, "media_type": a.media_type, "size": a.size,
             "path": f"artifacts/{k}/{a.name}"})
    answer = (
        recommendation_store.get_recommendation(
            session, recommendation_id=campaign.recommendation_id)
        if campaign.recommendation_id is not None else None
    )
    document = {
        "format": archive.FORMAT,
        "version": archive.VERSION,
        "exported_at": utcnow().isoformat(),
        "exported_by": {"mpcoa": _version(), "python": platform.python_version()},
        "source": {"campaign_id": campaign.id, "topology_id": topology.id,
                   "recommendation_id": campaign.recommendation_id,
                   "database": session.get_bind().dialect.name,
                   **_earlier_provenance(campaign)},
        "topology": topology_document(topology),
        "capabilities": _capabilities(session, campaign, topology),
        "software": software(measured),
        "campaign": rows.to_json(campaign),
        "measurements": [
            {"source_id": m.id, **rows.to_json(m), "artifacts": listed.get(k, [])}
            for k, m in enumerate(measured)
        ],
        "impact_factors": [rows.to_json(r) for r in rows.impact_rows(
            session, campaign_id=campaign.id)],
        "selection": selection_note(campaign),
        "fits": [rows.to_json(r) for r in results.list_fits(session, campaign_id=campaign.id)],
        "answer": rows.to_json(answer) if answer is not None else None,
        "events": [rows.to_json(e) for e in rows.event_rows(session, campaign_id=campaign.id)],
    }
    table = measurement_table.table_rows(measured)
    tables = {"measurements.csv": measurement_table.to_csv(table),
              "measurements.parquet": measurement_table.to_parquet(table)}
    return document, tables, sorted(to_add)


def topology_document(topology: Topology) -> dict[str, Any]:
    def site(s) -> dict[str, Any]:
        return {"name": s.name, "description": s.description,
                "isps": [{"name": i.name, "label": i.label, "down_kbps": i.down_kbps,
                          "up_kbps": i.up_kbps} for i in s.isps]}

    return {
        "local": site(topology.local_site),
        "remote": site(topology.remote_site),
        "subflows": [{"name": sf.name, "bandwidth_kbps": sf.bandwidth_kbps, "rtt_ms": sf.rtt_ms}
                     for sf in topology.subflows],
    }


def _capabilities(session: Session, campaign: Campaign, topology: Topology) -> dict[str, Any]:
    """Each site's capability report: the one an import brought along (kept in the campaign's
    state), else the site's latest."""
    origin = state_of(campaign).imported
    if origin is not None and origin.capabilities is not None:
        return dict(origin.capabilities)
    out = {}
    for site in (topology.local_site, topology.remote_site):
        row = artifact_store.capabilities_or_none(session, site_id=site.id)
        if row is not None:
            out[site.name] = {"report": row.report, "reported_at": row.reported_at.isoformat()}
    return out


def software(measured) -> dict[str, Any]:
    """The probe tools and kernels the measurements name (each probe stores the tool's version and
    the kernel it ran on in its raw output)."""
    tools: dict[str, set[str]] = {}
    kernels: list[dict[str, Any]] = []
    for m in measured:
        if m.tool and m.tool != "none":
            tools.setdefault(m.tool, set()).add(m.tool_version)
        kernel = _kernel(m.raw_output)
        if kernel and kernel not in kernels:
            kernels.append(kernel)
    return {"tools": {t: sorted(v) for t, v in sorted(tools.items())}, "kernels": kernels}


def _kernel(raw_output: str) -> dict[str, Any] | None:
    try:
        raw = json.loads(raw_output) if raw_output else None
    except ValueError:
        return None
    kernel = raw.get("kernel") if isinstance(raw, dict) else None
    return kernel if isinstance(kernel, dict) and kernel else None


def _earlier_provenance(campaign: Campaign) -> dict[str, Any]:
    """A campaign that was itself imported says where it came from first."""
    origin = state_of(campaign).imported
    return {} if origin is None else {"imported_from": dict(origin.source)}


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("mpcoa")
    except PackageNotFoundError:
        return "unknown"

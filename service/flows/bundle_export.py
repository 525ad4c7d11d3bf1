"""A campaign as one file to take home: `export_bundle` (docs/formats.md, "Campaign bundle")."""

from __future__ import annotations

import json
import platform
from typing import Any

from sqlalchemy.orm import Session

from models import Campaign, Topology, utcnow

from ..store import artifacts as artifact_store
from ..store import bundle_rows as rows
from ..store import campaigns as campaign_store
from ..store import inventory, measurements, results
from ..store import recommendations as recommendation_store
from . import bundle_archive as archive
from . import measurement_table
from .selected import selection_note


def export_bundle(session: Session, *, campaign_id: int) -> bytes:
    """The campaign's bundle (.tar.gz bytes); NotFound for an unknown campaign."""
    return archive.write(build_bundle(session, campaign_id=campaign_id))


def build_bundle(session: Session, *, campaign_id: int) -> archive.Bundle:
    campaign = campaign_store.get_campaign(session, campaign_id=campaign_id)
    topology = inventory.get_topology(session, topology_id=campaign.topology_id)
    measured = measurements.list_runs(session, campaign_id=campaign.id,
                                      phases=measurement_table.PHASES)
    index_of = {m.id: k for k, m in enumerate(measured)}
    artifacts: dict[int, dict[str, bytes]] = {}
    listed: dict[int, list[dict[str, Any]]] = {}
    for a in rows.artifact_rows(session, measurement_ids=list(index_of)):
        _media, data = artifact_store.get_artifact(
            session, measurement_id=a.measurement_id, name=a.name)
        k = index_of[a.measurement_id]
        artifacts.setdefault(k, {})[a.name] = data
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
    return archive.Bundle(
        document=document,
        artifacts=artifacts,
        tables={"measurements.csv": measurement_table.to_csv(table),
                "measurements.parquet": measurement_table.to_parquet(table)},
    )


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
    notes), else the site's latest."""
    imported = ((campaign.notes or {}).get("imported") or {}).get("capabilities")
    if imported is not None:
        return imported
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
    imported = (campaign.notes or {}).get("imported")
    return {"imported_from": imported.get("from")} if imported else {}


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("mpcoa")
    except PackageNotFoundError:
        return "unknown"

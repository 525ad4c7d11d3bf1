"""Raw probe outputs stored with their measurement (gzip), and sites' capability reports."""

from __future__ import annotations

import gzip
import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from models import Measurement, MeasurementArtifact, Site, SiteCapabilities, utcnow
from probes.base import ARTIFACT_NAME_PATTERN, MAX_ARTIFACT_BYTES

from ..errors import Invalid, NotFound

#: Media types by suffix; .bz2 files (NetPerfMeter's compressed results) stay as written.
_MEDIA = (
    (".json", "application/json"),
    (".bz2", "application/x-bzip2"),
    (".vec", "text/plain"),
    (".sca", "text/plain"),
    (".config", "text/plain"),
    (".txt", "text/plain"),
    (".log", "text/plain"),
)


def media_type(name: str) -> str:
    for suffix, mt in _MEDIA:
        if name.endswith(suffix):
            return mt
    return "application/octet-stream"


def store_artifacts(
    session: Session, *, measurement_id: int, artifacts: Mapping[str, bytes]
) -> list[MeasurementArtifact]:
    """Store a measurement's raw outputs; a name already stored for it is kept as it is (a
    re-executed task neither duplicates nor replaces what the first run stored)."""
    if session.get(Measurement, measurement_id) is None:
        raise NotFound(f"measurement {measurement_id} not found")
    have = set(session.scalars(select(MeasurementArtifact.name).where(
        MeasurementArtifact.measurement_id == measurement_id)))
    rows = []
    for name, data in artifacts.items():
        if not re.fullmatch(ARTIFACT_NAME_PATTERN, name):
            raise Invalid(f"artifact name {name!r}: not a plain file name", ("name",))
        if len(data) > MAX_ARTIFACT_BYTES:
            raise Invalid(f"artifact {name!r}: {len(data)} bytes, over {MAX_ARTIFACT_BYTES}",
                          ("artifacts",))
        if name in have:
            continue
        row = MeasurementArtifact(measurement_id=measurement_id, name=name,
                                  media_type=media_type(name), size=len(data),
                                  gzip_data=gzip.compress(data, mtime=0))
        session.add(row)
        rows.append(row)
    session.flush()
    return rows


def list_artifacts(session: Session, *, measurement_id: int) -> list[MeasurementArtifact]:
    """A measurement's artifacts by name (NotFound for an unknown measurement)."""
    if session.get(Measurement, measurement_id) is None:
        raise NotFound(f"measurement {measurement_id} not found")
    return list(session.scalars(select(MeasurementArtifact).where(
        MeasurementArtifact.measurement_id == measurement_id).order_by(MeasurementArtifact.name)))


def artifact_names(session: Session, *, measurement_ids: list[int]) -> dict[int, list[str]]:
    """measurement id -> its artifacts' names (the dashboard's links), without their bytes."""
    out: dict[int, list[str]] = {}
    if not measurement_ids:
        return out
    for mid, name in session.execute(
        select(MeasurementArtifact.measurement_id, MeasurementArtifact.name)
        .where(MeasurementArtifact.measurement_id.in_(measurement_ids))
        .order_by(MeasurementArtifact.name)
    ):
        out.setdefault(mid, []).append(name)
    return out


def get_artifact(session: Session, *, measurement_id: int, name: str) -> tuple[str, bytes]:
    """(media type, decompressed content); NotFound when the measurement or name is absent."""
    # columns, not the row: a loaded row would keep its bytes in the session for as long as it
    # lives (a bundle reads every artifact of a campaign through one session)
    row = session.execute(select(MeasurementArtifact.media_type, MeasurementArtifact.gzip_data)
                          .where(MeasurementArtifact.measurement_id == measurement_id,
                                 MeasurementArtifact.name == name)).first()
    if row is None:
        raise NotFound(f"measurement {measurement_id} has no artifact {name!r}")
    return row.media_type, gzip.decompress(row.gzip_data)


# --- site capability reports ---------------------------------------------------------------
def save_capabilities(
    session: Session, *, site_name: str, report: Mapping[str, Any], at: datetime | None = None
) -> SiteCapabilities:
    """Replace a site's capability report with this one (NotFound for an unknown site name)."""
    site = session.scalar(select(Site).where(Site.name == site_name))
    if site is None:
        raise NotFound(f"site {site_name!r} not found")
    row = session.get(SiteCapabilities, site.id)
    if row is None:
        row = SiteCapabilities(site_id=site.id, report=dict(report), reported_at=at or utcnow())
        session.add(row)
    else:
        row.report, row.reported_at = dict(report), at or utcnow()
    session.flush()
    return row


def get_capabilities(session: Session, *, site_id: int) -> SiteCapabilities:
    row = capabilities_or_none(session, site_id=site_id)
    if row is None:
        raise NotFound(f"site {site_id} has no capability report")
    return row


def capabilities_or_none(session: Session, *, site_id: int) -> SiteCapabilities | None:
    return session.get(SiteCapabilities, site_id)


def reported_ccs(session: Session, *, site_ids: list[int]) -> dict[str, list[str]]:
    """Site name -> the CCs its worker's latest report offers, for the sites that reported."""
    rows = session.execute(
        select(Site.name, SiteCapabilities.report)
        .join(SiteCapabilities, SiteCapabilities.site_id == Site.id)
        .where(Site.id.in_(site_ids))
    )
    return {name: [str(c) for c in (report or {}).get("congestion_controls") or []]
            for name, report in rows}


def worker_report(session: Session, *, site_name: str) -> dict[str, Any] | None:
    """The site worker's latest capability report when it names the site's ISP addresses
    (`endpoints`): the mark of a real site's worker, as opposed to the emulated testbed's."""
    report = session.scalar(select(SiteCapabilities.report).join(
        Site, Site.id == SiteCapabilities.site_id).where(Site.name == site_name))
    return report if report and report.get("endpoints") else None

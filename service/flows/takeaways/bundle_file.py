"""A bundle file read with no database of the operator's (`mpcoa show|report BUNDLE`).

The bundle goes through `import_bundle` into a private in-memory database
(`service.db.memory_database`), so what is shown and drawn is exactly what a campaign imported
into a real database gives: the same checks refuse a bad file, the same code derives the answer
again. Nothing is written anywhere; the database is gone when the block ends.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from sqlalchemy.orm import Session

from models import MeasurementPhase

from ...db import make_sessionmaker, memory_database
from ...state import state_of
from ...store import campaigns as campaign_store
from ...store import inventory, measurements
from ...store import recommendations as recommendation_store
from .bundle_import import Imported, import_bundle
from .report_data import ReportData, report_data


@dataclass(frozen=True)
class OpenedBundle:
    session: Session
    imported: Imported


@contextmanager
def opened_bundle(data: bytes) -> Iterator[OpenedBundle]:
    """The bundle (.tar.gz bytes) loaded into a database of its own; `Invalid`/`Conflict` for a
    file that is not a valid bundle, as `mpcoa import` says it."""
    with memory_database() as engine:
        session = make_sessionmaker(engine)()
        try:
            yield OpenedBundle(session, import_bundle(session, data))
        finally:
            session.close()


def report_of(opened: OpenedBundle, name: str) -> ReportData:
    """The bundle's report, titled with the exporting database's campaign id and the file's
    name (this database's id means nothing outside it)."""
    data = report_data(opened.session, campaign_id=opened.imported.campaign_id)
    c = data.campaign
    topology = inventory.get_topology(opened.session, topology_id=c.topology_id)
    source_id = state_of(c).imported.source.get("campaign_id", "?")
    data.title = (f"Campaign {source_id} of {name}: {topology.local_site.name} -> "
                  f"{topology.remote_site.name} ({c.mode}, {c.state})")
    return data


def summary(opened: OpenedBundle) -> dict[str, Any]:
    """What the bundle holds: where it came from, the campaign's plan, its probes by phase and
    status, and its answer (the bundle's, the one derived again, and what differs). The ids are
    the exporting database's (this database's are thrown away)."""
    s, done = opened.session, opened.imported
    campaign = campaign_store.get_campaign(s, campaign_id=done.campaign_id)
    topology = inventory.get_topology(s, topology_id=done.topology_id)
    origin = state_of(campaign).imported
    probes: dict[str, dict[str, int]] = {}
    for m in measurements.list_runs(s, campaign_id=campaign.id,
                                      phases=[p.value for p in MeasurementPhase]):
        by_status = probes.setdefault(str(m.phase), {})
        by_status[m.status] = by_status.get(m.status, 0) + 1
    answer = (recommendation_store.get_recommendation(s, recommendation_id=done.recommendation_id)
              if done.recommendation_id is not None else None)
    return {
        "source": dict(origin.source),
        "topology": {"local": topology.local_site.name, "remote": topology.remote_site.name,
                     "subflows": [sf.name for sf in topology.subflows]},
        "campaign": {"mode": campaign.mode, "state": campaign.state, "ccs": list(campaign.ccs),
                     "buffer_grid_mib": list(campaign.buffer_grid_mib), "runs": campaign.runs,
                     "duration_s": campaign.duration_s, "delta": campaign.delta},
        "measurements": done.measurements,
        "artifacts": done.artifacts,
        "probes": probes,
        "answer": None if answer is None else {
            "opm": answer.opm, "occ": answer.occ, "obs_mib": answer.obs_mib,
            "otp_mbps": answer.otp_mbps, "tp_max_mbps": answer.tp_max_mbps,
            "quality_flags": list(answer.quality_flags),
            "subflows_used": (answer.outputs or {}).get("subflows_used"),
            "standby_subflows": (answer.outputs or {}).get("standby_subflows")},
        "no_answer": list(done.no_answer),
        "bundle_answer": done.bundle_answer,
        "differs": done.differs,
    }

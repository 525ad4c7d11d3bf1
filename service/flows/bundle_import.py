"""A campaign bundle loaded into this database: `import_bundle` (docs/formats.md).

Every row gets this database's ids; where it came from is kept: the campaign's notes carry
`imported` (the source's ids and database kind, the bundle's version, when it was exported, its
SHA-256, and the sites' capability reports and software the bundle described), and the answer's
provenance `imported_from`. Sites are matched by name and must have the same ISPs (else a
conflict, as for an inline topology); the topology is found or created; an RTT stored for a
subflow is kept, an unset one takes the bundle's.

`rederive` solves the imported campaign again through `solve_campaign`, the one solve of a
campaign, so an import can be checked against the answer the bundle carries.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError
from sqlalchemy.orm import Session

from models import (
    CAMPAIGN_MODES,
    EVENT_KINDS,
    FINAL_CAMPAIGN_STATES,
    MEASUREMENT_PHASES,
    MEASUREMENT_STATUSES,
    NO_EXCLUSION,
    RECOMMENDATION_KINDS,
    Campaign,
    FitRecord,
    ImpactFactor,
    Measurement,
    RecalibrationEvent,
    Recommendation,
)

from ..algorithm import topology as algo
from ..errors import Invalid
from ..store import artifacts as artifact_store
from ..store import bundle_rows as rows
from ..store import campaigns as campaign_store
from ..store import inventory
from ..store import recommendations as recommendation_store
from . import bundle_archive as archive
from .campaign_answer import CampaignSolution, solve_campaign

_KEYS = {
    "format", "version", "exported_at", "exported_by", "source", "topology", "capabilities",
    "software", "campaign", "measurements", "impact_factors", "selection", "fits", "answer",
    "events",
}


@dataclass(frozen=True)
class Imported:
    campaign_id: int
    topology_id: int
    recommendation_id: int | None
    measurements: int
    artifacts: int


def import_bundle(session: Session, data: bytes) -> Imported:
    """Load a bundle (.tar.gz bytes) as a new campaign; Invalid/Conflict for a file that is not a
    bundle of this version or does not fit this database. Flushes; the caller commits."""
    bundle = archive.read(data)
    doc = bundle.document
    unknown = sorted(set(doc) - _KEYS)
    if unknown:
        raise Invalid(f"unknown keys {unknown}", ())
    topology = _topology(session, _section(doc, "topology", dict))
    campaign = _campaign(session, doc, topology.id, hashlib.sha256(data).hexdigest())
    count, stored_artifacts = _measurements(session, campaign.id, doc, bundle.artifacts)
    rows.add_rows(session, ImpactFactor, [
        rows.from_json(ImpactFactor, r, ("impact_factors", k))
        for k, r in enumerate(_section(doc, "impact_factors", list))], campaign_id=campaign.id)
    rows.add_rows(session, FitRecord, [
        rows.from_json(FitRecord, r, ("fits", k))
        for k, r in enumerate(_section(doc, "fits", list))], campaign_id=campaign.id)
    answer = _answer(session, doc, campaign)
    events = [rows.from_json(RecalibrationEvent, e, ("events", k))
              for k, e in enumerate(_section(doc, "events", list))]
    for k, e in enumerate(events):
        _one_of(e.get("kind"), EVENT_KINDS, ("events", k, "kind"))
    rows.add_rows(session, RecalibrationEvent, events,
                  campaign_id=campaign.id, topology_id=topology.id)
    return Imported(campaign.id, topology.id, answer.id if answer else None, count,
                    stored_artifacts)


def rederive(session: Session, *, campaign_id: int) -> CampaignSolution:
    """The campaign's answer solved again from its stored rows, on the bounds and delta its
    stored answer was given for (the campaign's delta and measured range without one)."""
    campaign = campaign_store.get_campaign(session, campaign_id=campaign_id)
    answer = (recommendation_store.get_recommendation(
        session, recommendation_id=campaign.recommendation_id)
        if campaign.recommendation_id is not None else None)
    if answer is None:
        return solve_campaign(session, campaign, campaign.delta)
    return solve_campaign(session, campaign, answer.delta, answer.bs_min_mib, answer.bs_max_mib)


def same_answer(solved: CampaignSolution, answer: Recommendation | None) -> bool:
    """Does the re-derived solution give the stored answer's OPM, OCC, OBS and OTP?"""
    s = solved.solution
    if answer is None or s is None:
        return answer is None and s is None
    return (s.opm, s.occ) == (answer.opm, answer.occ) and _close(s.obs_mib, answer.obs_mib) \
        and _close(s.otp_mbps, answer.otp_mbps)


def _close(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is b
    return abs(a - b) <= 1e-9 * max(1.0, abs(a), abs(b))


# --- the sections ------------------------------------------------------------------------------
def _section(doc: dict, key: str, kind: type):
    value = doc.get(key)
    if not isinstance(value, kind):
        raise Invalid(f"must be {'an object' if kind is dict else 'a list'}", (key,))
    return value


def _one_of(value: Any, allowed: tuple[str, ...], loc: tuple) -> None:
    if value not in allowed:
        raise Invalid(f"{value!r} is not one of {list(allowed)}", loc)


def _topology(session: Session, doc: dict[str, Any]):
    try:
        spec = algo.TopologySpec.model_validate(
            {side: {"name": (doc.get(side) or {}).get("name"),
                    "isps": (doc.get(side) or {}).get("isps")} for side in ("local", "remote")})
    except ValidationError as exc:
        err = exc.errors()[0]
        raise Invalid(err["msg"], ("topology", *err["loc"])) from None
    subflows = doc.get("subflows")
    if not isinstance(subflows, list) or not all(isinstance(s, dict) for s in subflows):
        raise Invalid("must be a list of objects", ("topology", "subflows"))
    names = [s.get("name") for s in subflows]
    if names != spec.subflow_names():
        raise Invalid(f"subflows {names} are not the sites' pairs {spec.subflow_names()}",
                      ("topology", "subflows"))
    rtts = {s["name"]: s.get("rtt_ms") for s in subflows if s.get("rtt_ms") is not None}
    topology = inventory.ensure_topology(session, spec=spec, loc=("topology",))
    unset = {sf.name for sf in topology.subflows if sf.rtt_ms is None}
    fill = {name: rtt for name, rtt in rtts.items() if name in unset}
    if fill:
        inventory.update_topology_rtts(session, topology_id=topology.id, rtts_ms=fill)
    return topology


def _campaign(session: Session, doc: dict, topology_id: int, sha256: str) -> Campaign:
    values = rows.from_json(Campaign, _section(doc, "campaign", dict), ("campaign",))
    _one_of(values.get("state"), FINAL_CAMPAIGN_STATES, ("campaign", "state"))
    _one_of(values.get("mode", "grid"), CAMPAIGN_MODES, ("campaign", "mode"))
    notes = dict(values.get("notes") or {})
    source = doc.get("source") if isinstance(doc.get("source"), dict) else {}
    notes["imported"] = {
        "from": {**source, "exported_at": doc.get("exported_at"),
                 "exported_by": doc.get("exported_by"), "bundle_version": doc["version"],
                 "bundle_sha256": sha256},
        "capabilities": doc.get("capabilities") or {},
        "software": doc.get("software") or {},
    }
    values["notes"] = notes
    (campaign,) = rows.add_rows(session, Campaign, [values], topology_id=topology_id,
                                recommendation_id=None)
    return campaign


def _measurements(
    session: Session, campaign_id: int, doc: dict, artifacts: dict[int, dict[str, bytes]]
) -> tuple[int, int]:
    entries = _section(doc, "measurements", list)
    extra = sorted(set(artifacts) - set(range(len(entries))))
    if extra:
        raise Invalid(f"artifacts of measurements {extra} that the bundle does not have",
                      ("measurements",))
    values, keys = [], set()
    for k, entry in enumerate(entries):
        loc = ("measurements", k)
        if not isinstance(entry, dict):
            raise Invalid("must be an object", loc)
        listed = entry.get("artifacts") or []
        if not isinstance(listed, list):
            raise Invalid("must be a list", (*loc, "artifacts"))
        names = sorted(a.get("name") for a in listed if isinstance(a, dict))
        if names != sorted(artifacts.get(k, {})):
            raise Invalid(f"lists artifacts {names}, the archive has "
                          f"{sorted(artifacts.get(k, {}))}", (*loc, "artifacts"))
        row = rows.from_json(
            Measurement, {n: v for n, v in entry.items() if n not in ("source_id", "artifacts")},
            loc)
        _one_of(row.get("phase"), MEASUREMENT_PHASES, (*loc, "phase"))
        _one_of(row.get("status", "ok"), MEASUREMENT_STATUSES, (*loc, "status"))
        key = (row["phase"], row["pm"], row["cc"], row["bs_mib"], row["run"],
               row.get("excluded_subflow", NO_EXCLUSION))
        if key in keys:
            raise Invalid(f"a second run with the key {key}", loc)
        keys.add(key)
        values.append(row)
    stored = rows.add_rows(session, Measurement, values, campaign_id=campaign_id)
    count = 0
    for k, m in enumerate(stored):
        if artifacts.get(k):
            count += len(artifact_store.store_artifacts(
                session, measurement_id=m.id, artifacts=artifacts[k]))
    return len(stored), count


def _answer(session: Session, doc: dict, campaign: Campaign) -> Recommendation | None:
    if doc.get("answer") is None:
        return None
    values = rows.from_json(Recommendation, _section(doc, "answer", dict), ("answer",))
    _one_of(values.get("kind"), RECOMMENDATION_KINDS, ("answer", "kind"))
    provenance = dict(values.get("provenance") or {})
    provenance["imported_from"] = campaign.notes["imported"]["from"]
    values["provenance"] = provenance
    inputs = dict(values.get("inputs") or {})
    if "topology_id" in inputs:  # the question in this database's terms
        inputs["topology_id"] = campaign.topology_id
    values["inputs"] = inputs
    (answer,) = rows.add_rows(session, Recommendation, [values],
                              topology_id=campaign.topology_id, campaign_id=campaign.id)
    campaign.recommendation_id = answer.id
    session.flush()
    return answer

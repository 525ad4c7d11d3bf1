"""A campaign bundle loaded into this database: `import_bundle` (docs/formats.md).

A bundle is input from outside: `bundle_archive.read` has checked every value against its
version's schema (`bundle_schema`) and every size against what a campaign can contain before
anything is written; here the rows are checked against each other (the sites' pairs, one run per
key) and inserted, all in the caller's one transaction.

Every row gets this database's ids; where it came from is kept: the campaign's state carries
`imported` (the source's ids and database kind, the bundle's version, when it was exported, its
SHA-256, the sites' capability reports and software the bundle described, and the bundle's
answer). Sites are matched by name and must have the same ISPs (else a conflict, as for an inline
topology); the topology is found or created; an RTT stored for a subflow is kept, an unset one
takes the bundle's.

The bundle's answer is never stored as an answer: the imported campaign is answered again by
`stored_answer.campaign_answer`, the code a finishing campaign runs, on the question the bundle's
answer was given for; that answer (its provenance keeps the bundle's, and what differs) is the
topology's calibrated answer. A tampered answer therefore never reaches `apply`.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, replace
from typing import Any

from pydantic import BaseModel
from sqlalchemy.orm import Session

from models import (
    Campaign,
    FitRecord,
    ImpactFactor,
    Measurement,
    RecalibrationEvent,
    Recommendation,
)

from ...algorithm import topology as algo
from ...errors import Invalid
from ...state import CampaignState, ImportOrigin, state_of
from ...store import artifacts as artifact_store
from ...store import bundle_rows as rows
from ...store import campaigns as campaign_store
from ...store import inventory
from ...store import recommendations as recommendation_store
from ..answers.campaign_answer import SolvedCampaign, solve_campaign
from ..answers.decided import decided_question, decided_solution
from ..answers.stored_answer import campaign_answer
from . import bundle_archive as archive

#: Where a bundle's answer and the one derived again may differ (what `apply` reads of an answer).
COMPARED = ("opm", "occ", "obs_mib", "otp_mbps", "tp_max_mbps", "subflows_used",
            "standby_subflows")
DIFFERS = "imported_answer_differs"  # the quality flag of an answer unlike its bundle's
# A version-1 campaign row's budget columns (its state is read from them and its notes).
_V1_BUDGET = ("probe_seconds_budget", "probes_total", "probes_done", "probe_seconds_used",
              "extra_impact_runs", "extra_rounds", "budget_exhausted")


@dataclass(frozen=True)
class Imported:
    campaign_id: int
    topology_id: int
    recommendation_id: int | None  # the answer derived again (None: the data gives none)
    measurements: int
    artifacts: int
    bundle_answer: dict[str, Any] | None = None  # what the bundle said (COMPARED and question)
    differs: dict[str, dict[str, Any]] = field(default_factory=dict)  # field -> both values
    no_answer: list[str] = field(default_factory=list)  # why the data gives no answer


def import_bundle(session: Session, data: bytes) -> Imported:
    """Load a bundle (.tar.gz bytes) as a new campaign and answer it again; Invalid/Conflict for
    a file that is not a bundle of a known version or does not fit this database. Flushes; the
    caller commits (or rolls back: nothing of a refused bundle stays)."""
    bundle = archive.read(data)
    doc = bundle.checked
    spec = _spec(doc.topology)
    _check_rows(doc, spec)
    topology = _topology(session, doc.topology, spec)
    campaign = _campaign(session, doc, topology.id, hashlib.sha256(data).hexdigest())
    count, stored_artifacts = _measurements(session, campaign.id, doc, bundle.artifacts)
    rows.add_rows(session, ImpactFactor, [_row(r) for r in doc.impact_factors],
                  campaign_id=campaign.id)
    rows.add_rows(session, FitRecord, [_row(r) for r in doc.fits], campaign_id=campaign.id)
    rows.add_rows(session, RecalibrationEvent, [_row(e) for e in doc.events],
                  campaign_id=campaign.id, topology_id=topology.id)
    said = _said(doc.answer)
    answer, why = _answer_again(session, campaign, doc.answer, said)
    differs = _differences(said, answer)
    if answer is not None:
        answer.provenance = {**answer.provenance, "imported_from": _from(campaign),
                             "bundle_answer": said, "bundle_answer_differs": differs}
        if differs:
            answer.quality_flags = [*answer.quality_flags, DIFFERS]
    campaign_store.update_state(campaign, imported=replace(
        state_of(campaign).imported, answered=True, answer=said, answer_differs=differs,
        no_answer=why))
    session.flush()
    return Imported(campaign.id, topology.id, answer.id if answer else None, count,
                    stored_artifacts, said, differs, why)


def rederive(session: Session, *, campaign_id: int) -> SolvedCampaign:
    """The campaign's answer solved again from its stored rows, on the bounds and delta its
    stored answer was given for (the campaign's delta and measured range without one); for
    the question a campaign's adaptive sweep decided here, its stored decision."""
    campaign = campaign_store.get_campaign(session, campaign_id=campaign_id)
    answer = (recommendation_store.get_recommendation(
        session, recommendation_id=campaign.recommendation_id)
        if campaign.recommendation_id is not None else None)
    if answer is None:
        delta, lo, hi = campaign.delta, None, None
    else:
        delta, lo, hi = answer.delta, answer.bs_min_mib, answer.bs_max_mib
    solved = solve_campaign(session, campaign, delta, lo, hi)
    decision = decided_question(campaign, delta, lo, hi)
    if decision is None or solved.solution is None:
        return solved
    # the question its own adaptive sweep decided: the decision is the answer (never an
    # imported campaign's: `decided.sweep_decision`)
    return replace(solved, solution=decided_solution(solved.solution, decision))


def same_answer(solved: SolvedCampaign, answer: Recommendation | None) -> bool:
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


# --- checks across rows -----------------------------------------------------------------------
def _spec(topology) -> algo.TopologySpec:
    try:
        return algo.TopologySpec.model_validate(
            {side: {"name": getattr(topology, side).name,
                    "isps": [i.model_dump() for i in getattr(topology, side).isps]}
             for side in ("local", "remote")})
    except ValueError as exc:  # two ISPs of a site with one name or label
        raise Invalid(str(exc).splitlines()[-1][:300], ("topology",)) from None


def _check_rows(doc, spec: algo.TopologySpec) -> None:
    """The sites' pairs; every subflow a row names is one of them, one run per key."""
    names = [s.name for s in doc.topology.subflows]
    if names != spec.subflow_names():
        raise Invalid(f"subflows {names[:8]} are not the sites' pairs {spec.subflow_names()[:8]}",
                      ("topology", "subflows"))
    known = set(names)
    keys = set()
    for k, m in enumerate(doc.measurements):
        loc = ("measurements", k)
        for key, named in (("subflows", m.subflows), ("subflow_bytes", m.subflow_bytes),
                           ("rtt_ms", m.rtt_ms), ("rto_ms", m.rto_ms)):
            _known(named, known, (*loc, key))
        if m.excluded_subflow:
            _known(m.excluded_subflow.removeprefix("only:").split("+"), known,
                   (*loc, "excluded_subflow"))
        key = (m.phase, m.pm, m.cc, m.bs_mib, m.run, m.excluded_subflow)
        if key in keys:
            raise Invalid(f"a second run with the key {key}", loc)
        keys.add(key)
    for k, r in enumerate(doc.impact_factors):
        _known([r.subflow], known, ("impact_factors", k, "subflow"))


def _known(named, known: set[str], loc: tuple) -> None:
    unknown = sorted(set(named) - known)
    if unknown:
        raise Invalid(f"{unknown[0]!r} is not a subflow of the bundle's topology", loc)


def _row(model: BaseModel) -> dict[str, Any]:
    """A checked row's column values; a null leaves the column to its default."""
    return {k: v.model_dump(exclude_unset=True) if isinstance(v, BaseModel) else v
            for k, v in model if v is not None}


# --- the sections ------------------------------------------------------------------------------
def _topology(session: Session, topology, spec: algo.TopologySpec):
    stored = inventory.ensure_topology(session, spec=spec, loc=("topology",))
    rtts = {s.name: s.rtt_ms for s in topology.subflows if s.rtt_ms is not None}
    unset = {sf.name for sf in stored.subflows if sf.rtt_ms is None}
    fill = {name: rtt for name, rtt in rtts.items() if name in unset}
    if fill:
        inventory.update_topology_rtts(session, topology_id=stored.id, rtts_ms=fill)
    return stored


def _campaign(session: Session, doc, topology_id: int, sha256: str) -> Campaign:
    values = _row(doc.campaign)
    state = (
        CampaignState.from_dict(values.pop("run_state", None)) if doc.version >= 2
        else CampaignState.from_legacy(
            {k: values.pop(k) for k in _V1_BUDGET if k in values}, values.pop("notes", None))
    )
    values["run_state"] = replace(state, imported=ImportOrigin(
        source={**doc.source.model_dump(exclude_none=True), "exported_at": doc.exported_at,
                "exported_by": doc.exported_by, "bundle_version": doc.version,
                "bundle_sha256": sha256},
        capabilities=doc.capabilities,
        software=doc.software,
    )).to_dict()
    (campaign,) = rows.add_rows(session, Campaign, [values], topology_id=topology_id,
                                recommendation_id=None)
    return campaign


def _measurements(
    session: Session, campaign_id: int, doc, artifacts: dict[int, dict[str, bytes]]
) -> tuple[int, int]:
    values = [{k: v for k, v in _row(m).items() if k not in ("source_id", "artifacts")}
              for m in doc.measurements]
    stored = rows.add_rows(session, Measurement, values, campaign_id=campaign_id)
    count = 0
    for k, m in enumerate(stored):
        if artifacts.get(k):
            count += len(artifact_store.store_artifacts(
                session, measurement_id=m.id, artifacts=artifacts[k]))
    return len(stored), count


# --- the answer --------------------------------------------------------------------------------
def _said(answer) -> dict[str, Any] | None:
    """What the bundle's answer says: the question, and what `apply` would read of it."""
    if answer is None:
        return None
    outputs = answer.outputs
    return {
        "kind": answer.kind, "delta": answer.delta, "bs_min_mib": answer.bs_min_mib,
        "bs_max_mib": answer.bs_max_mib, "opm": answer.opm, "occ": answer.occ,
        "obs_mib": answer.obs_mib, "otp_mbps": answer.otp_mbps,
        "tp_max_mbps": answer.tp_max_mbps,
        "subflows_used": outputs.get("subflows_used"),
        "standby_subflows": outputs.get("standby_subflows"),
        "quality_flags": list(answer.quality_flags),
        "created_at": answer.created_at.isoformat() if answer.created_at else None,
    }


def _answer_again(session: Session, campaign: Campaign, answer,
                  said: dict[str, Any] | None) -> tuple[Recommendation | None, list[str]]:
    """The imported campaign answered again on the bundle's question (a bundle without an
    answer gets none: its campaign gave none)."""
    if answer is None:
        return None, []
    stored, why = campaign_answer(session, campaign, delta=answer.delta,
                                  bs_min_mib=answer.bs_min_mib, bs_max_mib=answer.bs_max_mib)
    if stored is not None:
        campaign.recommendation_id = stored.id
        session.flush()
        return stored, []
    return None, [w[:500] for w in why]


def _differences(said: dict[str, Any] | None, answer: Recommendation | None) -> dict:
    """field -> {"bundle", "rederived"} where the answer derived again says otherwise."""
    if said is None:
        return {}
    got = _said_of_row(answer)
    out = {}
    for name in COMPARED:
        a, b = said.get(name), got.get(name)
        same = _close(a, b) if isinstance(a, float) and isinstance(b, float) else a == b
        if not same:
            out[name] = {"bundle": a, "rederived": b}
    return out


def _said_of_row(answer: Recommendation | None) -> dict[str, Any]:
    if answer is None:
        return {}
    outputs = answer.outputs or {}
    return {"opm": answer.opm, "occ": answer.occ, "obs_mib": answer.obs_mib,
            "otp_mbps": answer.otp_mbps, "tp_max_mbps": answer.tp_max_mbps,
            "subflows_used": outputs.get("subflows_used"),
            "standby_subflows": outputs.get("standby_subflows")}


def _from(campaign: Campaign) -> dict[str, Any]:
    return dict(state_of(campaign).imported.source)

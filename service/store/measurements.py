"""Measurement rows: one per probe run, stored idempotently under the step's key."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import Any, NamedTuple

from sqlalchemy import JSON, Float, func, inspect, select
from sqlalchemy.orm import Session

from models import NO_EXCLUSION, Campaign, Measurement, MeasurementPhase
from probes.vocabulary import PathManager, normalize_pm

from ..errors import NotFound
from .campaigns import get_campaign


class MeasurementKey(NamedTuple):
    """A step's measurement key: within its campaign, what makes a re-executed probe find its
    earlier result (the table's unique key). One type for the plan's steps (`ProbeStep.key`),
    the phases' stored runs (`Context.done`), recording and this store; a tuple, so it is also
    the probe lease's stored step and a probe's name across sites."""

    phase: str
    pm: str
    cc: str
    bs_mib: float
    run: int
    excluded_subflow: str = NO_EXCLUSION

    @classmethod
    def of(cls, value: Any) -> MeasurementKey:
        """The key of anything with the six attributes (a step, a record, a stored row)."""
        return cls(value.phase, value.pm, value.cc, float(value.bs_mib), value.run,
                   value.excluded_subflow or NO_EXCLUSION)

    def stored(self) -> MeasurementKey:
        """The key as a row stores it: the PM's canonical name, the CC in lower case."""
        return self._replace(pm=normalize_pm(self.pm), cc=self.cc.strip().lower())

    def matches(self) -> list:
        """The conditions that find its row (with the campaign's)."""
        return [getattr(Measurement, name) == value for name, value in self._asdict().items()]


@dataclass(frozen=True)
class MeasurementRecord:
    """One probe run as it is stored: its key (campaign, phase, PM, CC, buffer, run, excluded
    subflow) and what it measured. Built from a probe's result in one place
    (`flows.campaign.recording`); tests and benchmarks build it for the runs they seed."""

    campaign_id: int
    phase: str
    pm: PathManager
    cc: str
    bs_mib: float
    run: int
    subflows: Sequence[str]
    duration_s: float
    goodput_mbps: Sequence[float]
    tool: str
    started_at: datetime
    finished_at: datetime
    excluded_subflow: str | None = None
    interval_s: float = 1.0
    subflow_bytes: Mapping[str, int] | None = None
    rtt_ms: Mapping[str, float] | None = None
    rto_ms: Mapping[str, float] | None = None
    tool_version: str = ""
    raw_output: str = ""
    status: str = "ok"
    error: str | None = None
    mean_goodput_mbps: float | None = None  # the mean after the warm-up; default the series'
    observed_subflows: Sequence[Mapping[str, Any]] = ()
    effective_buffers: Mapping[str, Any] | None = None
    quiet_check: Mapping[str, Any] | None = None
    warmup_s: float = 0.0
    timing: Mapping[str, Any] | None = None  # the timing rule's inputs and figures
    clock_offset_ms: float | None = None  # receiver's clock minus sender's (two clocks)
    clock_offset_uncertainty_ms: float | None = None


def record_measurement(session: Session, record: MeasurementRecord) -> tuple[Measurement, bool]:
    """Store one probe run; (row, created). A second call with the same key returns the first row
    unchanged (created False), so a re-executed task never duplicates data. The campaign's
    progress counters are the caller's (`flows.campaign.recording` charges the budget when
    created). The row is the record's fields as they are named, each as its column takes it."""
    campaign = get_campaign(session, campaign_id=record.campaign_id)
    key = MeasurementKey.of(record).stored()
    existing = session.scalar(
        select(Measurement).where(Measurement.campaign_id == campaign.id, *key.matches()))
    if existing is not None:
        return existing, False
    values = {f.name: getattr(record, f.name) for f in fields(record)
              if f.name not in ("campaign_id", *MeasurementKey._fields)}
    series = [float(v) for v in record.goodput_mbps]
    values["goodput_mbps"] = series
    if values["mean_goodput_mbps"] is None and series and record.status == "ok":
        values["mean_goodput_mbps"] = sum(series) / len(series)  # the whole series' mean
    row = Measurement(campaign_id=campaign.id, **key._asdict(), **_as_columns(values))
    session.add(row)
    session.flush()
    return row, True


def _as_columns(values: Mapping[str, Any]) -> dict[str, Any]:
    """Each value as its column of `measurements` takes it: a float column a float, a JSON
    column plain JSON (dicts and lists, a fresh copy); None is left to the column's default."""
    columns = inspect(Measurement).columns
    out = {}
    for name, value in values.items():
        if value is None:
            continue
        kind = columns[name].type
        if isinstance(kind, Float):
            value = float(value)
        elif isinstance(kind, JSON):
            value = _plain(value)
        out[name] = value
    return out


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def capped_at_links(m: Measurement) -> bool:
    """The row's mean was capped at its links' rate when stored (`flows.campaign.recording`)."""
    return bool((m.timing or {}).get("capped_at_links"))


PointGoodputs = dict[tuple[str, str], dict[float, list[float]]]


def point_goodputs(rows: Sequence[Measurement]) -> tuple[PointGoodputs, PointGoodputs]:
    """Per (PM, CC) and buffer the means of the ok `rows`; and the same without the means
    capped at their links' rate (`capped_at_links`), whose spread is hidden."""
    means: PointGoodputs = {}
    uncapped: PointGoodputs = {}
    for m in rows:
        if m.status != "ok" or m.mean_goodput_mbps is None:
            continue
        key, bs = (m.pm, m.cc), float(m.bs_mib)
        means.setdefault(key, {}).setdefault(bs, []).append(m.mean_goodput_mbps)
        if not capped_at_links(m):
            uncapped.setdefault(key, {}).setdefault(bs, []).append(m.mean_goodput_mbps)
    return means, uncapped


def min_rtts_ms(session: Session, *, campaign_id: int) -> dict[str, float]:
    """Per subflow the smallest RTT (ss minrtt, ms) the campaign's ok probes observed."""
    out: dict[str, float] = {}
    rows = session.scalars(
        select(Measurement.rtt_ms).where(
            Measurement.campaign_id == campaign_id, Measurement.status == "ok"
        )
    )
    for rtts in rows:
        for name, rtt in (rtts or {}).items():
            if rtt and rtt > 0:
                out[name] = min(float(rtt), out.get(name, float("inf")))
    return out


def get_measurement(session: Session, *, measurement_id: int) -> Measurement:
    row = session.get(Measurement, measurement_id)
    if row is None:
        raise NotFound(f"measurement {measurement_id} not found")
    return row


def list_measurements(
    session: Session,
    *,
    campaign_id: int | None = None,
    topology_id: int | None = None,
    phase: str | None = None,
    pm: PathManager | None = None,
    cc: str | None = None,
    status: str | None = None,
    limit: int = 100,
    offset: int = 0,
) -> tuple[list[Measurement], int]:
    query = select(Measurement)
    if campaign_id is not None:
        query = query.where(Measurement.campaign_id == campaign_id)
    if topology_id is not None:
        query = query.join(Campaign, Campaign.id == Measurement.campaign_id).where(
            Campaign.topology_id == topology_id
        )
    for column, value in (
        (Measurement.phase, phase),
        (Measurement.pm, pm),
        (Measurement.cc, cc),
        (Measurement.status, status),
    ):
        if value is not None:
            query = query.where(column == value)
    total = session.scalar(select(func.count()).select_from(query.subquery())) or 0
    rows = session.scalars(query.order_by(Measurement.id).limit(limit).offset(offset))
    return list(rows), total


def ok_measurements(
    session: Session, *, campaign_id: int, phase: str, ccs: Sequence[str] | None = None
) -> list[Measurement]:
    """The campaign's successful runs of one phase, oldest first."""
    query = select(Measurement).where(
        Measurement.campaign_id == campaign_id,
        Measurement.phase == phase,
        Measurement.status == "ok",
    )
    if ccs is not None:
        query = query.where(Measurement.cc.in_(list(ccs)))
    return list(session.scalars(query.order_by(Measurement.id)))


def list_runs(
    session: Session, *, campaign_id: int, phases: Sequence[str]
) -> list[Measurement]:
    """Every stored run (ok or failed) of the campaign's `phases`, oldest first."""
    return list(session.scalars(
        select(Measurement)
        .where(Measurement.campaign_id == campaign_id, Measurement.phase.in_(list(phases)))
        .order_by(Measurement.id)
    ))


def all_runs(session: Session, *, campaign_id: int) -> list[Measurement]:
    """Every stored run (ok or failed) of the campaign, oldest first."""
    return list(session.scalars(
        select(Measurement).where(Measurement.campaign_id == campaign_id).order_by(Measurement.id)
    ))


def list_buffer_runs(session: Session, *, campaign_id: int) -> list[Measurement]:
    """Every stored buffer-phase run of a campaign (ok or failed), oldest first."""
    return list_runs(session, campaign_id=campaign_id, phases=(MeasurementPhase.SWEEP,))


def failed_measurements(session: Session, *, campaign_id: int) -> list[Measurement]:
    return list(
        session.scalars(
            select(Measurement)
            .where(Measurement.campaign_id == campaign_id, Measurement.status == "failed")
            .order_by(Measurement.id)
        )
    )


def done_keys(session: Session, *, campaign_id: int) -> set[MeasurementKey]:
    """The keys of every stored run (ok or failed): those steps are done."""
    rows = session.execute(
        select(*(getattr(Measurement, name) for name in MeasurementKey._fields))
        .where(Measurement.campaign_id == campaign_id)
    )
    return {MeasurementKey.of(row) for row in rows}


@dataclass(frozen=True)
class MeasurementSummary:
    """What a campaign's successful runs say as a whole: counts, age, mean RTT/RTO per subflow."""

    measurement_count: int
    buffer_measurement_count: int
    run_count: int
    oldest_at: datetime | None
    newest_at: datetime | None
    rtt_ms: dict[str, float] = field(default_factory=dict)
    rto_ms: dict[str, float] = field(default_factory=dict)


def summarize(session: Session, *, campaign_id: int) -> MeasurementSummary:
    ok = (Measurement.campaign_id == campaign_id, Measurement.status == "ok")
    count, oldest, newest = session.execute(
        select(
            func.count(Measurement.id),
            func.min(Measurement.started_at),
            func.max(Measurement.finished_at),
        ).where(*ok)
    ).one()
    buffer_count, runs = session.execute(
        select(func.count(Measurement.id), func.count(func.distinct(Measurement.run))).where(
            *ok, Measurement.phase == MeasurementPhase.SWEEP
        )
    ).one()
    rows = session.execute(select(Measurement.rtt_ms, Measurement.rto_ms).where(*ok)).all()
    return MeasurementSummary(
        measurement_count=count or 0,
        buffer_measurement_count=buffer_count or 0,
        run_count=runs or 0,
        oldest_at=oldest,
        newest_at=newest,
        rtt_ms=_mean_per_subflow(r.rtt_ms for r in rows),
        rto_ms=_mean_per_subflow(r.rto_ms for r in rows),
    )


def _mean_per_subflow(maps) -> dict[str, float]:
    values: dict[str, list[float]] = {}
    for per_subflow in maps:
        for name, value in (per_subflow or {}).items():
            if isinstance(value, int | float) and value > 0:
                values.setdefault(name, []).append(float(value))
    return {name: sum(v) / len(v) for name, v in values.items()}


def failure_entry(m: Measurement) -> dict[str, Any]:
    return {
        "phase": m.phase,
        "pm": m.pm,
        "cc": m.cc,
        "bs_mib": m.bs_mib,
        "run": m.run,
        "excluded_subflow": m.excluded_subflow,
        "error": m.error,
    }


def largest_buffer(session: Session, *, campaign_id: int) -> float | None:
    """The largest buffer (MiB) a probe of the campaign ran at and measured; None: none did.
    An autotune probe's bs_mib is the ceiling it ran under, no buffer: not counted."""
    return session.scalar(select(func.max(Measurement.bs_mib)).where(
        Measurement.campaign_id == campaign_id, Measurement.status == "ok",
        Measurement.phase != MeasurementPhase.AUTOTUNE))


def fallback_streak(session: Session, *, topology_id: int, since: datetime,
                    limit: int) -> list[str]:
    """The reasons of the topology's newest probes (since `since`, at most `limit`) that fell
    back to TCP one after another, newest first: the streak ends at the first probe that kept
    MPTCP or did not say (a row stored without the probe's result)."""
    rows = session.execute(
        select(Measurement.raw_output, Measurement.error)
        .join(Campaign, Campaign.id == Measurement.campaign_id)
        .where(Campaign.topology_id == topology_id, Measurement.finished_at >= since)
        .order_by(Measurement.finished_at.desc(), Measurement.id.desc())
        .limit(limit))
    out = []
    for raw, error in rows:
        try:
            result = json.loads(raw) if raw else {}
        except ValueError:
            break
        if not isinstance(result, dict) or result.get("mptcp_ok") is not False:
            break
        out.append(str(result.get("fallback_reason") or error or "fell back to TCP"))
    return out

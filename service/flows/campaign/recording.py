"""Recording a probe: its result as a typed `MeasurementRecord`, stored under the step's key,
and its cost charged to the campaign's budget. A mean a little above what the probe's links can
carry is capped at their rate (`capacity.capped_mean`), noted in the row's
`timing.capped_at_links`.

A probe that fell back to TCP, whose observed subflow set differs from the requested one, or that
started on busy sites is stored as failed with the reason: never fitted.
"""

from __future__ import annotations

import json
from dataclasses import replace

from sqlalchemy.orm import Session

from models import Measurement, utcnow
from probes.base import MeasurementResult

from ...algorithm.capacity import LinkCapacity, capped_mean
from ...store import artifacts as artifact_store
from ...store import campaigns as campaign_store
from ...store import inventory, measurements
from ...store.measurements import MeasurementRecord
from . import budget
from .plan import ProbeStep
from .timing import step_timing


def record(session: Session, rec: MeasurementRecord) -> tuple[Measurement, bool]:
    """Store `rec` and, the first time, charge its probe-seconds to the campaign's budget;
    (row, created). Idempotent: a second call returns the first row and charges nothing, so a
    re-executed task neither duplicates data nor double-counts progress."""
    row, created = measurements.record_measurement(session, rec)
    if created:
        campaign = campaign_store.get_campaign(session, campaign_id=rec.campaign_id)
        budget.charge(campaign, rec.phase, rec.duration_s)
        session.flush()
    return row, created


def from_result(
    *, campaign_id: int, step: ProbeStep, duration_s: float, result: MeasurementResult
) -> MeasurementRecord:
    """What a probe's result is stored as, with what it really ran: the observed subflows, the
    buffers read back, the quiet check."""
    error = result.failure_reason()
    observed = [o.model_dump(mode="json") for o in result.observed_subflows]
    times = [t for t, _ in result.goodput_series]
    frames = result.frames
    return MeasurementRecord(
        **_key(campaign_id, step),
        # The subflows that carried data, as observed (not the ones asked for).
        subflows=sorted(o["name"] for o in observed if not o["backup"] and o["bytes_acked"] > 1),
        duration_s=duration_s,
        goodput_mbps=[mbps for _, mbps in result.goodput_series],
        mean_goodput_mbps=result.goodput_mbps if error is None else None,
        interval_s=round(times[1] - times[0], 6) if len(times) > 1 else 1.0,
        subflow_bytes=result.subflow_bytes,
        # Eq. 1 wants the unloaded RTT (ss minrtt) and the RTO the kernel used.
        rtt_ms=_per_subflow(observed, "min_rtt_ms"),
        rto_ms=_per_subflow(observed, "rto_ms"),
        observed_subflows=observed,
        effective_buffers=dict(result.effective_buffers),
        quiet_check=result.quiet_check.model_dump(mode="json") if result.quiet_check else None,
        warmup_s=result.warmup_s,
        clock_offset_ms=frames.clock_offset_ms if frames else None,
        clock_offset_uncertainty_ms=frames.clock_offset_uncertainty_ms if frames else None,
        tool=result.tool,
        tool_version=result.tool_version,
        raw_output=json.dumps(result.to_dict(), default=str),
        status="failed" if error else "ok",
        error=f"not fitted: {error}" if error else None,
        started_at=result.started_at,
        finished_at=result.ended_at,
    )


def store_result(
    session: Session, *, campaign_id: int, step: ProbeStep, result: MeasurementResult,
    timing: dict | None = None,
) -> Measurement:
    """Store a probe's result under the step's key, with its raw outputs (they travel with the
    result: there is no shared filesystem between sites). `timing`: the step's timing as the
    request was made from it (`executor`), else worked out here."""
    campaign = campaign_store.get_campaign(session, campaign_id=campaign_id)
    # The duration is the one the probe ran with; the timing rule's inputs go with it.
    timing = dict(timing) if timing is not None else step_timing(session, campaign,
                                                                  step).to_dict()
    rec = from_result(campaign_id=campaign.id, step=step, duration_s=result.request.duration_s,
                      result=result)
    rec, capped = _capped(campaign, step, rec)
    if capped is not None:
        timing["capped_at_links"] = capped
    row, _ = record(session, replace(rec, timing=timing))
    artifact_store.store_artifacts(session, measurement_id=row.id, artifacts=result.artifacts)
    return row


def _capped(campaign, step: ProbeStep, rec: MeasurementRecord):
    """The record with its mean capped at what its subflows' links carry
    (`capacity.capped_mean`: a window that held a release of data sent before it), and what
    was capped (None: nothing); the series stays as measured."""
    if rec.mean_goodput_mbps is None:
        return rec, None
    rates = LinkCapacity.of(inventory.topology_spec(campaign.topology))
    subset = step.allowed_subflows or tuple(rates.ends)
    bound = rates.max_mbps(subset)
    mean = capped_mean(rec.mean_goodput_mbps, bound)
    if mean == rec.mean_goodput_mbps:
        return rec, None
    why = {"measured_mbps": rec.mean_goodput_mbps, "links_mbps": bound}
    return replace(rec, mean_goodput_mbps=mean), why


def record_failure(
    session: Session, *, campaign_id: int, step: ProbeStep, error: str
) -> Measurement:
    """After the retries: the step is stored as failed and the campaign goes on without it."""
    now = utcnow()
    row, _ = record(session, MeasurementRecord(
        **_key(campaign_id, step),
        subflows=list(step.allowed_subflows or []),
        duration_s=0.0,
        goodput_mbps=[],
        tool="none",
        status="failed",
        error=error[:2000],
        started_at=now,
        finished_at=now,
    ))
    return row


def _key(campaign_id: int, step: ProbeStep) -> dict:
    """The record's key fields: the campaign's and the step's `MeasurementKey`."""
    return {"campaign_id": campaign_id, **step.key._asdict()}


def _per_subflow(observed: list[dict], key: str) -> dict[str, float]:
    return {o["name"]: o[key] for o in observed if o.get(key)}

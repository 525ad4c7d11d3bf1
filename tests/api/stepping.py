"""Driving `calibration.next_step` by hand: what the kernels offer, and a step's probe recorded
as if it had run (the flow is under test, not the probe)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from service.flows import recording
from service.store.measurements import MeasurementRecord

T0 = datetime(2026, 11, 3, tzinfo=UTC)


class KernelOffers:
    """Both sites' kernels offer these CCs (what `Prober.available_ccs` reports)."""

    def __init__(self, ccs) -> None:
        self.ccs = set(ccs)

    def available_ccs(self) -> set[str]:
        return set(self.ccs)

    def measure(self, request):
        raise AssertionError("next_step never measures")


def record_step(session, campaign_id: int, step, tp: float, subflows=("U-C",)) -> None:
    """Store `step`'s probe with goodput `tp` (Mbit/s)."""
    recording.record(
        session, MeasurementRecord(
            campaign_id=campaign_id, phase=step.phase, pm=step.pm, cc=step.cc,
        bs_mib=step.bs_mib, run=step.run, excluded_subflow=step.excluded_subflow,
        subflows=list(subflows), duration_s=2, goodput_mbps=[tp, tp], tool="test",
        started_at=T0, finished_at=T0 + timedelta(seconds=2)),
    )

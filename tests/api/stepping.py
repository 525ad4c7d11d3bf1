"""Driving `calibration.next_step` by hand: what the kernels offer, a step's probe recorded as if
it had run (the flow is under test, not the probe), and `drive`, the loop every flow test runs."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timedelta

from service.flows.campaign import recording
from service.flows.campaign.calibration import next_step
from service.flows.campaign.plan import ProbeStep
from service.store.measurements import MeasurementRecord
from tests.support import ago


def probe_times(duration_s: float = 2, at: datetime | None = None) -> dict[str, datetime]:
    """`started_at` and `finished_at` of a probe recorded as if it had run at `at` (a day ago
    unless given: data the product takes as fresh)."""
    start = at or ago(days=1)
    return {"started_at": start, "finished_at": start + timedelta(seconds=duration_s)}


class KernelOffers:
    """Both sites' kernels offer these CCs (what `Prober.available_ccs` reports)."""

    def __init__(self, ccs) -> None:
        self.ccs = set(ccs)

    def available_ccs(self) -> set[str]:
        return set(self.ccs)

    def measure(self, request):
        raise AssertionError("next_step never measures")


def record_step(session, campaign_id: int, step, tp: float, subflows=("U-C",),
                duration_s: float = 2) -> None:
    """Store `step`'s probe with goodput `tp` (Mbit/s), charged `duration_s` probe-seconds."""
    recording.record(
        session, MeasurementRecord(
            campaign_id=campaign_id, phase=step.phase, pm=step.pm, cc=step.cc,
        bs_mib=step.bs_mib, run=step.run, excluded_subflow=step.excluded_subflow,
        subflows=list(subflows), duration_s=duration_s, goodput_mbps=[tp, tp], tool="test",
        **probe_times(duration_s)),
    )


def drive(
    session, campaign, goodput: Callable[[ProbeStep], float], settings,
    ccs: Iterable[str] = ("reno", "cubic"),
    subflows: Sequence[str] | Callable[[ProbeStep], Sequence[str]] = ("U-C",),
    stop: Callable[[ProbeStep], bool] | None = None,
    finishes: bool = True,
) -> list[ProbeStep]:
    """Answer every probe the campaign asks for with `goodput(step)`, carried by `subflows`
    (or `subflows(step)`), until it is ready to finish (asserted unless `finishes` is False) or
    a step meets `stop` (that step ends the list, unrecorded); the steps in order."""
    prober = KernelOffers(ccs)
    steps: list[ProbeStep] = []
    while (advance := next_step(session, campaign_id=campaign.id, prober=prober,
                                settings=settings)).step is not None:
        step = advance.step
        steps.append(step)
        if stop is not None and stop(step):
            return steps
        carried = subflows(step) if callable(subflows) else subflows
        record_step(session, campaign.id, step, goodput(step), carried)
    if finishes:
        assert advance.finish, campaign.error
    return steps


def buffers_swept(steps: Iterable[ProbeStep]) -> list[float]:
    """The sweep's buffers, in the order first probed."""
    swept: list[float] = []
    for step in steps:
        if step.phase == "buffer" and step.bs_mib not in swept:
            swept.append(step.bs_mib)
    return swept

"""A stream campaign's answer: the buffer phase's paced probes through `decide_stream`.

Each ok buffer-phase probe of the campaign carries its frame figures (`MeasurementResult.frames`,
stored in the probe's raw output); a probe without them (a bulk tool) counts as not carrying the
stream. The answer is OPM / OCC / OBS with the p99 frame delay at OBS and its interval, the
goodput there as OTP, and per arm why it does or does not carry the stream.

Delays are one-way where every probe's are: one clock (the emulated testbed), or two hosts'
clocks whose estimated offset is known within delta of the probe's least delay. Otherwise every
probe's delays are taken relative to its flow's minimum (p99 less the minimum: the offset
cancels), so that no answer compares one-way delays with relative ones, and the answer says so
(``delay_clock``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.orm import Session

from models import Campaign, Measurement, MeasurementPhase
from probes.frames import one_way_trusted

from ...algorithm.arm import Arm
from ...algorithm.objective import Objective
from ...algorithm.stream_choice import StreamDecision, StreamRun, decide_stream
from ...algorithm.stream_sweep import NO_PROBE
from ...store import measurements
from .decided import decided_stream

#: the p99 delay's interval is stated at this confidence (the bulk sweep's)
CONFIDENCE = 0.9


@dataclass
class StreamAnswer:
    error: str | None = None
    decision: StreamDecision | None = None
    measurement_count: int = 0
    points: list[dict[str, Any]] = field(default_factory=list)
    delay_clock: str = "one_way"
    clock_offset_uncertainty_ms: float | None = None
    #: the seeds' own figures at the answer's point (`point_figures`)
    figures: dict[str, float | None] = field(default_factory=dict)

    def outputs(self) -> dict[str, Any]:
        d = self.decision
        assert d is not None
        interval = d.p99_interval()
        return {
            "p99_ms": d.p99_ms,
            "p99_interval_ms": list(interval) if interval else None,
            "confidence": d.confidence,
            "best_p99_ms": d.best_p99_ms, "best_bs_mib": d.best_bs_mib,
            "limit_p99_ms": d.limit_p99_ms, "skipped_edge_mib": d.skipped_edge_mib,
            "goodput_mbps": d.goodput_mbps, "lost_fraction": d.lost_fraction,
            "settled": d.settled, "pm_settled": d.pm_settled, "cc_settled": d.cc_settled,
            "carrying": d.carrying, "not_carrying": d.not_carrying,
            "alternatives": [{"label": a.label, "relative": a.relative,
                              "differs_in": list(a.differs_in)} for a in d.alternatives],
            "points": self.points,
            "delay_clock": self.delay_clock,
            "clock_offset_uncertainty_ms": self.clock_offset_uncertainty_ms,
            **self.figures,
        }


def frames_of(m: Measurement) -> dict[str, Any] | None:
    """The frame figures a probe stored (None: a probe without per-frame evidence)."""
    try:
        return json.loads(m.raw_output or "{}").get("frames")
    except ValueError:
        return None


def stalled(m: Measurement) -> str | None:
    """Why the probe's stream stopped early (its connection stalled), or None."""
    return (frames_of(m) or {}).get("stalled")


def one_way(f: dict[str, Any], delta: float) -> bool:
    """Whether a probe's stored delays are one-way under the campaign's delta."""
    clock = f.get("clock", "shared")
    if clock == "shared":
        return True
    if clock != "offset":
        return False
    least, uncertainty = f.get("delay_min_ms"), f.get("clock_offset_uncertainty_ms")
    return least is None or (uncertainty is not None
                             and one_way_trusted(float(least), float(uncertainty), delta))


def stream_run(m: Measurement, relative: bool = False) -> StreamRun:
    """`relative`: the p99 less the flow's least delay (a probe stored one-way made relative
    like the others of its answer)."""
    f = frames_of(m) or {}
    p99 = f.get("delay_p99_ms")
    if (relative and p99 is not None and f.get("clock", "shared") != "relative"
            and f.get("delay_min_ms") is not None):
        p99 = float(p99) - float(f["delay_min_ms"])
    return StreamRun(goodput_mbps=float(m.mean_goodput_mbps or 0.0), p99_ms=p99,
                     lost_fraction=float(f.get("lost_fraction", 1.0)))


#: the seeds' own figures beside p99 (`point_figures`)
SEED_FIGURES = ("delay_mean_ms", "delay_max_ms", "jitter_mean_ms", "jitter_max_ms")


def point_figures(rows: list[Measurement], relative: bool) -> dict[str, float | None]:
    """Mean and largest frame delay and RFC 3550 jitter over one point's probes, as the seeds
    report them: the mean of the probes' means, the largest of their maxima (None: no probe
    stored it). `relative`: delays less each flow's least one, like the answer's p99; jitter is
    a difference of transit times, so no clock offset is in it."""
    def values(key: str) -> list[float]:
        out = []
        for m in rows:
            f = frames_of(m) or {}
            v = f.get(key)
            if v is None:
                continue
            if (key.startswith("delay_") and relative and f.get("clock", "shared") != "relative"
                    and f.get("delay_min_ms") is not None):
                v = float(v) - float(f["delay_min_ms"])
            out.append(float(v))
        return out
    out: dict[str, float | None] = {}
    for key in SEED_FIGURES:
        got = values(key)
        if key.endswith("_max_ms"):
            out[key] = max(got, default=None)
        else:
            out[key] = sum(got) / len(got) if got else None
    return out


@dataclass
class MeasuredRuns:
    """A campaign's ok buffer-phase probes as the stream rules read them."""

    rows: list[Measurement]
    runs: dict[Arm, dict[float, list[StreamRun]]]
    stalls: dict[tuple[Arm, float], list[str]]
    relative: bool
    uncertainties: list[float]


def measured_runs(session: Session, campaign: Campaign, delta: float) -> MeasuredRuns:
    rows = measurements.ok_measurements(session, campaign_id=campaign.id,
                                        phase=MeasurementPhase.SWEEP)
    figures = [f for m in rows if (f := frames_of(m))]
    relative = not all(one_way(f, delta) for f in figures)
    uncertainties = [float(u) for f in figures
                     if (u := f.get("clock_offset_uncertainty_ms")) is not None]
    runs: dict[Arm, dict[float, list[StreamRun]]] = {}
    stalls: dict[tuple[Arm, float], list[str]] = {}
    for m in rows:
        if cause := stalled(m):
            stalls.setdefault((Arm(m.pm, m.cc), m.bs_mib), []).append(cause)
        runs.setdefault(Arm(m.pm, m.cc), {}).setdefault(m.bs_mib, []).append(
            stream_run(m, relative))
    return MeasuredRuns(rows, runs, stalls, relative, uncertainties)


def stream_answer(session: Session, campaign: Campaign, objective: Objective,
                  delta: float) -> StreamAnswer:
    measured = measured_runs(session, campaign, delta)
    rows, runs, stalls, relative = (measured.rows, measured.runs, measured.stalls,
                                    measured.relative)
    if not runs:
        return StreamAnswer(error="stream_no_measurements")
    grid = sorted({bs for per in runs.values() for bs in per})
    arms = sorted(runs)
    decision = decided_stream(campaign) if delta == campaign.delta else None
    if decision is None:
        # a campaign cannot be asked for more: a point without an ok probe does not carry
        complete = {a: {bs: runs[a].get(bs) or [NO_PROBE] for bs in grid} for a in arms}
        decision = decide_stream(arms, grid, complete, rate_mbps=objective.rate_mbps,
                                 delta=delta, max_loss=objective.loss_allowed,
                                 confidence=CONFIDENCE, min_runs=1)
    points = [{"pm": a.pm, "cc": a.cc, "bs_mib": bs, "runs": len(rs),
               "p99_ms": [r.p99_ms for r in rs], "goodput_mbps": [r.goodput_mbps for r in rs],
               "lost_fraction": [r.lost_fraction for r in rs],
               **({"stalled": causes} if (causes := stalls.get((a, bs))) else {})}
              for a in arms for bs, rs in sorted(runs[a].items())]
    for (a, bs), causes in sorted(stalls.items()):  # the cause beside the arm's reason
        label = f"{a.pm}/{a.cc}"
        if label in decision.not_carrying and "; at " not in decision.not_carrying[label]:
            decision.not_carrying[label] += f"; at {bs:g} MiB {causes[0]}"
    chosen = [m for m in rows if (m.pm, m.cc, m.bs_mib)
              == (decision.opm, decision.occ, decision.obs_mib)]
    return StreamAnswer(error="stream_not_carried" if decision.opm is None else None,
                        decision=decision, measurement_count=len(rows), points=points,
                        figures=point_figures(chosen, relative) if chosen else {},
                        delay_clock="relative_to_minimum" if relative else "one_way",
                        clock_offset_uncertainty_ms=max(measured.uncertainties, default=None))

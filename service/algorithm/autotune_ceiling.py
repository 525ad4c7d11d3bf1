"""The autotuning ceiling: the smallest `tcp_rmem`/`tcp_wmem` maximum under which an application
that sets no socket buffer gets within delta of the best it gets autotuned.

The buffer sweep measures OBS with the buffers locked (SO_SNDBUF/SO_RCVBUF on both ends). Most
applications set none and are autotuned up to the host's ceiling, another regime: on SRL-HU a
pair of subflows carried 22.6 Mbit/s autotuned against 9.1 at a fixed 5.97 MiB. So the ceiling
an apply writes is measured in its own regime: probes that set no buffer, each under a
candidate ceiling written into the testbed namespaces' tcp_rmem/tcp_wmem
(`MeasurementRequest.autotune_max_bytes`).

Which ceilings: as the buffer sweep picks buffers, off the campaign's grid. The kernel doubles a
locked buffer, so an autotuned socket under a ceiling of 2 x b may grow as far as a locked b;
the candidates are 2 x each grid buffer, and the largest of them is the reference the others
are judged against (`candidate_ceilings`). The cost is `CEILING_RUNS` probes per candidate
(`sweep_cost`), stated with the plan before a probe runs.

The decision (`decide`): the best mean over the candidates, the target (1 - delta) x best, and
the smallest ceiling whose lower bound (Student-t at 90 % on the spread pooled over the points)
reaches it; the best's own point reaches it at its mean, so there is always an answer. Its
promise is the interval in which one fresh probe's goodput should land (prediction interval:
t x s x sqrt(1/n + 1)).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from scipy import stats

CEILING_RUNS = 2  # probes per candidate ceiling: one run has no spread of its own
CONFIDENCE = 0.9
MAX_CANDIDATES = 8  # the sweep's cost stays within a grid's worth of one arm's probes


def candidate_ceilings(grid_mib: Sequence[float], *, top_mib: float | None = None) -> list[float]:
    """The ceilings to sweep, in MiB, ascending: 2 x each grid buffer (what an autotuned socket
    needs to grow as far as a locked one), at most `top_mib` (the largest ceiling a host may
    be given), the largest `MAX_CANDIDATES` kept when there are more (the small end of a grid
    starves autotuning first, and the answer is near the locked OBS's double)."""
    out = sorted({round(2 * b, 6) for b in grid_mib if b > 0})
    if top_mib is not None:
        out = [c for c in out if c <= top_mib] or [top_mib]
    return out[-MAX_CANDIDATES:]


def sweep_cost(ceilings: Sequence[float], probe_s: float, runs: int = CEILING_RUNS) -> dict:
    """What the sweep spends: probes and probe-seconds (the budget states it)."""
    probes = len(ceilings) * runs
    return {"ceilings_mib": list(ceilings), "runs": runs, "probes": probes,
            "probe_seconds": round(probes * probe_s, 3)}


@dataclass(frozen=True)
class AutotuneCeiling:
    """The decision: the ceiling to write, what an autotuned application gets under it."""

    autotune_max_mib: float
    otp_mbps: float  # the mean at that ceiling
    interval_mbps: tuple[float, float]  # where one fresh probe's goodput should land
    best_mbps: float
    best_ceiling_mib: float
    target_mbps: float
    means_mbps: dict[float, float] = field(default_factory=dict)
    runs: dict[float, int] = field(default_factory=dict)


def _pooled_sd(samples: Mapping[float, Sequence[float]]) -> tuple[float, int]:
    """The spread pooled over every point with two runs or more, and its degrees of freedom."""
    ss, dof = 0.0, 0
    for vals in samples.values():
        if len(vals) >= 2:
            m = sum(vals) / len(vals)
            ss += sum((v - m) ** 2 for v in vals)
            dof += len(vals) - 1
    return (math.sqrt(ss / dof), dof) if dof else (0.0, 0)


def decide(samples: Mapping[float, Sequence[float]], delta: float,
           confidence: float = CONFIDENCE) -> AutotuneCeiling | None:
    """The smallest ceiling within delta of the best autotuned one (`samples`: ceiling MiB ->
    goodputs of its probes; failed probes left out). None when nothing was measured."""
    if not 0 < delta < 1:
        raise ValueError(f"delta {delta}: must be in (0, 1)")
    points = {float(c): [float(v) for v in vals] for c, vals in samples.items() if vals}
    if not points:
        return None
    means = {c: sum(v) / len(v) for c, v in points.items()}
    best_c = max(sorted(means), key=lambda c: means[c])
    best = means[best_c]
    target = (1 - delta) * best
    sd, dof = _pooled_sd(points)
    t = float(stats.t.ppf(0.5 + confidence / 2, dof)) if dof else 0.0

    def lower(c: float) -> float:
        return means[c] if c == best_c else means[c] - t * sd / math.sqrt(len(points[c]))

    chosen = min(c for c in means if lower(c) >= target)
    n = len(points[chosen])
    half = t * sd * math.sqrt(1 / n + 1) if dof else 0.0
    mean = means[chosen]
    return AutotuneCeiling(
        autotune_max_mib=chosen, otp_mbps=mean, interval_mbps=(max(0.0, mean - half), mean + half),
        best_mbps=best, best_ceiling_mib=best_c, target_mbps=target, means_mbps=means,
        runs={c: len(v) for c, v in points.items()})

"""The autotuning ceiling: the smallest `tcp_rmem`/`tcp_wmem` maximum under which an application
that sets no socket buffer gets within delta of the best it gets autotuned.

The buffer sweep measures OBS with the buffers locked (SO_SNDBUF/SO_RCVBUF on both ends). Most
applications set none and are autotuned up to the host's ceiling, another regime: on SRL-HU a
pair of subflows carried 22.6 Mbit/s autotuned against 9.1 at a fixed 5.97 MiB. So the ceiling
an apply writes is measured in its own regime: probes that set no buffer, each under a
candidate ceiling written into the testbed namespaces' tcp_rmem/tcp_wmem
(`MeasurementRequest.autotune_max_bytes`).

Which ceilings: as the buffer sweep picks buffers, off the campaign's grid, by bisection. The
kernel doubles a locked buffer, so an autotuned socket under a ceiling of 2 x b may grow as far
as a locked b; the candidates are 2 x each grid buffer below the largest ceiling a host may be
given, and that largest one, the reference the others are judged against
(`candidate_ceilings`). The top is measured first, then the bisection asks for the middle of
the candidates not yet decided (`next_ceiling`): one that reaches the target moves the upper
end down, one that does not the lower end up. The verdicts are read again after every probe
(a point measured later can move the best, and so the target), so the bisection may visit more
points than a fixed one would. The cost is `CEILING_RUNS` probes per point: the plan states
1 + ceil(log2(candidates)) points before a probe runs (`planned_probes`), and grows by what
the sweep asks beyond it, never past every candidate.

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

from .student_t import t_critical

CEILING_RUNS = 2  # probes per candidate ceiling: one run has no spread of its own
CONFIDENCE = 0.9
MAX_CANDIDATES = 8  # the sweep's cost stays within a grid's worth of one arm's probes


def candidate_ceilings(grid_mib: Sequence[float], *, top_mib: float | None = None) -> list[float]:
    """The ceilings to sweep, in MiB, ascending: 2 x each grid buffer (what an autotuned socket
    needs to grow as far as a locked one), at most `top_mib` (the largest ceiling a host may
    be given, itself always a candidate: the reference the others are judged against), the
    largest `MAX_CANDIDATES` kept when there are more (the small end of a grid starves
    autotuning first, and the answer is near the locked OBS's double)."""
    out = sorted({round(2 * b, 6) for b in grid_mib if b > 0})
    if top_mib is None:
        return out[-MAX_CANDIDATES:]
    below = [c for c in out if c < top_mib][-(MAX_CANDIDATES - 1):]
    return [*below, top_mib]  # the top: what autotuning reaches with the most room


def planned_probes(n_candidates: int, runs: int = CEILING_RUNS) -> int:
    """The most probes the bisection over `n_candidates` ceilings (the top among them) takes."""
    if n_candidates <= 0:
        return 0
    return runs * (1 + math.ceil(math.log2(n_candidates)))


def sweep_cost(ceilings: Sequence[float], probe_s: float, runs: int = CEILING_RUNS) -> dict:
    """What the sweep spends at most: probes and probe-seconds (the budget states it)."""
    probes = planned_probes(len(ceilings), runs)
    return {"ceilings_mib": list(ceilings), "runs": runs, "probes": probes,
            "probe_seconds": round(probes * probe_s, 3)}


def next_ceiling(candidates: Sequence[float], samples: Mapping[float, Sequence[float]],
                 tried: Mapping[float, int], delta: float,
                 runs: int = CEILING_RUNS) -> float | None:
    """The ceiling to probe next (its runs not all tried), or None: the bisection is done.
    `samples`: ceiling -> goodputs of its ok probes; `tried`: ceiling -> probes run, failed
    ones too (a ceiling whose every probe failed does not reach the target)."""
    if not candidates:
        return None
    ordered = sorted(candidates)
    top = ordered[-1]
    if tried.get(top, 0) < runs:
        return top
    lo, hi = 0, len(ordered) - 1  # ordered[hi] reaches the target (the top: by definition)
    while lo < hi:
        mid = (lo + hi) // 2
        c = ordered[mid]
        if tried.get(c, 0) < runs:
            return c
        if reaches(samples, c, delta):
            hi = mid
        else:
            lo = mid + 1
    return None


def reaches(samples: Mapping[float, Sequence[float]], ceiling: float, delta: float) -> bool:
    """`ceiling`'s lower bound reaches (1 - delta) x the best mean measured (`decide`'s rule)."""
    if not samples.get(ceiling):
        return False
    got = decide(samples, delta)
    return got is not None and ceiling in got.reaching


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
    reaching: tuple[float, ...] = ()  # the ceilings whose lower bound reaches the target


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
    t = t_critical(confidence, dof) if dof else 0.0

    def lower(c: float) -> float:
        return means[c] if c == best_c else means[c] - t * sd / math.sqrt(len(points[c]))

    reaching = tuple(sorted(c for c in means if lower(c) >= target))
    chosen = reaching[0]
    n = len(points[chosen])
    half = t * sd * math.sqrt(1 / n + 1) if dof else 0.0
    mean = means[chosen]
    return AutotuneCeiling(
        autotune_max_mib=chosen, otp_mbps=mean, interval_mbps=(max(0.0, mean - half), mean + half),
        best_mbps=best, best_ceiling_mib=best_c, target_mbps=target, means_mbps=means,
        runs={c: len(v) for c, v in points.items()}, reaching=reaching)

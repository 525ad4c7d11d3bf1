"""What the measurements themselves say, beside the fitted curve (Eq. 7's samples, per arm).

A fitted curve interpolates; an answer must not promise more than was measured. Per (PM, CC) arm:
the mean goodput at each measured buffer, the smallest measured buffer whose mean reaches a
target, and the measured ceiling (the largest mean, with a noise margin) that caps OTP.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from .student_t import t_critical

DEFAULT_CONFIDENCE = 0.95
RELATIVE_TOLERANCE = 0.005  # 0.5 %: below the run-to-run spread of any real goodput measurement


@dataclass(frozen=True)
class BufferMean:
    bs_mib: float
    mean_mbps: float
    runs: int
    sd_mbps: float | None  # None with a single run


@dataclass(frozen=True)
class MeasuredCeiling:
    """The largest measured mean of an arm and how far above it a curve may go before it is
    claiming more than was measured: the t-based half-width of that mean's confidence interval,
    with the arm's pooled within-buffer spread (0 without replicates).
    """

    max_mean_mbps: float
    bs_mib: float
    noise_mbps: float

    @property
    def limit_mbps(self) -> float:
        """Above this a curve claims more than was measured. At least RELATIVE_TOLERANCE above the
        mean: a curve that meets an exactly flat plateau to 0.01 % is not a promise broken."""
        return self.max_mean_mbps + max(self.noise_mbps, RELATIVE_TOLERANCE * self.max_mean_mbps)


def buffer_means(points: Iterable[tuple[float, float]]) -> list[BufferMean]:
    """(bs_mib, tp_mbps) samples of one arm into one mean per measured buffer, ascending bs."""
    by_bs: dict[float, list[float]] = {}
    for bs, tp in points:
        by_bs.setdefault(float(bs), []).append(float(tp))
    if not by_bs:
        raise ValueError("points: no samples")
    out = []
    for bs in sorted(by_bs):
        values = by_bs[bs]
        n, mean = len(values), sum(values) / len(values)
        sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1)) if n > 1 else None
        out.append(BufferMean(bs, mean, n, sd))
    return out


def smallest_measured_buffer(
    points: Iterable[tuple[float, float]], target_mbps: float
) -> float | None:
    """The smallest measured buffer whose mean goodput reaches target_mbps, or None."""
    return next((m.bs_mib for m in buffer_means(points) if m.mean_mbps >= target_mbps), None)


def measured_ceiling(
    points: Iterable[tuple[float, float]], confidence: float = DEFAULT_CONFIDENCE
) -> MeasuredCeiling:
    means = buffer_means(points)
    top = max(means, key=lambda m: (m.mean_mbps, -m.bs_mib))
    # The arm's pooled within-buffer spread: with 2 runs per buffer, the top buffer's own
    # interval (t with 1 dof = 12.7) would excuse almost any overshoot.
    ss = sum((m.sd_mbps or 0.0) ** 2 * (m.runs - 1) for m in means)
    dof = sum(m.runs - 1 for m in means)
    if dof == 0:
        return MeasuredCeiling(top.mean_mbps, top.bs_mib, 0.0)
    sd = math.sqrt(ss / dof)
    half = t_critical(confidence, dof) * sd / math.sqrt(top.runs)
    return MeasuredCeiling(top.mean_mbps, top.bs_mib, half)

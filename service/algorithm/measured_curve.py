"""The measurements as a curve, for an arm whose fitted model misses what was measured.

Neither the paper's quadratic nor the saturating ramp can follow a curve that rises and then
falls (seen on benchmarks/scenarios/asymmetric.yaml: PCDC/bbr 8.29, 9.15, 5.59 Mbit/s at 0.78,
2.06, 5.47 MiB; the saturating fit's plateau came out at 7.64, below four measured means, so T*,
the target and OBS were all too low and the answer lost 21 % against the oracle). When a fit
misses the arm's best measured mean by more than both the noise and delta (`misses_best`), the
solver uses the measured means themselves: tp(bs) interpolates them linearly, the peak is the
largest mean, and the minimum buffer is the smallest *measured* buffer whose mean reaches the
target (no promise between points that were not measured).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from probes.vocabulary import PathManager

from .measured import MeasuredCeiling, buffer_means


@dataclass(frozen=True)
class MeasuredCurve:
    kind: ClassVar[str] = "measured"
    pm: PathManager
    cc: str
    bs_mib: tuple[float, ...]  # ascending
    mean_mbps: tuple[float, ...]
    same_as_fullmesh: bool = False
    #: per buffer what must reach a target for the buffer to (an adaptive campaign's lower
    #: bounds, `adaptive.lower_bounds`); None: the means
    reach_mbps: tuple[float, ...] | None = None

    @classmethod
    def from_points(cls, pm: PathManager, cc: str, points, same_as_fullmesh: bool,
                    lower_bounds: Mapping[float, float] | None = None) -> MeasuredCurve:
        means = buffer_means(points)
        reach = None if lower_bounds is None else tuple(
            lower_bounds.get(m.bs_mib, m.mean_mbps) for m in means)
        return cls(pm, cc, tuple(m.bs_mib for m in means), tuple(m.mean_mbps for m in means),
                   same_as_fullmesh, reach)

    @property
    def arm(self) -> tuple[str, str]:
        return (self.pm, self.cc)

    def tp(self, bs: float) -> float:
        return float(np.interp(bs, self.bs_mib, self.mean_mbps))

    def _within(self, lo: float, hi: float) -> list[tuple[float, float]]:
        return [(b, t) for b, t in zip(self.bs_mib, self.mean_mbps, strict=True) if lo <= b <= hi]

    def peak(self, lo: float, hi: float) -> tuple[float, float]:
        inside = self._within(lo, hi) or [(lo, self.tp(lo)), (hi, self.tp(hi))]
        return max(inside, key=lambda p: (p[1], -p[0]))

    def min_buffer(self, target: float, lo: float, hi: float) -> float | None:
        reach = self.reach_mbps or self.mean_mbps
        return next((b for b, r in zip(self.bs_mib, reach, strict=True)
                     if lo <= b <= hi and r >= target), None)


def misses_best(curve, ceiling: MeasuredCeiling, delta: float) -> bool:
    """The fitted curve, at the arm's best measured buffer, is below that mean by more than the
    mean's noise and more than delta of it: the fit does not describe the arm's best."""
    shortfall = ceiling.max_mean_mbps - curve.tp(ceiling.bs_mib)
    return shortfall > max(ceiling.noise_mbps, delta * ceiling.max_mean_mbps)

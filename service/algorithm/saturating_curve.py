"""A saturating buffer-to-throughput curve: a smooth minimum of a ramp and a plateau.

    tp(bs) = T * x / (1 + x^n)^(1/n),  x = bs / k

T is the plateau (Mbit/s), k the knee (MiB) where the ramp T*bs/k would meet the plateau, n > 0
the sharpness: n = 1 is Michaelis-Menten T*bs/(k + bs), n -> infinity is min(T, T*bs/k). This is
what a window-limited transfer does: throughput grows with the buffer until the buffer covers the
bandwidth-delay product, then stays. It rises monotonically and never overshoots T, unlike the
paper's quadratic, which must bend down again to fit a plateau.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from probes.vocabulary import PathManager

from .curve import Curve, normalize_cc, normalize_pm, tighten


def soft_min_tp(bs, plateau_mbps: float, knee_mib: float, sharpness: float):
    """tp for a float or numpy array; in log space so that x^n cannot overflow."""
    x = np.maximum(np.asarray(bs, dtype=float), 1e-300) / knee_mib
    log_x = np.log(x)
    value = plateau_mbps * np.exp(log_x - np.logaddexp(0.0, sharpness * log_x) / sharpness)
    return float(value) if np.ndim(value) == 0 else value


@dataclass(frozen=True)
class SaturatingCurve:
    kind: ClassVar[str] = "saturating"
    pm: PathManager
    cc: str
    plateau_mbps: float
    knee_mib: float
    sharpness: float
    same_as_fullmesh: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "pm", normalize_pm(self.pm))
        object.__setattr__(self, "cc", normalize_cc(self.cc))
        for name in ("plateau_mbps", "knee_mib", "sharpness"):
            value = getattr(self, name)
            if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
                raise ValueError(f"{name}: must be > 0, got {value!r} ({self.pm}/{self.cc})")

    @property
    def arm(self) -> tuple[str, str]:
        return (self.pm, self.cc)

    def tp(self, bs: float) -> float:
        return soft_min_tp(bs, self.plateau_mbps, self.knee_mib, self.sharpness)

    def peak(self, lo: float, hi: float) -> tuple[float, float]:
        """Monotone rising: the maximum on [lo, hi] is at hi."""
        return hi, self.tp(hi)

    def min_buffer(self, target: float, lo: float, hi: float) -> float | None:
        """Smallest bs in [lo, hi] with tp(bs) >= target, or None.

        Closed form: with r = target / T < 1, x = r / (1 - r^n)^(1/n), bs = k * x; then tightened.
        """
        if self.tp(lo) >= target:
            return lo
        if self.tp(hi) < target:
            return None
        r, n = target / self.plateau_mbps, self.sharpness
        below, above = lo, hi
        if r >= 1.0:  # tp(hi) == T in floating point: no closed form, bisection alone
            return tighten(self.tp, target, below, above)
        guess = self.knee_mib * r / (-math.expm1(n * math.log(r))) ** (1.0 / n)
        if lo < guess < hi:
            below, above = (guess, hi) if self.tp(guess) < target else (lo, guess)
        return tighten(self.tp, target, below, above)


AnyCurve = Curve | SaturatingCurve  # either kind a fit gives

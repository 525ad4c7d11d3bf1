"""The per-(PM, CC) buffer-to-throughput curve tp = a + b*bs + c*bs^2 and the names it carries.

Every curve kind (this quadratic, `saturating_curve.SaturatingCurve`) offers the same interface to
the solver: `tp(bs)`, `peak(lo, hi)`, `min_buffer(target, lo, hi)`, `arm`, `kind`,
`same_as_fullmesh`; `service.formats` writes every kind as JSON and reads it back.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

# Path-manager names are the project's vocabulary, defined once.
from probes.vocabulary import (  # noqa: F401 - re-exported for the algorithm's users
    CC_PATTERN,
    FULLMESH,
    PATH_MANAGERS,
    PCDC,
    PathManager,
    normalize_pm,
)

_CC_PATTERN = re.compile(CC_PATTERN)


def normalize_cc(name: str) -> str:
    """Congestion controls are printed as the kernel names them: lower case."""
    cc = str(name).strip().lower()
    if not _CC_PATTERN.fullmatch(cc):
        raise ValueError(f"invalid congestion control name {name!r}")
    return cc


def tighten(tp: Callable[[float], float], target: float, below: float, above: float) -> float:
    """Bisection on a rising stretch with tp(below) < target <= tp(above): the smallest float bs.

    Closed-form inverses are off by round-off; this makes tp(result) >= target hold exactly.
    """
    for _ in range(200):  # converges to float precision long before
        mid = 0.5 * (below + above)
        if mid <= below or mid >= above:
            break
        if tp(mid) >= target:
            above = mid
        else:
            below = mid
    return above


@dataclass(frozen=True)
class Curve:
    """The paper's quadratic (Table 4): tp = a + b*bs + c*bs^2 (Eq. 8, 13-15)."""

    kind: ClassVar[str] = "quadratic"
    pm: PathManager
    cc: str
    a: float
    b: float
    c: float
    # PCDC keeps every subflow for this CC: it then runs exactly FullMesh's subflows.
    same_as_fullmesh: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "pm", normalize_pm(self.pm))
        object.__setattr__(self, "cc", normalize_cc(self.cc))
        for field in ("a", "b", "c"):
            value = getattr(self, field)
            if not isinstance(value, int | float) or not math.isfinite(value):
                raise ValueError(
                    f"curve {self.pm}/{self.cc}: coefficient {field} must be finite, "
                    f"got {value!r}: the curve has no finite peak"
                )

    @property
    def arm(self) -> tuple[str, str]:
        return (self.pm, self.cc)

    def tp(self, bs: float) -> float:
        return self.a + self.b * bs + self.c * bs * bs

    def peak(self, lo: float, hi: float) -> tuple[float, float]:
        """(bs, tp) of the curve's maximum on [lo, hi]; the smallest bs if the maximum is flat."""
        candidates = [lo, hi]
        if self.c < 0:
            vertex = -self.b / (2.0 * self.c)
            if lo < vertex < hi:
                candidates.append(vertex)
        best = max(candidates, key=lambda x: (self.tp(x), -x))
        return best, self.tp(best)

    def min_buffer(self, target: float, lo: float, hi: float) -> float | None:
        """Smallest bs in [lo, hi] with tp(bs) >= target (Eq. 10-12), or None.

        Through the quadratic's inverse (its root on the rising part), then tightened.
        """
        if self.tp(lo) >= target:
            return lo
        peak_bs, peak_tp = self.peak(lo, hi)
        if peak_tp < target:
            return None
        # tp rises on [start, peak_bs]: for a convex curve only right of its vertex.
        start = max(lo, -self.b / (2 * self.c)) if self.c > 0 else lo
        guess = self._inverse(target, start, peak_bs)
        # The closed form may land a hair past the peak (it accepts roots within 1e-9 of the
        # interval): never past it, so the answer stays inside [lo, hi].
        above = peak_bs if guess is None else min(max(guess, start), peak_bs)
        below = start
        if self.tp(above) < target:
            below, above = above, peak_bs
        return tighten(self.tp, target, below, above)

    def _inverse(self, target: float, lo: float, hi: float) -> float | None:
        """The root of a + b*bs + c*bs^2 = target in [lo, hi], if the closed form finds one."""
        a, b, c = self.a - target, self.b, self.c
        if c == 0:
            roots = [-a / b] if b != 0 else []
        else:
            disc = b * b - 4 * a * c
            if disc < 0:
                return None
            sq = math.sqrt(disc)
            q = -0.5 * (b + math.copysign(sq, b))  # numerically stable pair of roots
            roots = [q / c] + ([a / q] if q != 0 else [])
        inside = [r for r in roots if lo - 1e-9 <= r <= hi + 1e-9]
        return min(inside) if inside else None

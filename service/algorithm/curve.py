"""The per-(PM, CC) buffer-to-throughput curve tp = a + b*bs + c*bs^2 and the names it carries."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

# Path-manager names are the project's vocabulary, defined once.
from probes.vocabulary import (  # noqa: F401 - re-exported for the algorithm's users
    CC_PATTERN,
    FULLMESH,
    PATH_MANAGERS,
    PCDC,
    normalize_pm,
)

_CC_PATTERN = re.compile(CC_PATTERN)


def normalize_cc(name: str) -> str:
    """Congestion controls are printed as the kernel names them: lower case."""
    cc = str(name).strip().lower()
    if not _CC_PATTERN.fullmatch(cc):
        raise ValueError(f"invalid congestion control name {name!r}")
    return cc


@dataclass(frozen=True)
class Curve:
    pm: str
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

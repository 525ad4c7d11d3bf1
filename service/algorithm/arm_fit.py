"""One (PM, CC) arm: its quality gate and, for the `auto` kind, quadratic vs saturating by AIC.

The gate is per arm (R^2 >= 0.90 and a buffer-effect p <= 0.05, the paper's thresholds): a PM whose
pooled R^2 is high because one CC's curve is steep can still hide arms where the buffer changed
nothing measurable. Model choice: AIC = n*ln(SSR/n) + 2p for Gaussian errors; both candidates have
p = 3, so the lower SSR wins, but the paper's quadratic is kept unless the saturating curve is
better by at least AIC_MARGIN (2, the usual "substantially better" threshold).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from probes.vocabulary import PathManager

R2_GATE = 0.90
P_GATE = 0.05
AIC_MARGIN = 2.0
ROUND_OFF = 1e-9  # relative size below which a residual is floating-point noise, not data


@dataclass(frozen=True)
class ArmFit:
    pm: PathManager
    cc: str
    model: str  # "paper" (pooled quadratic), "quadratic" (own quadratic) or "saturating"
    reason: str  # why this model (and not the other)
    n: int
    r2: float
    buffer_p_value: float | None  # "the buffer has no effect on this arm"
    gate_passed: bool
    aic_quadratic: float | None = None
    aic_saturating: float | None = None
    failures: list[str] = field(default_factory=list)  # why the gate failed, empty if it passed

    @property
    def name(self) -> str:
        return f"{self.pm}/{self.cc}"


def negligible(ss: float, y: np.ndarray) -> bool:
    """A sum of squares at round-off level for data of y's magnitude: numerically zero."""
    scale = float(np.max(np.abs(y))) if len(y) else 0.0
    return ss <= len(y) * (ROUND_OFF * max(scale, 1e-300)) ** 2


def r_squared(y: np.ndarray, ssr: float) -> float:
    """1 - SSR/SST; flat data (SST at round-off level) has nothing to explain: 0, not 1 or -3."""
    sst = float(np.sum((y - y.mean()) ** 2))
    return 0.0 if negligible(sst, y) else 1.0 - ssr / sst


def aic(ssr: float, n: int, n_params: int, y: np.ndarray) -> float:
    """Gaussian AIC up to a constant; an exact fit is floored at round-off, not -infinity."""
    floor = len(y) * (ROUND_OFF * max(float(np.max(np.abs(y))), 1e-300)) ** 2
    return n * math.log(max(ssr, floor) / n) + 2 * n_params


def buffer_effect_p(y: np.ndarray, ssr: float, n_params: int) -> float | None:
    """F-test of the arm's model against a constant (no buffer effect), df (p - 1, n - p).

    Exact for the quadratic (b = c = 0); for the saturating curve the constant is the limit of a
    knee at 0, so the test is the usual approximate one.
    """
    from scipy import stats

    n = len(y)
    sst = float(np.sum((y - y.mean()) ** 2))
    if negligible(sst, y):
        return 1.0  # flat data: no effect at all
    if n - n_params <= 0:
        return None
    if negligible(ssr, y):
        return 0.0  # exact, non-flat fit
    f = ((sst - ssr) / (n_params - 1)) / (ssr / (n - n_params))
    return float(stats.f.sf(max(f, 0.0), n_params - 1, n - n_params))


def gate(r2: float, buffer_p: float | None) -> list[str]:
    """The failures of the paper's quality gate for one arm (empty: passed)."""
    out = []
    if r2 < R2_GATE:
        out.append(f"R^2 {r2:.3f} < {R2_GATE}")
    if buffer_p is None:
        out.append("buffer effect untestable (no residual degrees of freedom)")
    elif buffer_p > P_GATE:
        out.append(f"no significant buffer effect (p = {buffer_p:.3g} > {P_GATE})")
    return out


def choose(aic_quadratic: float, aic_saturating: float | None) -> tuple[str, str]:
    """(model, reason): the saturating curve only when AIC says it is clearly better."""
    if aic_saturating is None:
        return "quadratic", "saturating model did not converge"
    gain = aic_quadratic - aic_saturating
    if gain >= AIC_MARGIN:
        return "saturating", f"AIC {gain:.1f} lower than the quadratic's"
    if gain > 0:
        return "quadratic", f"saturating AIC lower by only {gain:.1f} (< {AIC_MARGIN}): paper kept"
    return "quadratic", f"AIC {-gain:.1f} lower than the saturating curve's"

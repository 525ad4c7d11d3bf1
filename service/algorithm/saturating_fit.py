"""Least-squares fit of the saturating curve (saturating_curve.py) to one arm's samples.

scipy.optimize.curve_fit (trust-region reflective, bounded) from several starting points; the
best sum of squares wins. Standard errors come from the covariance curve_fit returns (the usual
linearised, asymptotic ones), p-values from a two-sided t-test on n - 3 degrees of freedom.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, replace

import numpy as np

from .saturating_curve import soft_min_tp
from .student_t import t_critical

N_PARAMS = 3
PARAM_NAMES = ("plateau_mbps", "knee_mib", "sharpness")
SHARPNESS_BOUNDS = (0.5, 50.0)


@dataclass(frozen=True)
class SaturatingFit:
    plateau_mbps: float
    knee_mib: float
    sharpness: float
    ssr: float
    p_values: dict[str, float | None]  # None: undefined (no residual dof or singular covariance)
    ci95: dict[str, tuple[float, float] | None]


def _starts(bs: np.ndarray, y: np.ndarray) -> list[tuple[float, float, float]]:
    """Robust starting points: the plateau from the largest bucket means, the knee where the
    means first reach 90 % of it, and a soft, a medium and a sharp corner."""
    levels = sorted({float(b) for b in bs})
    means = [float(np.mean(y[bs == b])) for b in levels]
    plateau = max(max(means), 1e-9)
    knee = next((b for b, m in zip(levels, means, strict=True) if m >= 0.9 * plateau), levels[-1])
    knees = {knee, levels[0], float(np.median(levels))}
    return [(plateau, k, n) for k in knees for n in (1.0, 4.0, 20.0)]


def fit_saturating(bs: np.ndarray, y: np.ndarray) -> SaturatingFit:
    """The best of the starts' least-squares fits; ValueError when none converged."""
    bs, y = np.asarray(bs, dtype=float), np.asarray(y, dtype=float)
    if bs.shape != y.shape or bs.ndim != 1:
        raise ValueError(f"saturating model: {bs.shape} buffers against {y.shape} goodputs")
    fit = _fit_samples(tuple(bs.tolist()), tuple(y.tolist()))
    # the cached fit is shared between callers: each gets dicts of its own
    return replace(fit, p_values=dict(fit.p_values), ci95=dict(fit.ci95))


@functools.lru_cache(maxsize=1024)
def _fit_samples(bs_values: tuple[float, ...], y_values: tuple[float, ...]) -> SaturatingFit:
    """`fit_saturating` of these samples, cached: a campaign refits every arm after each probe,
    and all arms but the probed one have the same samples as before (the fit is a pure function
    of them; its nine starts cost most of a flow's CPU)."""
    from scipy.optimize import curve_fit

    bs, y = np.array(bs_values, dtype=float), np.array(y_values, dtype=float)
    top = max(float(np.max(y)), 1e-9)
    lower = (1e-12, float(np.min(bs)) * 1e-3, SHARPNESS_BOUNDS[0])
    upper = (10.0 * top, float(np.max(bs)) * 100.0, SHARPNESS_BOUNDS[1])
    best = None
    for start in _starts(bs, y):
        p0 = np.clip(start, lower, upper)
        try:
            params, cov = curve_fit(
                soft_min_tp, bs, y, p0=p0, bounds=(lower, upper), method="trf", maxfev=5000
            )
        except (RuntimeError, ValueError):
            continue  # this start did not converge; the others may
        ssr = float(np.sum((y - soft_min_tp(bs, *params)) ** 2))
        if best is None or ssr < best[2]:
            best = (params, cov, ssr)
    if best is None:
        raise ValueError("saturating model: no starting point converged")
    params, cov, ssr = best
    p_values, cis = _inference(params, cov, len(y))
    return SaturatingFit(*(float(v) for v in params), ssr, p_values, cis)


def _inference(params, cov, n: int):
    from scipy import stats

    dof = n - N_PARAMS
    p_values: dict[str, float | None] = {}
    cis: dict[str, tuple[float, float] | None] = {}
    for j, name in enumerate(PARAM_NAMES):
        var = float(cov[j, j]) if cov is not None else math.nan
        if dof <= 0 or not math.isfinite(var) or var <= 0:
            p_values[name], cis[name] = None, None
            continue
        se = math.sqrt(var)
        p_values[name] = float(2 * stats.t.sf(abs(params[j]) / se, dof))
        half = t_critical(0.95, dof) * se
        cis[name] = (float(params[j] - half), float(params[j] + half))
    return p_values, cis

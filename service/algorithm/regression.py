"""f5 (Eq. 8): buffer-to-throughput regression per path manager.

Four model kinds:

* ``paper``: the paper's pooled model (Eq. 13-15). One fit per PM over all its CCs, features
  [bs, CC_1..CC_k] (CC one-hot) expanded by scikit-learn's PolynomialFeatures(degree=2) and fitted
  by LinearRegression. The design is rank-deficient (CC_j == CC_j^2, CC_j*CC_l == 0, sum CC_j == 1),
  so least squares returns the minimum-norm coefficients, which is why the paper's CC_j and CC_j^2
  coefficients are equal. Per CC this is tp = a_j + b_j*bs + c*bs^2 with one curvature c per PM.
* ``per-arm``: an independent quadratic per (PM, CC).
* ``saturating``: per (PM, CC) the saturating curve of saturating_curve.py (a smooth minimum of a
  ramp and a plateau), fitted by scipy's curve_fit.
* ``auto``: per (PM, CC) the quadratic or the saturating curve, whichever AIC prefers (the
  quadratic unless the saturating one is better by 2 or more); each arm reports both AICs, its
  model and why.

p-values are ordinary least-squares t-tests. For the paper's own coefficients the covariance uses
the pseudo-inverse (the design is rank-deficient); the identifiable per-curve coefficients
(a_j, b_j, c) and the joint test "buffer size has no effect" come from statsmodels on an equivalent
full-rank design. The quality gate is the paper's, R^2 >= 0.90 and p <= 0.05 with p a
buffer-effect test (the paper reads its bs p-value as "buffer size does significantly affect
throughput"), applied per (PM, CC) arm (arm_fit.py): a Fit passes only if every arm passes, and
lists the arms that fail. Individually insignificant coefficients are listed as warnings.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from probes.vocabulary import PathManager

from . import arm_fit
from .arm_fit import P_GATE, R2_GATE, ArmFit, negligible
from .curve import Curve, normalize_cc, normalize_pm
from .saturating_curve import SaturatingCurve
from .saturating_fit import PARAM_NAMES, fit_saturating

# Kinds whose curves are all quadratics (a, b, c): what the service stores today.
MODEL_KINDS = ("paper", "per-arm")
# Every kind fit() takes; "saturating" and "auto" may return SaturatingCurve objects, which are
# stored with formats.curve_to_dict and read back with formats.curve_from_dict.
ALL_MODEL_KINDS = (*MODEL_KINDS, "saturating", "auto")
__all__ = [
    "ALL_MODEL_KINDS",
    "MODEL_KINDS",
    "P_GATE",
    "R2_GATE",
    "ArmFit",
    "Coefficient",
    "Fit",
    "Sample",
    "fit",
]


@dataclass(frozen=True)
class Sample:
    pm: PathManager
    cc: str
    bs_mib: float
    tp_mbps: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "pm", normalize_pm(self.pm))
        object.__setattr__(self, "cc", normalize_cc(self.cc))
        for name in ("bs_mib", "tp_mbps"):
            value = getattr(self, name)
            if not isinstance(value, int | float) or not math.isfinite(value):
                raise ValueError(f"{name}: must be a finite number, got {value!r}")
        if self.bs_mib <= 0:
            raise ValueError(f"bs_mib: must be positive, got {self.bs_mib!r}")
        if self.tp_mbps < 0:
            raise ValueError(f"tp_mbps: must be >= 0, got {self.tp_mbps!r}")


@dataclass(frozen=True)
class Coefficient:
    name: str
    value: float
    p_value: float | None  # None where the t-test is undefined (no residual degrees of freedom)


@dataclass(frozen=True)
class Fit:
    pm: PathManager
    model: str
    curves: list[Curve | SaturatingCurve]
    n: int
    r2: float
    adj_r2: float
    coefficients: list[Coefficient]  # the paper's parametrisation (or a, b, c per arm)
    curve_p_values: dict[str, dict[str, float | None]]  # cc -> {"a", "b", "c"}
    buffer_p_value: float | None  # joint F-test: every buffer term is zero
    gate_passed: bool  # every arm passes (R^2 >= 0.90 and buffer-effect p <= 0.05)
    warnings: list[str] = field(default_factory=list)
    arms: list[ArmFit] = field(default_factory=list)

    @property
    def failing_arms(self) -> list[str]:
        """'PM/cc' of every arm that fails the gate; ArmFit.failures says why."""
        return [arm.name for arm in self.arms if not arm.gate_passed]

    @property
    def max_p_value(self) -> float | None:
        ps = [c.p_value for c in self.coefficients if c.p_value is not None]
        return max(ps) if ps else None


def fit(
    samples: Iterable[Sample],
    model: str = "paper",
    same_as_fullmesh: Iterable[str] = (),
) -> list[Fit]:
    """One Fit per path manager present in the samples, in PATH_MANAGERS order of appearance."""
    if model not in ALL_MODEL_KINDS:
        raise ValueError(f"model: must be one of {', '.join(ALL_MODEL_KINDS)}, got {model!r}")
    samples = list(samples)
    if not samples:
        raise ValueError("samples: no data")
    same = {normalize_cc(cc) for cc in same_as_fullmesh}
    by_pm: dict[str, list[Sample]] = {}
    for s in samples:
        by_pm.setdefault(s.pm, []).append(s)
    if model == "paper":
        return [_fit_paper(pm, rows, same) for pm, rows in by_pm.items()]
    return [_fit_per_arm(pm, rows, same, model) for pm, rows in by_pm.items()]


def _cc_order(rows: Sequence[Sample]) -> list[str]:
    order: list[str] = []
    for s in rows:
        if s.cc not in order:
            order.append(s.cc)
    return order


def _check_support(pm: PathManager, rows: Sequence[Sample], ccs: Sequence[str]) -> None:
    """A quadratic per CC needs at least three distinct buffer sizes for that CC."""
    for cc in ccs:
        distinct = {s.bs_mib for s in rows if s.cc == cc}
        if len(distinct) < 3:
            raise ValueError(
                f"samples: {pm}/{cc} has {len(distinct)} distinct buffer sizes, a quadratic needs 3"
            )


def _r2(y: np.ndarray, fitted: np.ndarray, n_params: int) -> tuple[float, float]:
    ss_res = float(np.sum((y - fitted) ** 2))
    ss_tot = float(np.sum((y - y.mean()) ** 2))
    # Flat data: nothing to explain. Round-off residuals must not become R^2 = 1 or -3; a buffer
    # that changes nothing explains 0 % of the (absent) variation.
    r2 = 0.0 if negligible(ss_tot, y) else 1.0 - ss_res / ss_tot
    dof = len(y) - n_params
    adj = 1.0 - (1.0 - r2) * (len(y) - 1) / dof if dof > 0 else float("nan")
    return r2, adj


def _finite_or_none(p: float) -> float | None:
    return float(p) if math.isfinite(p) else None


def _fit_paper(pm: PathManager, rows: Sequence[Sample], same: set[str]) -> Fit:
    # Imported here: scikit-learn and statsmodels take about a second to import, which every
    # `mpcoa` start (and every API worker) would otherwise pay even when it fits nothing.
    from sklearn.linear_model import LinearRegression
    from sklearn.preprocessing import PolynomialFeatures
    from statsmodels.regression.linear_model import OLS

    ccs = _cc_order(rows)
    _check_support(pm, rows, ccs)
    bs = np.array([s.bs_mib for s in rows])
    y = np.array([s.tp_mbps for s in rows])
    onehot = np.array([[1.0 if s.cc == cc else 0.0 for cc in ccs] for s in rows])
    k = len(ccs)

    poly = PolynomialFeatures(degree=2, include_bias=False)
    x = poly.fit_transform(np.column_stack([bs, onehot]))
    names = list(poly.get_feature_names_out(["bs", *[f"CC_{cc}" for cc in ccs]]))
    reg = LinearRegression().fit(x, y)
    coef = dict(zip(names, reg.coef_, strict=True))
    curves = [
        Curve(
            pm=pm,
            cc=cc,
            a=float(reg.intercept_ + coef[f"CC_{cc}"] + coef[f"CC_{cc}^2"]),
            b=float(coef["bs"] + coef[f"bs CC_{cc}"]),
            c=float(coef["bs^2"]),
            same_as_fullmesh=cc in same,
        )
        for cc in ccs
    ]

    # Identifiable reparametrisation, same column space: [CC_j, bs*CC_j, bs^2] with no intercept.
    z = np.column_stack([onehot, onehot * bs[:, None], bs**2])
    ols = OLS(y, z).fit()
    n_params = 2 * k + 1
    r2, adj = _r2(y, ols.fittedvalues, n_params)
    buffer_p = _buffer_test(ols, list(range(k, 2 * k + 1)))
    curve_p = {
        cc: {
            "a": _finite_or_none(ols.pvalues[j]),
            "b": _finite_or_none(ols.pvalues[k + j]),
            "c": _finite_or_none(ols.pvalues[2 * k]),
        }
        for j, cc in enumerate(ccs)
    }
    coefficients = [Coefficient("intercept", float(reg.intercept_), None)] + [
        Coefficient(name, float(value), None) for name, value in coef.items()
    ]
    coefficients = _paper_p_values(x, y, reg, coefficients)
    arms = [
        _paper_arm(pm, cc, y[onehot[:, j] == 1], ols.fittedvalues[onehot[:, j] == 1])
        for j, cc in enumerate(ccs)
    ]
    return Fit(
        pm=pm,
        model="paper",
        curves=curves,
        n=len(y),
        r2=r2,
        adj_r2=adj,
        coefficients=coefficients,
        curve_p_values=curve_p,
        buffer_p_value=buffer_p,
        gate_passed=all(arm.gate_passed for arm in arms),
        warnings=_warnings(pm, curve_p),
        arms=arms,
    )


def _paper_arm(pm: PathManager, cc: str, y: np.ndarray, fitted: np.ndarray) -> ArmFit:
    """One CC's share of the pooled fit: its own R^2 and its curve against a constant."""
    ssr = float(np.sum((y - fitted) ** 2))
    r2 = arm_fit.r_squared(y, ssr)
    p = arm_fit.buffer_effect_p(y, ssr, 3)
    failures = arm_fit.gate(r2, p)
    aic_q = arm_fit.aic(ssr, len(y), 3, y)
    return ArmFit(
        pm,
        cc,
        "paper",
        "paper pooled model (Eq. 13-15)",
        len(y),
        r2,
        p,
        not failures,
        aic_quadratic=aic_q,
        failures=failures,
    )


def _paper_p_values(
    x: np.ndarray, y: np.ndarray, reg, coefficients: list[Coefficient]
) -> list[Coefficient]:
    """t-tests of the minimum-norm coefficients, covariance from the pseudo-inverse.

    For a full-rank design this is the ordinary OLS t-test. Coefficients of all-zero columns
    (CC_j * CC_l) are exactly 0 and get no p-value.
    """
    from scipy import stats

    n = len(y)
    mean = x.mean(axis=0)
    xc = x - mean
    rank = np.linalg.matrix_rank(xc)
    dof = n - rank - 1
    if dof <= 0:
        return coefficients
    resid = y - reg.predict(x)
    sigma2 = float(resid @ resid) / dof
    cov = sigma2 * np.linalg.pinv(xc.T @ xc)
    se = np.sqrt(np.clip(np.diag(cov), 0, None))
    intercept_se = math.sqrt(max(sigma2 / n + float(mean @ cov @ mean), 0.0))
    ses = [intercept_se, *se]
    out = []
    for c, s in zip(coefficients, ses, strict=True):
        if s > 0:
            p = float(2 * stats.t.sf(abs(c.value) / s, dof))  # two-sided t-test
        elif sigma2 == 0 and c.value != 0:
            p = 0.0  # an exact fit
        else:
            p = None
        out.append(Coefficient(c.name, c.value, p))
    return out


def _buffer_test(ols, columns: list[int]) -> float | None:
    """p-value of the joint F-test that every buffer term (bs, bs^2 and interactions) is zero."""
    if ols.df_resid <= 0:
        return None
    restriction = np.zeros((len(columns), len(ols.params)))
    for row, col in enumerate(columns):
        restriction[row, col] = 1.0
    y = np.asarray(ols.model.endog)
    if negligible(float(np.sum((y - y.mean()) ** 2)), y):
        return 1.0  # flat data: no buffer effect (the F statistic is round-off over round-off)
    if negligible(float(ols.ssr), y):
        return 0.0  # an exact, non-flat fit: the buffer terms explain everything
    return _finite_or_none(float(ols.f_test(restriction).pvalue))


def _warnings(pm: PathManager, curve_p: dict[str, dict[str, float | None]]) -> list[str]:
    out = []
    for cc, ps in curve_p.items():
        for name, p in ps.items():
            if p is None or p > P_GATE:
                shown = "undefined" if p is None else f"{p:.3g}"
                out.append(f"{pm}/{cc}: coefficient {name} not significant (p = {shown})")
    return out


def _fit_per_arm(pm: PathManager, rows: Sequence[Sample], same: set[str], model: str) -> Fit:
    """per-arm, saturating or auto: every (PM, CC) arm fitted on its own."""
    ccs = _cc_order(rows)
    _check_support(pm, rows, ccs)
    curves, coefficients, curve_p, arms = [], [], {}, []
    y_all, fitted_all = [], []
    for cc in ccs:
        bs = np.array([s.bs_mib for s in rows if s.cc == cc])
        y = np.array([s.tp_mbps for s in rows if s.cc == cc])
        one = _one_arm(pm, cc, bs, y, model, cc in same)
        curves.append(one.curve)
        coefficients += one.coefficients
        curve_p[cc] = one.p_values
        arms.append(one.arm)
        y_all.append(y)
        fitted_all.append(one.curve_tp(bs))
    y = np.concatenate(y_all)
    r2, adj = _r2(y, np.concatenate(fitted_all), 3 * len(ccs))
    # Every arm must show a buffer effect for the PM's gate; report the worst.
    buffer_ps = [arm.buffer_p_value for arm in arms]
    buffer_p = None if any(p is None for p in buffer_ps) else max(buffer_ps)
    return Fit(
        pm=pm,
        model=model,
        curves=curves,
        n=len(y),
        r2=r2,
        adj_r2=adj,
        coefficients=coefficients,
        curve_p_values=curve_p,
        buffer_p_value=buffer_p,
        gate_passed=all(arm.gate_passed for arm in arms),
        warnings=_warnings(pm, curve_p),
        arms=arms,
    )


@dataclass(frozen=True)
class _OneArm:
    curve: Curve | SaturatingCurve
    coefficients: list[Coefficient]
    p_values: dict[str, float | None]
    arm: ArmFit

    def curve_tp(self, bs: np.ndarray) -> np.ndarray:
        return np.array([self.curve.tp(float(b)) for b in bs])


def _one_arm(pm: PathManager, cc: str, bs: np.ndarray, y: np.ndarray, model: str,
             same: bool) -> _OneArm:
    from statsmodels.regression.linear_model import OLS  # see _fit_paper

    ols = OLS(y, np.column_stack([np.ones_like(bs), bs, bs**2])).fit()
    ssr_q = float(np.sum((y - ols.fittedvalues) ** 2))
    aic_q = arm_fit.aic(ssr_q, len(y), 3, y)
    sat, aic_s = None, None
    if model in ("saturating", "auto"):
        try:
            sat = fit_saturating(bs, y)
            aic_s = arm_fit.aic(sat.ssr, len(y), 3, y)
        except ValueError:
            if model == "saturating":
                raise
    if model == "per-arm":
        chosen, reason = "quadratic", "per-arm quadratic requested"
    elif model == "saturating":
        chosen, reason = "saturating", "saturating model requested"
    else:
        chosen, reason = arm_fit.choose(aic_q, aic_s)
    if chosen == "quadratic":
        a, b, c = (float(v) for v in ols.params)
        curve = Curve(pm=pm, cc=cc, a=a, b=b, c=c, same_as_fullmesh=same)
        ps = dict(zip("abc", (_finite_or_none(p) for p in ols.pvalues), strict=True))
        values, ssr = {"a": a, "b": b, "c": c}, ssr_q
    else:
        curve = SaturatingCurve(pm, cc, sat.plateau_mbps, sat.knee_mib, sat.sharpness, same)
        ps = dict(sat.p_values)
        values = {name: getattr(sat, name) for name in PARAM_NAMES}
        ssr = sat.ssr
    r2 = arm_fit.r_squared(y, ssr)
    p = arm_fit.buffer_effect_p(y, ssr, 3)
    failures = arm_fit.gate(r2, p)
    arm = ArmFit(pm, cc, chosen, reason, len(y), r2, p, not failures, aic_q, aic_s, failures)
    coefficients = [Coefficient(f"{cc}:{name}", v, ps[name]) for name, v in values.items()]
    return _OneArm(curve, coefficients, ps, arm)

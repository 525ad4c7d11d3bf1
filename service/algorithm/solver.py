"""Eq. 9-12: the delta-relaxed minimum buffer, in the reading that reproduces Table 5.

T* is the largest throughput any (PM, CC) curve reaches on [bs_min, bs_max]; every arm's obs is
the smallest buffer at which its curve reaches (1 - delta) * T*, solved on the continuous interval
through the curve's inverse; OBS is the smallest obs. Ties (obs within 0.01 MiB) prefer FullMesh
over a PCDC arm that runs the very same subflows, then the higher tp(OBS).

With the measured samples (`measured=`), an arm whose fit misses its own best measured mean (by
more than noise and delta) answers from its measured means (`measured_curve.py`, flagged
`fit_missed_measurements:`), and an answer also says what the measurements support: each
arm's smallest *measured* buffer whose mean reaches the target, and no promise above what was
measured: an arm whose fitted peak exceeds its largest measured mean beyond noise enters T* with
that measured mean, and an OTP above the chosen arm's measured ceiling is capped to it and
flagged `otp_capped_to_measured`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol

from probes.vocabulary import PathManager

from .curve import FULLMESH, PCDC, normalize_cc, normalize_pm
from .measured import MeasuredCeiling, measured_ceiling, smallest_measured_buffer
from .measured_curve import MeasuredCurve, misses_best
from .saturating_curve import AnyCurve

DEFAULT_DELTA = 0.07
DEFAULT_BS_MIN_MIB = 0.5
DEFAULT_BS_MAX_MIB = 30.0
TIE_MIB = 0.01
OTP_CAPPED = "otp_capped_to_measured"
TP_MAX_CAPPED = "tp_max_capped_to_measured"
OBS_NOT_MEASURED = "target_not_reached_by_measurements"
FIT_MISSED = "fit_missed_measurements"


class MeasuredSample(Protocol):
    """One measured run: regression.Sample or anything with these four attributes."""

    pm: PathManager
    cc: str
    bs_mib: float
    tp_mbps: float


@dataclass(frozen=True)
class ArmResult:
    pm: PathManager
    cc: str
    peak_bs_mib: float
    peak_tp_mbps: float
    obs_mib: float | None  # None: this arm never reaches the target on the interval
    tp_at_obs_mbps: float | None
    same_as_fullmesh: bool
    kind: str = "quadratic"
    fitted_peak_tp_mbps: float | None = None  # the curve's own peak; peak_tp_mbps may be capped
    measured_obs_mib: float | None = None  # smallest measured buffer whose mean reaches the target
    measured_max_mbps: float | None = None  # largest measured mean of this arm
    measured_noise_mbps: float | None = None  # CI half-width of that mean


@dataclass(frozen=True)
class SolverAnswer:
    opm: PathManager
    occ: str
    obs_mib: float
    otp_mbps: float
    tp_max_mbps: float
    tp_max_bs_mib: float
    tp_max_pm: PathManager
    tp_max_cc: str
    target_mbps: float
    delta: float
    bs_min_mib: float
    bs_max_mib: float
    arms: list[ArmResult]
    otp_fitted_mbps: float | None = None  # tp(OBS) of the fitted curve, before any cap
    measured_obs_mib: float | None = None  # the chosen arm's smallest measured buffer reaching it
    otp_capped_to_measured: bool = False
    flags: list[str] = field(default_factory=list)


def check_bounds(delta: float, bs_min: float, bs_max: float) -> None:
    if not (isinstance(delta, int | float) and math.isfinite(delta) and 0 <= delta < 1):
        raise ValueError(f"delta: must be in [0, 1), got {delta!r}")
    for name, value in (("bs_min_mib", bs_min), ("bs_max_mib", bs_max)):
        if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
            raise ValueError(f"{name}: must be a positive number of MiB, got {value!r}")
    if bs_min >= bs_max:
        raise ValueError(f"bs_min_mib: must be below bs_max_mib ({bs_min!r} >= {bs_max!r})")


def min_buffer(curve: AnyCurve, target: float, lo: float, hi: float) -> float | None:
    """Smallest bs in [lo, hi] with curve.tp(bs) >= target, or None (any curve kind)."""
    return curve.min_buffer(target, lo, hi)


def choose_among_tied(tied: list[ArmResult]) -> ArmResult:
    """Spec step 7's tie rule: FullMesh beats a PCDC arm of the same CC whose SP* = SP.

    Only that FullMesh arm shadows it (the two run the very same subflows, Section 5.3); against any
    other arm a PCDC arm with SP* = SP competes like every arm: higher tp(OBS), then smaller obs.
    """
    fullmesh_ccs = {arm.cc for arm in tied if arm.pm == FULLMESH}
    contenders = [
        arm
        for arm in tied
        if not (arm.pm == PCDC and arm.same_as_fullmesh and arm.cc in fullmesh_ccs)
    ]
    return min(contenders, key=lambda arm: (-arm.tp_at_obs_mbps, arm.obs_mib))


def _measured_by_arm(measured: Iterable[MeasuredSample] | None) -> dict:
    points: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for row in measured or ():
        arm = (normalize_pm(row.pm), normalize_cc(row.cc))
        points.setdefault(arm, []).append((float(row.bs_mib), float(row.tp_mbps)))
    return points


def _peak_used(fitted: tuple[float, float], ceiling: MeasuredCeiling | None) -> tuple[float, float]:
    """The fitted peak, or the measured maximum when the curve overshoots it beyond noise."""
    if ceiling is not None and fitted[1] > ceiling.limit_mbps:
        return ceiling.bs_mib, ceiling.max_mean_mbps
    return fitted


def _check_curves(curves: list) -> None:
    if not curves:
        raise ValueError("curves: at least one curve is needed")
    seen: set[tuple[str, str]] = set()
    for curve in curves:
        if curve.arm in seen:
            raise ValueError(f"curves: {curve.pm}/{curve.cc} appears twice")
        seen.add(curve.arm)


def solve(
    curves: Iterable[AnyCurve],
    delta: float = DEFAULT_DELTA,
    bs_min: float = DEFAULT_BS_MIN_MIB,
    bs_max: float = DEFAULT_BS_MAX_MIB,
    measured: Iterable[MeasuredSample] | None = None,
) -> SolverAnswer:
    """OOPS = [OTP, OBS, OCC, OPM] from the fitted curves (Eq. 9-12, spec step 7).

    curves: any kind (Curve, SaturatingCurve). measured: the samples the curves were fitted on;
    optional, and without them the answer is the paper's (Table 5).
    """
    check_bounds(delta, bs_min, bs_max)
    curves = list(curves)
    _check_curves(curves)
    points = _measured_by_arm(measured)
    ceilings = {arm: measured_ceiling(pts) for arm, pts in points.items()}
    curves, missed = _replace_missed_fits(curves, points, ceilings, delta)
    fitted = {curve.arm: curve.peak(bs_min, bs_max) for curve in curves}
    peaks = {arm: _peak_used(fitted[arm], ceilings.get(arm)) for arm in fitted}
    best_curve = max(curves, key=lambda cv: (peaks[cv.arm][1], -peaks[cv.arm][0]))
    tp_max_bs, tp_max = peaks[best_curve.arm]
    if tp_max <= 0:
        raise ValueError("curves: no curve reaches a positive throughput on the buffer interval")
    target = (1.0 - delta) * tp_max

    arms = [
        _arm_result(
            curve,
            target,
            (bs_min, bs_max),
            peaks[curve.arm],
            fitted[curve.arm][1],
            points.get(curve.arm),
            ceilings.get(curve.arm),
        )
        for curve in curves
    ]
    reaching = [arm for arm in arms if arm.obs_mib is not None]
    # The arm that defines T* reaches the target (its curve reaches its peak, or overshoots the
    # capped peak), so `reaching` is never empty.
    smallest = min(arm.obs_mib for arm in reaching)
    tied = [arm for arm in reaching if arm.obs_mib <= smallest + TIE_MIB + 1e-12]
    chosen = choose_among_tied(tied)
    otp, flags = _otp_and_flags(chosen, ceilings.get((chosen.pm, chosen.cc)), points, arms)
    if missed:
        flags.append(f"{FIT_MISSED}:" + ",".join(f"{pm}/{cc}" for pm, cc in missed))
    return SolverAnswer(
        opm=chosen.pm,
        occ=chosen.cc,
        obs_mib=chosen.obs_mib,
        otp_mbps=otp,
        tp_max_mbps=tp_max,
        tp_max_bs_mib=tp_max_bs,
        tp_max_pm=best_curve.pm,
        tp_max_cc=best_curve.cc,
        target_mbps=target,
        delta=delta,
        bs_min_mib=bs_min,
        bs_max_mib=bs_max,
        arms=arms,
        otp_fitted_mbps=chosen.tp_at_obs_mbps,
        measured_obs_mib=chosen.measured_obs_mib,
        otp_capped_to_measured=OTP_CAPPED in flags,
        flags=flags,
    )


def _replace_missed_fits(curves: list, points: dict, ceilings: dict, delta: float):
    """Every arm whose fit misses its best measured mean answers from its measured means."""
    out, missed = [], []
    for curve in curves:
        ceiling = ceilings.get(curve.arm)
        if ceiling is not None and len(points[curve.arm]) >= 1 and misses_best(
            curve, ceiling, delta
        ):
            curve = MeasuredCurve.from_points(
                curve.pm, curve.cc, points[curve.arm], curve.same_as_fullmesh
            )
            missed.append(curve.arm)
        out.append(curve)
    return out, missed


def _arm_result(
    curve: AnyCurve,
    target: float,
    bounds: tuple[float, float],
    peak: tuple[float, float],
    fitted_peak_tp: float,
    points: list[tuple[float, float]] | None,
    ceiling: MeasuredCeiling | None,
) -> ArmResult:
    obs = curve.min_buffer(target, *bounds)
    return ArmResult(
        pm=curve.pm,
        cc=curve.cc,
        peak_bs_mib=peak[0],
        peak_tp_mbps=peak[1],
        obs_mib=obs,
        tp_at_obs_mbps=None if obs is None else curve.tp(obs),
        same_as_fullmesh=curve.same_as_fullmesh,
        kind=curve.kind,
        fitted_peak_tp_mbps=fitted_peak_tp,
        measured_obs_mib=None if points is None else smallest_measured_buffer(points, target),
        measured_max_mbps=None if ceiling is None else ceiling.max_mean_mbps,
        measured_noise_mbps=None if ceiling is None else ceiling.noise_mbps,
    )


def _otp_and_flags(
    chosen: ArmResult, ceiling: MeasuredCeiling | None, points: dict, arms: list[ArmResult]
) -> tuple[float, list[str]]:
    """OTP = tp(OBS), capped to the chosen arm's measured maximum when it promises more."""
    flags = []
    if any(arm.peak_tp_mbps != arm.fitted_peak_tp_mbps for arm in arms):
        flags.append(TP_MAX_CAPPED)
    otp = chosen.tp_at_obs_mbps
    if ceiling is not None and otp > ceiling.limit_mbps:
        otp = ceiling.max_mean_mbps
        flags.append(OTP_CAPPED)
    if (chosen.pm, chosen.cc) in points and chosen.measured_obs_mib is None:
        flags.append(OBS_NOT_MEASURED)
    return otp, flags

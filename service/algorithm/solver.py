"""Eq. 9-12: the delta-relaxed minimum buffer, in the reading that reproduces Table 5.

T* is the largest throughput any (PM, CC) curve reaches on [bs_min, bs_max]; every arm's obs is
the smallest buffer at which its curve reaches (1 - delta) * T*, solved on the continuous interval
through the curve's inverse; OBS is the smallest obs. Ties (obs within 0.01 MiB) prefer FullMesh
over a PCDC arm that runs the very same subflows, then the higher tp(OBS).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass

from .curve import FULLMESH, PCDC, Curve

DEFAULT_DELTA = 0.07
DEFAULT_BS_MIN_MIB = 0.5
DEFAULT_BS_MAX_MIB = 30.0
TIE_MIB = 0.01


@dataclass(frozen=True)
class ArmResult:
    pm: str
    cc: str
    peak_bs_mib: float
    peak_tp_mbps: float
    obs_mib: float | None  # None: this arm never reaches the target on the interval
    tp_at_obs_mbps: float | None
    same_as_fullmesh: bool


@dataclass(frozen=True)
class Solution:
    opm: str
    occ: str
    obs_mib: float
    otp_mbps: float
    tp_max_mbps: float
    tp_max_bs_mib: float
    tp_max_pm: str
    tp_max_cc: str
    target_mbps: float
    delta: float
    bs_min_mib: float
    bs_max_mib: float
    arms: list[ArmResult]

    def to_dict(self) -> dict:
        return asdict(self)


def check_bounds(delta: float, bs_min: float, bs_max: float) -> None:
    if not (isinstance(delta, int | float) and math.isfinite(delta) and 0 <= delta < 1):
        raise ValueError(f"delta: must be in [0, 1), got {delta!r}")
    for name, value in (("bs_min_mib", bs_min), ("bs_max_mib", bs_max)):
        if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
            raise ValueError(f"{name}: must be a positive number of MiB, got {value!r}")
    if bs_min >= bs_max:
        raise ValueError(f"bs_min_mib: must be below bs_max_mib ({bs_min!r} >= {bs_max!r})")


def min_buffer(curve: Curve, target: float, lo: float, hi: float) -> float | None:
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


def solve(
    curves: Iterable[Curve],
    delta: float = DEFAULT_DELTA,
    bs_min: float = DEFAULT_BS_MIN_MIB,
    bs_max: float = DEFAULT_BS_MAX_MIB,
) -> Solution:
    """OOPS = [OTP, OBS, OCC, OPM] from the fitted curves (Eq. 9-12, spec step 7)."""
    check_bounds(delta, bs_min, bs_max)
    curves = list(curves)
    if not curves:
        raise ValueError("curves: at least one curve is needed")
    seen: set[tuple[str, str]] = set()
    for curve in curves:
        if curve.arm in seen:
            raise ValueError(f"curves: {curve.pm}/{curve.cc} appears twice")
        seen.add(curve.arm)

    peaks = {curve.arm: curve.peak(bs_min, bs_max) for curve in curves}
    best_curve = max(curves, key=lambda cv: (peaks[cv.arm][1], -peaks[cv.arm][0]))
    tp_max_bs, tp_max = peaks[best_curve.arm]
    if tp_max <= 0:
        raise ValueError("curves: no curve reaches a positive throughput on the buffer interval")
    target = (1.0 - delta) * tp_max

    arms = []
    for curve in curves:
        obs = min_buffer(curve, target, bs_min, bs_max)
        arms.append(
            ArmResult(
                pm=curve.pm,
                cc=curve.cc,
                peak_bs_mib=peaks[curve.arm][0],
                peak_tp_mbps=peaks[curve.arm][1],
                obs_mib=obs,
                tp_at_obs_mbps=None if obs is None else curve.tp(obs),
                same_as_fullmesh=curve.same_as_fullmesh,
            )
        )
    reaching = [arm for arm in arms if arm.obs_mib is not None]
    # The arm that defines T* always reaches its own peak, so `reaching` is never empty.
    smallest = min(arm.obs_mib for arm in reaching)
    tied = [arm for arm in reaching if arm.obs_mib <= smallest + TIE_MIB + 1e-12]
    chosen = choose_among_tied(tied)
    return Solution(
        opm=chosen.pm,
        occ=chosen.cc,
        obs_mib=chosen.obs_mib,
        otp_mbps=chosen.tp_at_obs_mbps,
        tp_max_mbps=tp_max,
        tp_max_bs_mib=tp_max_bs,
        tp_max_pm=best_curve.pm,
        tp_max_cc=best_curve.cc,
        target_mbps=target,
        delta=delta,
        bs_min_mib=bs_min,
        bs_max_mib=bs_max,
        arms=arms,
    )

"""The buffer sweep's design (spec step 5, Eq. 7): which buffers to measure, in which order.

The paper sweeps a fixed 0.5-30 MiB. A buffer only matters around the paths' bandwidth-delay
products (BDP = BW * RTT), so the default grid spans them: log-spaced from well under the smallest
subflow BDP (BDP_min / 8) to well over what all subflows together can keep in flight
(4 * sum BDP_i). Measuring the grid in a fresh random order in every run keeps slow drift (time of
day, cross traffic) from lining up with buffer size and masquerading as a buffer effect.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

BITS_PER_MIB = 8 * 2**20
DEFAULT_POINTS = 12
BELOW_SMALLEST_BDP = 1 / 8  # grid start: BDP_min / 8
ABOVE_TOTAL_BDP = 4.0  # grid end: 4 * sum BDP_i
MIN_BUFFER_MIB = 1 / 64  # 16 KiB: below this a socket buffer holds only a handful of segments
SIGNIFICANT_DIGITS = 3
MAX_BUFFER_MIB = 64.0  # a grid is never extended past this (far beyond any kernel default)


def bdp_mib(bandwidth_kbps: float, rtt_s: float) -> float:
    """Bandwidth-delay product of one subflow in MiB."""
    return bandwidth_kbps * 1000.0 * rtt_s / BITS_PER_MIB


def _round_sig(x: float, digits: int) -> float:
    return float(f"{x:.{digits}g}")


def bdp_buffer_grid(
    bandwidths_kbps: Sequence[float],
    rtts_s: Sequence[float],
    points: int = DEFAULT_POINTS,
    below: float = BELOW_SMALLEST_BDP,
    above: float = ABOVE_TOTAL_BDP,
    min_mib: float = MIN_BUFFER_MIB,
) -> list[float]:
    """Log-spaced buffers (MiB, ascending), max(min_mib, below * min BDP_i) to above * sum BDP_i.

    One bandwidth (kbit/s) and RTT (s) per subflow. Values are rounded to 3 significant digits;
    there are always at least 3 distinct points (a range too narrow is widened by 2x each side).
    """
    if len(bandwidths_kbps) != len(rtts_s) or not bandwidths_kbps:
        raise ValueError("bandwidths_kbps, rtts_s: one value each per subflow, at least one")
    for name, values in (("bandwidths_kbps", bandwidths_kbps), ("rtts_s", rtts_s)):
        for k, v in enumerate(values):
            if not (isinstance(v, int | float) and math.isfinite(v) and v > 0):
                raise ValueError(f"{name}[{k}]: must be a positive number, got {v!r}")
    if not (isinstance(points, int) and points >= 3):
        raise ValueError(f"points: at least 3, got {points!r}")
    if not (below > 0 and above > 0 and min_mib > 0):
        raise ValueError("below, above, min_mib: must be positive")
    bdps = [bdp_mib(bw, rtt) for bw, rtt in zip(bandwidths_kbps, rtts_s, strict=True)]
    lo = max(min_mib, below * min(bdps))
    hi = max(above * sum(bdps), lo)
    grid: list[float] = []
    while len(grid) < 3:
        raw = np.geomspace(lo, hi, points) if hi > lo else np.array([lo])
        grid = sorted({_round_sig(float(x), SIGNIFICANT_DIGITS) for x in raw})
        lo, hi = max(min_mib, lo / 2), hi * 2
    return grid


def run_order(grid: Sequence[float], run: int, seed: int) -> list[float]:
    """The grid in the order run `run` measures it: a permutation fixed by (seed, run).

    Store `seed` with the campaign; any run's order can then be recomputed and audited.
    """
    if not (isinstance(run, int) and run >= 0 and isinstance(seed, int) and seed >= 0):
        raise ValueError(f"run, seed: non-negative integers, got {run!r}, {seed!r}")
    rng = np.random.default_rng([seed, run])
    return [grid[i] for i in rng.permutation(len(grid))]


def plateau_extension(
    grid: Sequence[float],
    arm_means: dict[tuple[str, str], dict[float, float]],
    delta: float,
    max_mib: float = MAX_BUFFER_MIB,
) -> float | None:
    """The next buffer to add above the grid when the best arm has not reached its plateau, or
    None.

    The grid stopped below the plateau when the arm with the highest mean at the
    largest buffer gained more than `delta` (relative) over its mean at the buffer below it: T*
    would be read off a slope and every OBS would be too small. The next point continues the
    grid's geometric step (at least 2x), capped at `max_mib`.
    """
    ordered = sorted(set(grid))
    if len(ordered) < 2:
        return None
    top, below = ordered[-1], ordered[-2]
    complete = [m for m in arm_means.values() if top in m and below in m]
    if not complete or top >= max_mib:
        return None
    best = max(complete, key=lambda m: m[top])
    if best[below] <= 0 or best[top] <= (1 + delta) * best[below]:
        return None
    step = max(2.0, top / below)
    return _round_sig(min(max_mib, top * step), SIGNIFICANT_DIGITS)

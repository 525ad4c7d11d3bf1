"""Adaptive calibration: the next probes from what has been measured, until the decision (OPM,
OCC, OBS on the grid) is settled.

The paper's grid probes every (PM, CC, buffer) the same number of times; a recommendation only
needs T* (the best arm's plateau) and, per competitive arm, the smallest buffer that reaches
(1 - delta) T*. `decide(arms, grid, samples, delta)` (`rule`) runs five named steps over
`samples[arm][bs]`, the goodputs measured so far:

1. **top band** (`top_band.top_band`): every arm at the grid's two largest buffers; while the
   best arm still climbs there (`top_pair_means`, `sweep.plateau_extension`) the caller extends
   the grid, and when it fell from the lower to the upper one the band moves down;
2. **T*** (`top_band.t_star`): the largest mean measured, its point repeated until its
   half-width is under `T_STAR_PRECISION` of delta x T* (or `t_star_max_runs` runs);
3. **elimination** (`search.eliminate`): arms whose upper bound stays under the line drawn from
   T*'s lower bound are dropped; those straddling it are repeated;
4. **bisection** (`search.bisection`): per surviving arm, the smallest grid buffer whose
   interval clears the target, bounded by the smallest one found so far;
5. **decision** (`rule`): the smallest such buffer (ties: the higher mean), with `min_runs`
   runs there and every survivor at it drawable (`MIN_BUFFERS` buffers).

`noise` is the noise model every step reads intervals with (`PointNoise`), and `lower_bounds`
the rule by which the answer's solve reads OBS off the measured means. `BulkDecision` promises:
OTP with the half-width of its interval (`otp_interval`), `prediction_half_width(k)` where the
mean of k fresh runs should land, `alternatives` within reach and whether PM and CC are
settled; the sentence a user reads is `flows.answers.confidence_summary.decision_statement`.
On a path that moves over time (`variation`: read off the campaign's repeated probes) the
promise is widened to where fresh probes land and says so, and the sweep does not call a
decision settled until its answer's runs are spread in time (`time_spread`). Why
each step is as it is, measured on the testbed: docs/testbed.md, "The adaptive rule on the testbed".
"""

from .decision import (
    MAX_RUNS,
    MIN_BUFFERS,
    NEAR_LINE_MAX_RUNS,
    NEAR_THE_TOP,
    T_STAR_MAX_RUNS,
    T_STAR_OWN_RUNS,
    T_STAR_PRECISION,
    BulkDecision,
    WantedProbe,
)
from .noise import (
    DEFAULT_CONFIDENCE,
    MIN_ARM_DOF,
    MIN_RUNS,
    Noise,
    PointNoise,
    Samples,
    lower_bounds,
    pooled_noise,
)
from .rule import decide, within_links
from .top_band import top_pair_means

__all__ = [
    "DEFAULT_CONFIDENCE", "MAX_RUNS", "MIN_ARM_DOF", "MIN_BUFFERS", "MIN_RUNS",
    "NEAR_LINE_MAX_RUNS", "NEAR_THE_TOP", "T_STAR_MAX_RUNS", "T_STAR_OWN_RUNS",
    "T_STAR_PRECISION", "BulkDecision", "Noise", "PointNoise", "Samples", "WantedProbe", "decide",
    "lower_bounds", "pooled_noise", "top_pair_means", "within_links",
]

"""The noise model of the adaptive decision: how wide a measured point's interval is.

Intervals are Student-t with the arm's own pooled spread once it has `MIN_ARM_DOF` degrees of
freedom, else the spread pooled over all samples: noise is a property of the paths an arm runs
on (FullMesh over thin lossy uplinks is far noisier than PCDC on a fibre), and with 2 runs per
point a per-point t would excuse anything. A point whose every run read the links' rate has no
spread to read (`PointNoise.capped`). What the testbed showed: docs/testbed.md, "The adaptive
rule on the testbed".
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from statistics import fmean

from ..arm import Arm
from ..student_t import t_critical

# keys may be Arm or plain (pm, cc) tuples: an Arm equals and hashes like its tuple
Samples = Mapping[Arm, Mapping[float, Sequence[float]]]

DEFAULT_CONFIDENCE = 0.9
MIN_RUNS = 2
MIN_ARM_DOF = 3  # an arm's own spread stands from this many degrees of freedom


@dataclass(frozen=True)
class Noise:
    """One run's spread (`sd`) and its degrees of freedom."""

    sd: float
    dof: int

    def half_width(self, n: int, confidence: float) -> float:
        if n == 0:
            return math.inf
        if self.dof == 0:
            return 0.0 if n >= MIN_RUNS else math.inf
        return t_critical(confidence, self.dof) * self.sd / math.sqrt(n)


def pooled_noise(samples: Samples) -> Noise:
    ss, dof = 0.0, 0
    for per_bs in samples.values():
        for values in per_bs.values():
            if len(values) > 1:
                m = fmean(values)
                ss += sum((v - m) ** 2 for v in values)
                dof += len(values) - 1
    return Noise(math.sqrt(ss / dof) if dof else 0.0, dof)


@dataclass(frozen=True)
class PointNoise:
    """The half-width of a measured point's mean, as the decision and the answer's solve both
    read it: Student-t on the arm's own pooled spread once it has `MIN_ARM_DOF` degrees of
    freedom, else on the spread pooled over every arm. Pooled over `noise_samples` (`samples`
    where these leave no degree of freedom); 0 for a point whose every run the links capped
    (left out of `noise_samples`): the links bound its mean from above and its runs agree, so
    no lucky draw set it and a repeat would read the same."""

    noise: Noise  #: pooled over every arm
    per_arm: Mapping[Arm, Noise]
    spread: Samples | None
    confidence: float = DEFAULT_CONFIDENCE
    min_runs: int = MIN_RUNS

    @classmethod
    def of(cls, samples: Samples, noise_samples: Samples | None = None,
           confidence: float = DEFAULT_CONFIDENCE, min_runs: int = MIN_RUNS) -> PointNoise:
        source = samples
        if noise_samples is not None and pooled_noise(noise_samples).dof > 0:
            source = noise_samples
        per_arm = {Arm(*arm): pooled_noise({arm: per_bs}) for arm, per_bs in source.items()}
        return cls(pooled_noise(source), per_arm, noise_samples, confidence, min_runs)

    def of_arm(self, arm: Arm) -> Noise:
        own = self.per_arm.get(Arm(*arm))
        return own if own is not None and own.dof >= MIN_ARM_DOF else self.noise

    def capped(self, arm: Arm, bs: float, n: int) -> bool:
        """The point has `min_runs` runs or more and every one read the links' rate (none kept
        its spread). One capped run is not enough: it can be a lucky draw that holds T* alone."""
        return (self.spread is not None and n >= self.min_runs
                and not self.spread.get(arm, {}).get(bs))

    def half_width(self, arm: Arm, bs: float, n: int) -> float:
        if self.capped(arm, bs, n):
            return 0.0
        return self.of_arm(arm).half_width(n, self.confidence)


def lower_bounds(samples: Samples, noise_samples: Samples | None = None,
                 confidence: float = DEFAULT_CONFIDENCE) -> dict[Arm, dict[float, float]]:
    """Per arm and measured buffer the lower bound of its mean (mean - half-width), T*'s own
    point at its mean: the leader reaches its target there (as `decide` has it). A buffer
    reaches the target when its lower bound does: the answer's solve over the measured means
    reads OBS with this, the rule the decision settled on."""
    points = PointNoise.of(samples, noise_samples, confidence)
    means = {(Arm(*arm), bs): fmean(v)
             for arm, per in samples.items() for bs, v in per.items() if v}
    if not means:
        return {}
    t_star_point = max(means, key=lambda k: (means[k], -k[1]))
    out: dict[Arm, dict[float, float]] = {}
    for (arm, bs), mean in means.items():
        n = len(samples[arm][bs])
        h = 0.0 if (arm, bs) == t_star_point else points.half_width(arm, bs, n)
        out.setdefault(arm, {})[bs] = mean - h
    return out

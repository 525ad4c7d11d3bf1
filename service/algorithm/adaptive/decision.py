"""What the adaptive decision returns (`WantedProbe`s to run next, or a settled `BulkDecision`) and
the bounds its steps share."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from probes.vocabulary import PathManager

from ..alternative import Alternative
from ..arm import Arm
from ..stored_form import OTHER, PRESENT, StoredForm, count, each, flag, names, number, text
from ..student_t import t_critical
from .noise import DEFAULT_CONFIDENCE, PointNoise, Samples

MAX_RUNS = 4
MIN_BUFFERS = 3  # what a fit needs
T_STAR_PRECISION = 1 / 3  # T*'s half-width must be under this share of delta x T*
T_STAR_MAX_RUNS = 8
T_STAR_OWN_RUNS = 3  # from this many runs T*'s point is judged by its own spread too
NEAR_THE_TOP = 0.5  # an arm under this share of the best at the top is not measured below it
# A buffer whose interval still straddles the target after `max_runs`, below the answer's
# buffer and with its mean over the target, is repeated up to this many runs: it decides
# between the answer and a buffer several times larger.
NEAR_LINE_MAX_RUNS = 8


@dataclass(frozen=True)
class WantedProbe:
    pm: PathManager
    cc: str
    bs_mib: float


@dataclass(frozen=True)
class BulkDecision(StoredForm):
    """Either `probes` to run next, or a settled answer (`settled`).

    Stored as it is, in a campaign's state (`state.sweep_outcome.BulkSweepOutcome`, whose `stop`
    says whether it settled): every field but the probes it still wanted and the noise behind
    its half-widths (`noise_sd_mbps`, `noise_dof`: a value read back has its promise already)."""

    probes: tuple[WantedProbe, ...] = ()
    settled: bool = False
    opm: PathManager | None = None
    occ: str | None = None
    obs_mib: float | None = None
    otp_mbps: float | None = None
    otp_half_width_mbps: float | None = None
    t_star_mbps: float | None = None
    target_mbps: float | None = None
    survivors: tuple[str, ...] = ()
    eliminated: tuple[str, ...] = ()
    otp_runs: int = 0
    t_star_half_width_mbps: float | None = None
    t_star_runs: int = 0
    t_star_held: bool = False  # T*'s half-width got under T_STAR_PRECISION x delta x T*
    confidence: float = DEFAULT_CONFIDENCE
    noise_sd_mbps: float | None = None  # the pooled spread of one run, and its dof
    noise_dof: int = 0
    alternatives: tuple[Alternative, ...] = ()
    pm_settled: bool = False
    cc_settled: bool = False
    other: Mapping[str, Any] = OTHER()
    present: frozenset[str] | None = PRESENT()
    READERS: ClassVar = {
        "opm": text, "occ": text, "obs_mib": number, "otp_mbps": number,
        "otp_half_width_mbps": number, "t_star_mbps": number, "target_mbps": number,
        "survivors": names, "eliminated": names, "otp_runs": count,
        "t_star_half_width_mbps": number, "t_star_runs": count, "t_star_held": flag,
        "pm_settled": flag, "cc_settled": flag, "alternatives": each(Alternative),
        "confidence": number,
    }

    def __post_init__(self) -> None:
        # frozen all the way down: the sequences it is given are kept as tuples
        for name in ("probes", "survivors", "eliminated", "alternatives"):
            object.__setattr__(self, name, tuple(getattr(self, name)))

    def otp_interval(self) -> tuple[float, float] | None:
        """Where the chosen arm's mean at OBS lies, at `confidence`."""
        if self.otp_mbps is None or self.otp_half_width_mbps is None:
            return None
        return self.otp_mbps - self.otp_half_width_mbps, self.otp_mbps + self.otp_half_width_mbps

    def prediction_half_width(self, fresh_runs: int = 1) -> float | None:
        """Half-width of the interval around OTP in which the mean of `fresh_runs` new runs of
        the chosen configuration should land: t x sd x sqrt(1/n + 1/k)."""
        if self.noise_sd_mbps is None or not self.otp_runs or fresh_runs < 1:
            return None
        if self.noise_dof == 0:
            return math.inf
        t = t_critical(self.confidence, self.noise_dof)
        return t * self.noise_sd_mbps * math.sqrt(1 / self.otp_runs + 1 / fresh_runs)


@dataclass(frozen=True)
class Points:
    """The measured points as every step reads them: the sorted grid, the runs per arm and
    buffer, their noise (`PointNoise`) and the runs a compared point needs."""

    grid: list[float]
    samples: Samples
    noise: PointNoise
    min_runs: int

    @classmethod
    def of(cls, grid: Sequence[float], samples: Samples, noise_samples: Samples | None,
           confidence: float, min_runs: int) -> Points:
        return cls(sorted(set(grid)), samples,
                   PointNoise.of(samples, noise_samples, confidence, min_runs), min_runs)

    def values(self, arm: Arm, bs: float) -> Sequence[float]:
        return self.samples.get(arm, {}).get(bs, ())

    def hw(self, arm: Arm, bs: float) -> float:
        return self.noise.half_width(arm, bs, len(self.values(arm, bs)))

    def short(self, arm: Arm, bs: float) -> bool:
        """Fewer runs than a compared point needs."""
        return len(self.values(arm, bs)) < self.min_runs

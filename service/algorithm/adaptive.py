"""Adaptive calibration: the next probes from what has been measured, until the
decision (OPM, OCC, OBS on the grid) is settled.

The paper's grid probes every (PM, CC, buffer) the same number of times; a recommendation only
needs T* (the best arm's plateau) and, per competitive arm, the smallest buffer that reaches
(1 - delta) T*. So, with `samples[arm][bs]` the goodputs measured so far:

1. **T***: every arm at the grid's two largest buffers, `min_runs` times at the top and once
   below it (unless under half the best at the top), the best of them `min_runs` times at
   both. While the best arm still climbs there (more than delta over the buffer below:
   `top_pair_means` and `sweep.plateau_extension`), the caller extends the grid upwards and
   this starts over at the new top (where only the arms still climbing below it are
   measured: `_arms_at`); when the best arm *fell* from the lower to the upper one by more
   than delta (a curve that rises and falls, seen on asymmetric.yaml at 5.47 MiB), the band
   moves one buffer down.
2. **Successive elimination**: an arm whose upper confidence bound at its best buffer stays
   below the target computed from the best arm's lower bound cannot be within delta of the best:
   it is dropped. Arms whose interval straddles that line get repeats (up to `max_runs`),
   unless another arm's smallest buffer already puts them out of the running (short of the
   target above that buffer and below their best: `_short_above`).
3. **Bisection** per surviving arm over the sorted grid for the smallest buffer whose mean
   reaches the target: one run decides a buffer whose interval (the pooled spread) clears the
   target either way; a buffer whose interval straddles it is repeated (up to `max_runs`,
   then it does not reach the target; below the smallest buffer found, with its mean over the
   target, up to `NEAR_LINE_MAX_RUNS`). Bisection assumes goodput does not fall as the buffer
   grows below the arm's best buffer, which is what a window limit does. Once one arm's
   smallest buffer is found, the others are asked only about buffers up to it: one that falls
   short there cannot be the answer (its probes below are never run).
4. **Decision**: the arm with the smallest such buffer (ties: the higher mean there), once
   that buffer has `min_runs` runs. Every survivor at that buffer ends with at least 3
   measured buffers (one run each), so the regression can draw it; the others are shown with
   what they have, like eliminated arms.

**A T* that holds.** T* is the largest mean measured, and the largest of many 2-run means is a
lucky draw more often than not (on asymmetric.yaml a grid campaign's T* was 5 % low from
2 x 5 s runs, and the answer 0.868 of the best). Before the target is read off it, the point
that sets T* is repeated until its interval's half-width is under `T_STAR_PRECISION` (a third)
of delta x T*, or it has `t_star_max_runs` runs. When a repeat pulls it down, another point may
set T*: that one is then repeated in turn (between steps 1 and 2). Decision.t_star_held says
whether the precision was reached (False: the run bound stopped it).

**What the decision promises.** OTP is the chosen arm's mean at OBS with the half-width of its
interval (`otp_interval`); `prediction_half_width(k)` is the wider interval in which the mean of
k fresh runs should land. `alternatives` are the surviving arms whose interval at OBS overlaps
the chosen one's; `pm_settled` / `cc_settled` say that none of them differs in the PM / the CC.
`statement()` is the sentence a user reads first (`confidence_summary`).

Intervals are Student-t with the arm's own pooled spread once it has a few degrees of freedom,
else the spread pooled over all samples (`PointNoise`: noise is a property of the paths an arm
runs on, and FullMesh over thin lossy uplinks is far noisier than PCDC on a fibre; with 2 runs
per point a per-point t would excuse anything).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from statistics import fmean, stdev

from .arm import Arm
from .confidence_summary import Alternative, confidence_statement

# keys may be Arm or plain (pm, cc) tuples: an Arm equals and hashes like its tuple
Samples = Mapping[Arm, Mapping[float, Sequence[float]]]

DEFAULT_CONFIDENCE = 0.9
MIN_RUNS = 2
MAX_RUNS = 4
MIN_BUFFERS = 3  # what a fit needs
T_STAR_PRECISION = 1 / 3  # T*'s half-width must be under this share of delta x T*
T_STAR_MAX_RUNS = 8
T_STAR_OWN_RUNS = 3  # from this many runs T*'s point is judged by its own spread too
NEAR_THE_TOP = 0.5  # an arm under this share of the best at the top is not measured below it
# A buffer whose interval still straddles the target after `max_runs`, below the answer's
# buffer and with its mean over the target, is repeated up to this many runs: it decides
# between the answer and a buffer several times larger (thin-sender.yaml: PCDC/reno at 0.95
# MiB read 20.66, 20.12, 20.65, 20.64 against a line at 20.24, and the answer went to 7.4 MiB).
NEAR_LINE_MAX_RUNS = 8


@dataclass(frozen=True)
class WantedProbe:
    pm: str
    cc: str
    bs_mib: float


@dataclass
class Decision:
    """Either `probes` to run next, or a settled answer (`settled`)."""

    probes: list[WantedProbe] = field(default_factory=list)
    settled: bool = False
    opm: str | None = None
    occ: str | None = None
    obs_mib: float | None = None
    otp_mbps: float | None = None
    otp_half_width_mbps: float | None = None
    t_star_mbps: float | None = None
    target_mbps: float | None = None
    survivors: list[str] = field(default_factory=list)
    eliminated: list[str] = field(default_factory=list)
    otp_runs: int = 0
    t_star_half_width_mbps: float | None = None
    t_star_runs: int = 0
    t_star_held: bool = False  # T*'s half-width got under T_STAR_PRECISION x delta x T*
    confidence: float = DEFAULT_CONFIDENCE
    noise_sd_mbps: float | None = None  # the pooled spread of one run, and its dof
    noise_dof: int = 0
    alternatives: list[Alternative] = field(default_factory=list)
    pm_settled: bool = False
    cc_settled: bool = False

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
        from scipy import stats  # here, not at the top: half a second every CLI start would pay
        t = float(stats.t.ppf(0.5 + self.confidence / 2, self.noise_dof))
        return t * self.noise_sd_mbps * math.sqrt(1 / self.otp_runs + 1 / fresh_runs)

    def statement(
        self, subset_settled: bool | None = None, subset_alternatives: Sequence[Alternative] = ()
    ) -> str | None:
        """The one sentence a user reads first; pass the subflow selection's `settled` and
        `within_reach` when OPM is PCDC. None until settled."""
        interval = self.otp_interval()
        if not self.settled or interval is None or not math.isfinite(interval[1]):
            return None
        return confidence_statement(
            *interval, self.confidence, pm_settled=self.pm_settled, cc_settled=self.cc_settled,
            subset_settled=subset_settled,
            alternatives=[*self.alternatives, *subset_alternatives])


@dataclass(frozen=True)
class _Noise:
    sd: float
    dof: int

    def half_width(self, n: int, confidence: float) -> float:
        if n == 0:
            return math.inf
        if self.dof == 0:
            return 0.0 if n >= MIN_RUNS else math.inf
        from scipy import stats  # here, not at the top: half a second every CLI start would pay
        return float(stats.t.ppf(0.5 + confidence / 2, self.dof)) * self.sd / math.sqrt(n)


def pooled_noise(samples: Samples) -> _Noise:
    ss, dof = 0.0, 0
    for per_bs in samples.values():
        for values in per_bs.values():
            if len(values) > 1:
                m = fmean(values)
                ss += sum((v - m) ** 2 for v in values)
                dof += len(values) - 1
    return _Noise(math.sqrt(ss / dof) if dof else 0.0, dof)


MIN_ARM_DOF = 3  # an arm's own spread stands from this many degrees of freedom


@dataclass(frozen=True)
class PointNoise:
    """The half-width of a measured point's mean, as the decision and the answer's solve both
    read it: Student-t on the arm's own pooled spread once it has `MIN_ARM_DOF` degrees of
    freedom, else on the spread pooled over every arm. Noise is a property of the paths an
    arm runs on: on thin-sender.yaml FullMesh over four uplinks read 15.5 and 4.7 Mbit/s in two
    runs of one point, while PCDC on the fast one read 20.66, 20.12, 20.65, 20.64, and one
    pooled spread put PCDC's interval 2.5 Mbit/s wide and its OBS at the largest buffer.
    Pooled over `noise_samples` (`samples` where these leave no degree of freedom); 0 for a
    point whose every run the links capped (left out of `noise_samples`): the links bound its
    mean from above and its runs agree, so no lucky draw set it and a repeat would read the
    same."""

    noise: _Noise  #: pooled over every arm
    per_arm: Mapping[Arm, _Noise]
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

    def of_arm(self, arm: Arm) -> _Noise:
        own = self.per_arm.get(Arm(*arm))
        return own if own is not None and own.dof >= MIN_ARM_DOF else self.noise

    def capped(self, arm: Arm, bs: float, n: int) -> bool:
        """The point has `min_runs` runs or more and every one read the links' rate (none kept
        its spread). One capped run is not enough: over thin-sender.yaml's lossy uplinks
        FullMesh/bbr read the links' 22.17 Mbit/s once at 7.4 MiB, held T* alone, and
        eliminated arms whose 4 runs there averaged 22.0 and 21.5; fresh probes of it read
        21.47 and 21.55."""
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


def decide(
    arms: Sequence[Arm],
    grid: Sequence[float],
    samples: Samples,
    delta: float,
    confidence: float = DEFAULT_CONFIDENCE,
    min_runs: int = MIN_RUNS,
    max_runs: int = MAX_RUNS,
    t_star_max_runs: int = T_STAR_MAX_RUNS,
    noise_samples: Samples | None = None,
    extended: Sequence[float] = (),
) -> Decision:
    """The next batch of probes, or the settled decision. `noise_samples`: the runs the noise
    is pooled from, where some of `samples` hide their spread (`samples` when these leave no
    degree of freedom). `extended`: the buffers the caller added above the planned grid while
    the leader climbed (only the arms still climbing are measured there: `_arms_at`)."""
    grid = sorted(set(grid))
    arms = [Arm(*a) for a in arms]
    points = PointNoise.of(samples, noise_samples, confidence, min_runs)

    def values(arm: Arm, bs: float) -> Sequence[float]:
        return samples.get(arm, {}).get(bs, ())

    def hw(arm: Arm, bs: float) -> float:
        return points.half_width(arm, bs, len(values(arm, bs)))

    def short(arm: Arm, bs: float) -> bool:  # fewer runs than a compared point needs
        return len(values(arm, bs)) < min_runs

    # 1. every arm at the two largest buffers (the top band): `min_runs` at the top, one run
    # below it, and the leader `min_runs` at both. When the leader fell by more than delta from
    # the lower to the upper one, the top is past the arms' best (a curve that rises and falls):
    # the band moves one buffer down, as long as that keeps happening. One run below the top
    # is enough to see which arm leads there (on asymmetric.yaml the best arm fell from 9.1 to
    # 4-5 Mbit/s at the top, where another led at 5.6); its pair's means decide the band.
    k = len(grid) - 1
    while True:
        band = grid[max(0, k - 1): k + 1]
        top, below = band[-1], band[0]
        at_top = _arms_at(k, arms, grid, samples, delta, extended)
        missing = [WantedProbe(*arm, top) for arm in at_top if short(arm, top)]
        if missing:
            return Decision(probes=missing)
        # an arm under half the best at the top leads nowhere near it below: elimination and,
        # if it survives, the bisection judge it
        best_top = max(fmean(values(a, top)) for a in at_top)
        near = [a for a in at_top if fmean(values(a, top)) >= NEAR_THE_TOP * best_top]
        missing = [WantedProbe(*arm, below) for arm in near if not values(arm, below)]
        if missing:
            return Decision(probes=missing)
        leader = max(near, key=lambda a: max(fmean(v) for bs in band if (v := values(a, bs))))
        missing = [WantedProbe(*leader, bs) for bs in band if short(leader, bs)
                   and (bs == top or _may_fall(leader, below, top, values, hw, delta))]
        if missing:
            return Decision(probes=missing)
        if k < 2:
            break
        lower, upper = (fmean(values(leader, bs)) for bs in band)
        if lower <= (1 + delta) * upper:
            break
        k -= 1

    # T*: the largest mean measured anywhere (a curve may rise and fall inside the grid)
    def best_point(arm: Arm) -> tuple[float, float]:
        measured = [(bs, fmean(v)) for bs, v in samples.get(arm, {}).items() if v]
        return max(measured, key=lambda p: (p[1], -p[0]))

    bests = {arm: best_point(arm) for arm in arms}
    leader = max(arms, key=lambda a: bests[a][1])
    t_star = bests[leader][1]
    t_bs = bests[leader][0]
    t_hw, t_runs = hw(leader, t_bs), len(values(leader, t_bs))
    if t_runs >= T_STAR_OWN_RUNS:
        # T*'s point, repeated, has a spread of its own: an arm's collapses elsewhere (harmful
        # .yaml: FullMesh/cubic read 13.2 once at 0.67 MiB) say nothing of its top, where 8 runs
        # read 19.1-19.8 and the arm's pooled spread still asked for more
        t_hw = min(t_hw, _Noise(stdev(values(leader, t_bs)), t_runs - 1).half_width(
            t_runs, confidence))
    t_held = t_hw < T_STAR_PRECISION * delta * t_star
    pooled_hw = hw

    def hw(arm: Arm, bs: float) -> float:
        return t_hw if (arm, bs) == (leader, t_bs) else pooled_hw(arm, bs)

    if not t_held and t_runs < t_star_max_runs:
        return Decision(probes=[WantedProbe(*leader, t_bs)])  # a T* that holds, before it is used
    lead_low = t_star - t_hw
    line = (1 - delta) * lead_low

    # 2. successive elimination
    survivors, eliminated, straddling = [], [], []
    for arm in arms:
        bs, mean = bests[arm]
        upper = mean + hw(arm, bs)
        if upper < line:
            eliminated.append(arm)
        elif arm != leader and mean < (1 - delta) * t_star and len(values(arm, bs)) < max_runs:
            straddling.append(arm)  # measured again before it is bisected, if it can still win
        else:
            survivors.append(arm)
    target = (1 - delta) * t_star

    # 3. bisection per survivor for its smallest buffer reaching the target. An arm that can
    # only win with a buffer under the smallest OBS found so far is asked about buffers up to
    # that one: when it falls short there it needs a larger buffer and cannot be the answer,
    # whatever its own smallest is (on harmful.yaml every FullMesh probe runs 16 s over the
    # 500 ms subflow while PCDC on the fast one settles at 5 s).
    obs: dict[Arm, int] = {}
    pending: dict[Arm, WantedProbe] = {}
    for arm in [*survivors, *straddling]:
        if arm in straddling:
            # An arm whose best straddles the line is repeated there before it is bisected,
            # unless the others' smallest OBS so far already puts it out of the running: short
            # of the target at a buffer above that OBS and below its best, it needs a larger
            # buffer than the answer's whatever its repeats read (harmful.yaml: FullMesh/bbr,
            # 17.3 at 1.72 MiB against a line of 17.9 and 5.7 at 0.67, was repeated twice at
            # 16 s a probe while PCDC on F-U reached the target at 0.10 MiB).
            survivors.append(arm)
            pending[arm] = WantedProbe(*arm, bests[arm][0])
            continue
        found = _bisect(arm, grid, values, hw, target, max_runs)
        if found is None and arm == leader:
            found = grid.index(t_bs)  # T*'s own point: the leader reaches its target there
        if isinstance(found, WantedProbe):
            pending[arm] = found
        elif found is None:
            eliminated.append(arm)  # its best mean fell short after all repeats
        else:
            obs[arm] = found
    beyond: list[Arm] = []
    bound = None
    while pending and obs and bound != min(obs.values()):
        bound = min(obs.values())
        for arm in list(pending):
            if arm in straddling:
                if _short_above(arm, grid, values, hw, target, bound):
                    del pending[arm]
                    beyond.append(arm)
                continue
            found = _bisect(arm, grid, values, hw, target, max_runs, limit=bound)
            if isinstance(found, WantedProbe):
                pending[arm] = found
                continue
            del pending[arm]
            if found is None:
                beyond.append(arm)
            else:
                obs[arm] = found
    if pending:
        return Decision(probes=list(pending.values()))
    for arm in beyond:  # past the smallest OBS: never chosen, still drawn and compared at OBS
        obs[arm] = min(obs.values()) + 1
    # A buffer below the answer's whose mean reaches the target while its interval still
    # straddles it after `max_runs` is measured further, on any arm the elimination kept: it
    # decides between the answer's buffer and a smaller one (the bisection reads it as short
    # until its interval clears the line, as the answer's solve does).
    first_obs = min(obs.values(), default=None)
    near_line = [
        WantedProbe(*arm, bs) for arm in survivors for bs in grid[:first_obs or 0]
        if max_runs <= len(v := values(arm, bs)) < NEAR_LINE_MAX_RUNS
        and fmean(v) - hw(arm, bs) < target <= fmean(v)
    ]
    if near_line:
        return Decision(probes=near_line)
    survivors = [a for a in survivors if a in obs]
    probes: list[WantedProbe] = []
    # every survivor at the smallest OBS drawable: at least MIN_BUFFERS measured buffers (one
    # run each: the fit only draws the curve; the answer is read off the measured means). An
    # arm that needs a larger buffer is shown with what it has, like an eliminated one: on
    # harmful.yaml those are FullMesh's 16 s probes, which the bounded search saved.
    planned = [bs for bs in grid if bs not in extended] or grid
    for arm in survivors:
        if obs[arm] != first_obs:
            continue
        measured = sorted(bs for bs, v in samples.get(arm, {}).items() if v)
        if len(measured) < MIN_BUFFERS:
            extra = _filler(planned, measured)
            if extra is not None:
                probes.append(WantedProbe(*arm, extra))
    if probes:
        return Decision(probes=probes)

    # 4. the decision: smallest OBS, then the higher mean there. The arms tied at that buffer
    # have `min_runs` runs there first (a single run settled the bisection's verdicts; means
    # of unequal counts would not compare fairly), and a repeat that overturns a verdict sends
    # the bisection on.
    first = min(obs.values(), default=None)
    tied = [WantedProbe(*a, grid[first]) for a in survivors
            if obs[a] == first and short(a, grid[first])]
    if tied:
        return Decision(probes=tied)
    chosen = min(survivors, key=lambda a: (obs[a], -fmean(values(a, grid[obs[a]]) or [0.0])))
    bs = grid[obs[chosen]]
    otp, otp_hw = fmean(values(chosen, bs)), hw(chosen, bs)
    alternatives = _within_reach(chosen, survivors, bs, otp, otp_hw, values, hw)
    return Decision(
        settled=True, opm=chosen.pm, occ=chosen.cc, obs_mib=bs,
        otp_mbps=otp, otp_half_width_mbps=otp_hw,
        t_star_mbps=t_star, target_mbps=target,
        survivors=[a.label for a in survivors],
        eliminated=[a.label for a in eliminated],
        otp_runs=len(values(chosen, bs)), t_star_half_width_mbps=t_hw, t_star_runs=t_runs,
        t_star_held=t_held, confidence=confidence, noise_sd_mbps=points.of_arm(chosen).sd,
        noise_dof=points.of_arm(chosen).dof,
        alternatives=alternatives,
        pm_settled=not any("pm" in a.differs_in for a in alternatives),
        cc_settled=not any("cc" in a.differs_in for a in alternatives),
    )


def _within_reach(chosen, survivors, bs, otp, otp_hw, values, hw) -> list[Alternative]:
    """Surviving arms measured at OBS whose interval there overlaps the chosen one's. Arms not
    measured at OBS were settled by the bisection (they need a larger buffer); eliminated arms
    were settled below the target."""
    out = []
    for arm in survivors:
        v = values(arm, bs)
        if arm == chosen or not v or otp <= 0:
            continue
        mean, h = fmean(v), hw(arm, bs)
        if mean - h <= otp + otp_hw and otp - otp_hw <= mean + h:
            differs = tuple(k for k, same in (("pm", arm.pm == chosen.pm),
                                              ("cc", arm.cc == chosen.cc)) if not same)
            out.append(Alternative(arm.label, mean / otp - 1, differs))
    return sorted(out, key=lambda a: -a.relative)


def _arms_at(k: int, arms: Sequence[Arm], grid: Sequence[float], samples: Samples,
             delta: float, extended: Sequence[float]) -> list[Arm]:
    """The arms measured at `grid[k]` as the band's top: every arm on the planned grid; at a
    buffer added above it, the arms measured at the buffer before that still climbing there by
    more than delta, and the leader there. An arm flat below an added buffer has shown its
    plateau, and the buffer was added for the leader's climb: on harmful.yaml the grid grew to
    4.39 MiB for FullMesh/cubic, and PCDC on the fast subflow, flat at 18.8 since 0.1 MiB, was
    measured there too."""
    if k < 2 or grid[k] not in extended:
        return list(arms)
    before = [a for a in _arms_at(k - 1, arms, grid, samples, delta, extended)
              if samples.get(a, {}).get(grid[k - 1])]
    if not before:
        return list(arms)

    def mean(a: Arm, bs: float) -> float | None:
        v = samples.get(a, {}).get(bs)
        return fmean(v) if v else None

    leader = max(before, key=lambda a: mean(a, grid[k - 1]))
    return [a for a in before if a == leader or (
        (low := mean(a, grid[k - 2])) is not None and mean(a, grid[k - 1]) > (1 + delta) * low)]


def top_pair_means(
    arms: Sequence[Arm], grid: Sequence[float], samples: Samples, delta: float = 0.0,
    extended: Sequence[float] = (),
) -> dict[Arm, dict[float, float]] | None:
    """The top's leader's means at the top and one buffer lower, once both are measured (the
    input of `sweep.plateau_extension`: the caller extends the grid while it climbs), else
    None. At a buffer added above the planned grid only the arms still climbing are measured
    (`extended`, `delta`: as `decide` has them), so every arm near the top's best (as
    `decide`'s top band has them) is measured below it first: whether it climbs decides
    whether it is measured at the buffer added (on harmful.yaml the grid grew before
    FullMesh/reno, 0.4 % under the leader at the top, had a run below it)."""
    grid = sorted(set(grid))
    if len(grid) < 2:
        return None
    top, below = grid[-1], grid[-2]
    arms = _arms_at(len(grid) - 1, [Arm(*a) for a in arms], grid, samples, delta, extended)
    if any(not samples.get(a, {}).get(top) for a in arms):
        return None
    best_top = max(fmean(samples[a][top]) for a in arms)
    if any(not samples[a].get(below) for a in arms
           if fmean(samples[a][top]) >= NEAR_THE_TOP * best_top):
        return None
    leader = max(arms, key=lambda a: fmean(samples[a][top]))
    return {leader: {top: fmean(samples[leader][top]), below: fmean(samples[leader][below])}}


def within_links(samples: Samples, links_mbps: float | None, delta: float,
                 noise_samples: Samples | None = None,
                 confidence: float = DEFAULT_CONFIDENCE) -> bool:
    """Some measured point's lower bound (its mean less its half-width, as `decide` reads it)
    reaches (1 - delta) x `links_mbps`, what every subflow's links carry together: that point
    is within delta of any T* a larger buffer could show, for no mean exceeds the links' rate
    (`capacity.capped_mean`)."""
    if not links_mbps or links_mbps <= 0:
        return False
    points = PointNoise.of(samples, noise_samples, confidence)
    bar = (1 - delta) * links_mbps
    return any(fmean(v) - points.half_width(Arm(*arm), bs, len(v)) >= bar
               for arm, per_bs in samples.items() for bs, v in per_bs.items() if v)


def _may_fall(leader, below: float, top: float, values, hw, delta: float) -> bool:
    """Whether the leader's runs below the top may still show it fell by more than delta from
    there to the top (the band then moves down): its interval below reaches (1 + delta) x its
    mean at the top. A single run far under the top settles it (harmful.yaml: FullMesh read
    12-16 Mbit/s once at 0.67 MiB against 19.2 at 1.72, and each second run took 15 s)."""
    return fmean(values(leader, below)) + hw(leader, below) >= (
        (1 + delta) * fmean(values(leader, top)))


def _short_above(arm, grid, values, hw, target, limit: int) -> bool:
    """The arm measured short of the target (its interval wholly under it) at a buffer above
    grid index `limit` and at most its best buffer: it cannot reach the target by `limit`."""
    measured = [i for i in range(len(grid)) if values(arm, grid[i])]
    best = max(measured, key=lambda i: fmean(values(arm, grid[i])))
    return any(limit < i <= best and fmean(values(arm, grid[i])) + hw(arm, grid[i]) < target
               for i in measured)


def _bisect(arm, grid, values, hw, target, max_runs,
            limit: int | None = None) -> int | WantedProbe | None:
    """The grid index of the arm's smallest buffer reaching the target, a probe still needed to
    find it, or None when even its best buffer does not reach it. With `limit`, only buffers up
    to that index are asked about: None when the arm falls short at `limit`."""

    def verdict(i: int) -> bool | WantedProbe:
        # One run decides where its interval (the pooled spread) clears the target; a point
        # whose interval straddles it is repeated. Most bisection points are far from the line.
        bs = grid[i]
        v = values(arm, bs)
        if not v:
            return WantedProbe(*arm, bs)
        mean, h = fmean(v), hw(arm, bs)
        # A buffer reaches the target when its interval clears it. One still straddling the
        # line after `max_runs` does not: its true rate is as likely under the line as over it,
        # and an answer there is within delta of the best by a coin's toss (thin-sender.yaml:
        # 0.941 of the best). The answer's solve reads OBS by the same rule
        # (`lower_bounds`, `campaign_answer`), or the answer and its promise part ways.
        if mean - h >= target:
            return True
        if mean + h < target or len(v) >= max_runs:
            return False
        return WantedProbe(*arm, bs)  # the interval straddles the target: repeat

    measured = [i for i in range(len(grid)) if values(arm, grid[i])]
    reaching = [i for i in measured if verdict(i) is True]
    if limit is not None:
        # what was measured below the limit is settled first, as the answer's solve over the
        # measured means would read a mean there that reaches the target
        for i in measured:
            if i < limit and isinstance(v := verdict(i), WantedProbe):
                return v
        reaching = [i for i in reaching if i <= limit]
        best = max(measured, key=lambda i: fmean(values(arm, grid[i])))
        if not reaching and any(limit < i <= best and verdict(i) is False for i in measured):
            return None  # short of the target at a larger buffer below its best: at the limit too
        if not reaching:
            at_limit = verdict(limit)
            if isinstance(at_limit, WantedProbe):
                return at_limit
            if not at_limit:
                return None
            reaching = [limit]
    if not reaching:
        # its best measured buffer must settle first (repeats), else the arm falls short
        best = max(measured, key=lambda i: fmean(values(arm, grid[i])))
        v = verdict(best)
        return v if isinstance(v, WantedProbe) else None
    hi = min(reaching)
    lo = max((i for i in measured if i < hi and verdict(i) is False), default=-1)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        v = verdict(mid)
        if isinstance(v, WantedProbe):
            return v
        if v:
            hi = mid
        else:
            lo = mid
    return hi


def _filler(grid: Sequence[float], measured: Sequence[float]) -> float | None:
    """A grid buffer not measured yet, as far from the measured ones as possible (log scale)."""
    free = [b for b in grid if b not in measured]
    if not free:
        return None
    return max(free, key=lambda b: min(abs(math.log(b / m)) for m in measured))


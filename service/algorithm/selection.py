"""Subflow selection by measured value: forward selection over subsets, beside the paper's Ω.

Leave-one-out Ω cannot see harm that several thin subflows share (SRL-HU: removing any one of
six thin subflows changes nothing, so Ω keeps all eight, while U-C alone gives 18.8 Mbit/s and
every combination less). This measures what a subset delivers, at one buffer size and one CC:

1. each subflow alone, `min_runs` runs; the best mean is the start S;
2. forward selection: every S ∪ {i} `min_runs` times; the best candidate is added when its
   gain over S has an interval above `min_gain` (0), else the selection stops at S;
3. repeats only where they can change the decision: a positive gain whose interval reaches
   down to `min_gain` gets one more run (on the side that shrinks the interval most) while the
   measured means and spreads would settle it within `max_runs` runs per subset; a gain that is
   not positive gets none;
4. what was measured as a check: when the all-subflows subset (pass TP_0 and FullMesh's probes
   at this buffer in as its samples), or any other subset with runs (Ω's SP*, measured by the
   PCDC arm), has a settled positive gain over S, the best of them wins;
5. a subset that failed `MAX_FAILURES` times with no run is skipped; a `Budget` caps probes.

Per CC or shared: selection runs in full on a reference CC; every other CC, given the reference
result, first measures only the subsets the reference's decisions rest on (runner-up alone,
the path, the best rejected addition, all subflows) and shares its SP* when each decision holds
(settled ones the same way by this CC's means, ties not settled the other way); otherwise it
runs its own forward selection on top of those runs, from the better of the reference's start
and runner-up alone (the links rank alike alone under every CC; the subsets are re-measured).
Run the reference to completion first.
Intervals: `subset_stats`. Rules and measured reasons: docs/design.md, "Subflow selection".
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from .confidence_summary import Alternative
from .subset_stats import (
    Gain,
    Subset,
    SubsetEstimate,
    estimate,
    extra_runs_to_settle,
    gain,
    pooled_spread,
)

DEFAULT_CONFIDENCE = 0.9
MIN_RUNS = 2
MAX_RUNS = 4
MAX_FAILURES = 3  # failed probes of one subset after which, with no run, it is unusable


@dataclass(frozen=True)
class Budget:
    """What the selection may still spend: probes, probe-seconds (then `seconds_per_probe`, the
    cost of the next probe, is needed), either or both; None is no limit."""

    probes: int | None = None
    probe_seconds: float | None = None
    seconds_per_probe: float | None = None

    def __post_init__(self) -> None:
        if self.probes is not None and self.probes < 0:
            raise ValueError(f"budget.probes: must be >= 0, got {self.probes}")
        if self.probe_seconds is not None:
            if not self.seconds_per_probe or self.seconds_per_probe <= 0:
                raise ValueError("budget.seconds_per_probe: needed (> 0) with probe_seconds")
            if self.probe_seconds < 0:
                raise ValueError(f"budget.probe_seconds: must be >= 0, got {self.probe_seconds}")

    def probes_allowed(self) -> int | None:
        limits = []
        if self.probes is not None:
            limits.append(self.probes)
        if self.probe_seconds is not None:
            limits.append(math.floor(self.probe_seconds / self.seconds_per_probe + 1e-9))
        return min(limits) if limits else None


@dataclass(frozen=True)
class Step:
    """One decision of the selection path. `subset` is the subset kept after it. `gain` is the
    change the step weighed: start, the best alone over the runner-up alone; add, the new subset
    over the previous one; stop, the best candidate over the kept subset (what adding would have
    brought); all / measured, every subflow / another measured subset over the forward
    selection's subset. `settled`: its interval excludes zero (or there was nothing to weigh)."""

    # start | add | stop | all | measured | pending (waits for repeats, or the budget ended)
    decision: str
    subset: tuple[str, ...]
    estimate: SubsetEstimate
    subflow: str | None = None  # added (add) or the best rejected addition (stop)
    rival: tuple[str, ...] | None = None  # the other side of `gain`
    gain: Gain | None = None

    @property
    def settled(self) -> bool:
        return self.gain is None or self.gain.settled


@dataclass(frozen=True)
class SelectionResult:
    cc: str | None
    subflows: tuple[str, ...]
    subset: tuple[str, ...]  # SP*, in the subflows' order
    path: tuple[Step, ...]
    complete: bool  # nothing more to measure (False: still measuring, or out of budget)
    estimate: SubsetEstimate | None  # SP*'s goodput (None: nothing usable was measured)
    standbys: tuple[SubsetEstimate, ...]  # every other usable measured subset, best mean first
    within_reach: tuple[Alternative, ...]  # measured subsets whose interval overlaps SP*'s
    unusable: tuple[tuple[str, ...], ...]
    shared_from: str | None = None  # the reference CC whose SP* this CC shares
    contradicted: tuple[Step, ...] = ()  # the reference's decisions this CC's runs overturned
    reason: str = "selected"  # selected | measuring | budget | nothing_usable

    @property
    def settled(self) -> bool:
        """Complete, and no other measured subset is within reach of SP*."""
        return self.complete and self.estimate is not None and not self.within_reach

    @property
    def standby_subflows(self) -> tuple[str, ...]:
        """Subflows outside SP*, best alone first (unmeasured alone last): the failover order."""
        alone = {next(iter(e.subset)): e.mean_mbps for e in self.standbys if len(e.subset) == 1}
        rest = [n for n in self.subflows if n not in self.subset]
        return tuple(sorted(rest, key=lambda n: -alone.get(n, -1.0)))


@dataclass(frozen=True)
class SelectionState:
    """What the caller stores and passes back at every step: the runs per subset (goodput in
    Mbit/s, one per probe; a subset is any non-empty set of `subflows`), the failed probes per
    subset, and the fixed settings. Rebuilt from stored probes, it gives the same answer."""

    subflows: Sequence[str]
    samples: Mapping[Subset, Sequence[float]] = field(default_factory=dict)
    failures: Mapping[Subset, int] = field(default_factory=dict)
    cc: str | None = None
    reference: SelectionResult | None = None  # another CC's finished selection, to share
    budget: Budget = field(default_factory=Budget)
    confidence: float = DEFAULT_CONFIDENCE
    min_runs: int = MIN_RUNS
    max_runs: int = MAX_RUNS
    min_gain: float = 0.0  # an addition must raise goodput by more than this fraction

    def __post_init__(self) -> None:
        names = tuple(self.subflows)
        if not names:
            raise ValueError("subflows: empty")
        if len(set(names)) != len(names):
            raise ValueError("subflows: names repeat")
        if not 0 < self.confidence < 1:
            raise ValueError(f"confidence: must be in (0, 1), got {self.confidence!r}")
        if self.min_runs < 1 or self.max_runs < max(2, self.min_runs):
            raise ValueError("runs: need 1 <= min_runs <= max_runs and max_runs >= 2")
        if not 0 <= self.min_gain < 10:
            raise ValueError(f"min_gain: must be in [0, 10), got {self.min_gain!r}")
        object.__setattr__(self, "subflows", names)
        object.__setattr__(self, "samples", _checked_samples(self.samples, names))
        failures = {}
        for subset, count in self.failures.items():
            if int(count) < 0:
                raise ValueError(f"failures {sorted(subset)}: must be >= 0, got {count}")
            failures[_checked_subset(subset, names, "failures")] = int(count)
        object.__setattr__(self, "failures", failures)
        ref = self.reference
        if ref is not None and set(ref.subflows) != set(names):
            raise ValueError("reference: selected over other subflows")


def next_probes(state: SelectionState) -> list[Subset]:
    """The subsets to probe next, one entry per run (the same subset twice: two runs), in the
    order to run them; empty when the selection is complete or the budget allows nothing. The
    caller may run only the first and ask again."""
    wanted = _Selection(state).run().wanted
    allowed = state.budget.probes_allowed()
    return wanted if allowed is None else wanted[:allowed]


def result(state: SelectionState) -> SelectionResult:
    """SP*, its path and standbys from what was measured; provisional while probes are wanted."""
    return _Selection(state).run().result


def subset_label(subset: Sequence[str] | Subset, subflows: Sequence[str]) -> str:
    """How a statement names a subset: `U-C alone`, `U-C+K-C`, `all subflows`."""
    if set(subset) == set(subflows):
        return "all subflows"
    ordered = [n for n in subflows if n in subset]
    return f"{ordered[0]} alone" if len(ordered) == 1 else "+".join(ordered)


@dataclass
class _Outcome:
    wanted: list[Subset]
    result: SelectionResult


class _Selection:
    """One evaluation of a state: the path so far and the probes it still needs."""

    def __init__(self, state: SelectionState) -> None:
        self.s = state
        self.spread = pooled_spread(state.samples)
        self.full = frozenset(state.subflows)

    # -- measurements --------------------------------------------------------------------
    def runs(self, subset: Subset) -> int:
        return len(self.s.samples.get(subset, ()))

    def can_run(self, subset: Subset) -> bool:
        return self.s.failures.get(subset, 0) < MAX_FAILURES and self.runs(subset) < self.s.max_runs

    def usable(self, subset: Subset) -> bool:
        return self.runs(subset) > 0 or self.s.failures.get(subset, 0) < MAX_FAILURES

    def est(self, subset: Subset) -> SubsetEstimate:
        return estimate(subset, self.s.samples[subset], self.spread, self.s.confidence)

    def missing(self, subsets: Sequence[Subset], runs: int) -> list[Subset]:
        """Runs still needed to bring each subset to `runs`, interleaved by pass."""
        out = []
        for k in range(runs):
            out += [x for x in subsets if self.runs(x) <= k and self.can_run(x)]
        return out

    def ordered(self, subset: Subset) -> tuple[str, ...]:
        return tuple(n for n in self.s.subflows if n in subset)

    # -- the procedure ---------------------------------------------------------------------
    def run(self) -> _Outcome:
        ref = self.s.reference
        if ref is not None and ref.estimate is not None:
            shared = self._verify(ref)
            if shared is not None:
                return shared
        return self._forward()

    def _forward(self, contradicted: tuple[Step, ...] = ()) -> _Outcome:
        singles = self._starts(contradicted)
        wanted = self.missing(singles, self.s.min_runs)
        if wanted:
            return self._outcome(wanted, [], None, contradicted)
        alone = sorted((x for x in singles if self.runs(x)), key=lambda x: -self.est(x).mean_mbps)
        if not alone:
            return self._outcome([], [], None, contradicted, reason="nothing_usable")
        current = alone[0]
        rival = alone[1] if len(alone) > 1 else None
        path = [Step("start", self.ordered(current), self.est(current),
                     rival=None if rival is None else self.ordered(rival),
                     gain=None if rival is None else gain(self.est(rival), self.est(current)))]
        while True:
            candidates = [current | {n} for n in self.s.subflows if n not in current]
            candidates = [x for x in candidates if self.usable(x)]
            if not candidates:
                break
            wanted = self.missing(candidates, self.s.min_runs)
            if wanted:
                return self._outcome(wanted, path, current, contradicted)
            measured = [x for x in candidates if self.runs(x)]
            if not measured:
                break
            best = max(measured, key=lambda x: self.est(x).mean_mbps)
            (added,) = best - current
            g = gain(self.est(current), self.est(best))
            confirm = [x for x in (current, best) if self.runs(x) < 2 and self.can_run(x)]
            if g.low > self.s.min_gain and not confirm:
                path.append(Step("add", self.ordered(best), self.est(best), added,
                                 self.ordered(current), g))
                current = best
                continue
            if g.fraction > self.s.min_gain:
                repeat = confirm[:1] or self._repeat(current, best)
                if repeat:  # the path shows the decision waiting for it
                    path.append(Step("pending", self.ordered(current), self.est(current), added,
                                     self.ordered(best), g))
                    return self._outcome(repeat, path, current, contradicted)
            path.append(Step("stop", self.ordered(current), self.est(current), added,
                             self.ordered(best), g))
            break
        beaten = self._beaten_by(current)
        if beaten is not None:
            winner, g = beaten
            path.append(Step("all" if winner == self.full else "measured", self.ordered(winner),
                             self.est(winner), None, self.ordered(current), g))
            current = winner
        return self._outcome([], path, current, contradicted)

    def _starts(self, contradicted: tuple[Step, ...]) -> list[Subset]:
        """The subflows alone that may start the path: each one; or, for a CC whose runs
        overturned the reference's decisions, the reference's start and its runner-up alone
        (its check measured both here). A subflow alone runs on its own link, and the links
        rank alike under every CC: where CCs differ is the subsets, which are all measured
        again. (UNIS-HiN: cubic overturned bbr's T-B+U-U and re-measured all six alone, 8
        probes, to start again from U-U.)"""
        everything = [frozenset({n}) for n in self.s.subflows]
        ref = self.s.reference
        if not contradicted or ref is None or not ref.path or ref.path[0].decision != "start":
            return everything
        first = ref.path[0]
        pair = [frozenset(first.subset), *([frozenset(first.rival)] if first.rival else [])]
        return [x for x in pair if self.runs(x)] or everything

    def _beaten_by(self, current: Subset) -> tuple[Subset, Gain] | None:
        """The best measured subset whose gain over the path's end is settled above `min_gain`:
        all subflows (paths that only help together), or any subset the caller passed in (Ω's
        SP*, measured by the PCDC arm): SP* is never settled worse than something measured."""
        better = []
        for x in self.s.samples:
            if x != current and self.runs(x):
                g = gain(self.est(current), self.est(x))
                if g.low > self.s.min_gain:
                    better.append((x, g))
        if not better:
            return None
        return max(better, key=lambda p: (self.est(p[0]).mean_mbps, -len(p[0])))

    def _repeat(self, current: Subset, best: Subset) -> list[Subset]:
        plan = extra_runs_to_settle(self.est(current), self.est(best), self.s.max_runs,
                                    self.s.min_gain)
        if plan is None or not self.can_run(plan[0]):
            return []
        return [plan[0]]

    def _verify(self, ref: SelectionResult) -> _Outcome | None:
        """The reference's decisions checked on this CC's runs: the shared outcome, the probes
        the check still needs, or None when a decision was overturned (then: own selection)."""
        pairs = _decisive_pairs(ref)
        needed = [frozenset(x) for p in pairs for x in p[:2]]
        needed = list(dict.fromkeys(x for x in needed if self.usable(x)))
        wanted = self.missing(needed, self.s.min_runs)
        if wanted:
            return self._outcome(wanted, [], frozenset(ref.subset), shared_from=ref.cc)
        overturned, path = [], []
        for preferred, other, ref_step in pairs:
            kept, rival = frozenset(preferred), frozenset(other)
            if not (self.runs(kept) and self.runs(rival)):
                continue  # unusable here: nothing to contradict
            g = gain(self.est(rival), self.est(kept))
            ok = g.fraction > 0 if ref_step.settled else g.high >= 0
            if not ok:
                overturned.append(ref_step)
        if overturned:
            return self._forward(tuple(overturned))
        for step in ref.path:
            path.append(self._replayed(step))
        return self._outcome([], path, frozenset(ref.subset), shared_from=ref.cc)

    def _replayed(self, step: Step) -> Step:
        """A reference step with this CC's measurements (where they exist)."""
        subset = frozenset(step.subset)
        if not self.runs(subset):
            return step
        g = None
        if step.rival is not None and self.runs(frozenset(step.rival)):
            if step.decision in ("stop", "pending"):
                g = gain(self.est(subset), self.est(frozenset(step.rival)))
            else:
                g = gain(self.est(frozenset(step.rival)), self.est(subset))
        return Step(step.decision, step.subset, self.est(subset), step.subflow, step.rival, g)

    def _outcome(self, wanted, path, selected, contradicted=(), *, reason=None,
                 shared_from=None) -> _Outcome:
        complete = not wanted
        if reason is None:
            if complete:
                reason = "selected" if selected is not None else "nothing_usable"
            else:
                reason = "budget" if self.s.budget.probes_allowed() == 0 else "measuring"
        chosen = self.full if selected is None else selected
        est = self.est(chosen) if self.runs(chosen) else None
        standbys = sorted((self.est(x) for x in self.s.samples if x != chosen and self.runs(x)),
                          key=lambda e: (-e.mean_mbps, len(e.subset), self.ordered(e.subset)))
        reach = ()
        if est is not None and est.mean_mbps > 0:
            reach = tuple(
                Alternative(subset_label(e.subset, self.s.subflows),
                            e.mean_mbps / est.mean_mbps - 1, ("subset",))
                for e in standbys if e.overlaps(est))
        unusable = tuple(self.ordered(x) for x in self.s.failures if not self.usable(x))
        res = SelectionResult(
            self.s.cc, self.s.subflows, self.ordered(chosen), tuple(path), complete, est,
            tuple(standbys), reach, unusable, shared_from, tuple(contradicted), reason)
        return _Outcome(list(wanted), res)


def _decisive_pairs(ref: SelectionResult) -> list[tuple[tuple[str, ...], tuple[str, ...], Step]]:
    """(the subset the reference kept, the one it weighed it against, the step): every step keeps
    `subset` over `rival` (a stop keeps the subset over its best addition)."""
    return [(step.subset, step.rival, step) for step in ref.path
            if step.rival is not None and step.decision != "pending"]


def _checked_subset(subset, names: Sequence[str], where: str) -> Subset:
    if isinstance(subset, str):
        raise ValueError(f"{where}: {subset!r} is a name; a subset is a set of subflow names")
    members = frozenset(subset)
    if not members:
        raise ValueError(f"{where}: an empty subset")
    stray = sorted(members - set(names))
    if stray:
        raise ValueError(f"{where}: {stray[0]} is not one of the subflows")
    return members


def _checked_samples(samples, names: Sequence[str]) -> dict[Subset, tuple[float, ...]]:
    out: dict[Subset, tuple[float, ...]] = {}
    for subset, values in samples.items():
        key = _checked_subset(subset, names, "samples")
        vals = tuple(float(v) for v in values)
        bad = [v for v in vals if not math.isfinite(v) or v < 0]
        if bad:
            raise ValueError(f"samples {sorted(key)}: goodput must be finite and >= 0, "
                             f"got {bad[0]}")
        out[key] = out.get(key, ()) + vals
    return {k: v for k, v in out.items() if v}

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
5. a subset that failed `MAX_FAILURES` times with no run is skipped; a `Budget` caps probes;
6. with the topology's stated rates (`capacity.LinkCapacity`), probes whose outcome the rates
   already decide are left out: subflows alone are measured fastest first, and one whose rate
   is under `ALONE_MARGIN` of the best measured alone cannot start the path; additions whose
   bounded gains (`gain_bound_mbps`) together stay under `negligible` of S's goodput are not
   tried (`bounded`). Once a measurement exceeds its stated bound, the rates are ignored.

Per CC or shared: selection runs in full on a reference CC; every other CC, given the reference
result, first measures only the subsets the reference's decisions rest on (runner-up alone,
the path, the best rejected addition, all subflows) and shares its SP* when each decision holds
(settled ones not reversed by more than `negligible` by this CC's means, ties not settled the
other way by more than that, additions still bringing more than `min_gain`); otherwise it
runs its own forward selection on top of those runs, from the better of the reference's start
and runner-up alone (the links rank alike alone under every CC; the subsets are re-measured).
Run the reference to completion first.
Intervals: `subset_stats`. Rules and measured reasons: docs/algorithm.md, "Subflow selection".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .alternative import Alternative
from .selection_types import (  # noqa: F401 - the selection's types, re-exported
    DEFAULT_CONFIDENCE,
    MAX_RUNS,
    MIN_RUNS,
    Budget,
    SelectionResult,
    SelectionState,
    Step,
    subset_label,
)
from .subset_stats import (
    Gain,
    Subset,
    SubsetEstimate,
    estimate,
    extra_runs_to_settle,
    gain,
    pooled_spread,
)

MAX_FAILURES = 3  # failed probes of one subset after which, with no run, it is unusable
# A subflow whose stated rate is under this share of the best goodput measured alone cannot be
# the best alone: its rate bounds its goodput, and the share leaves room for a low first draw.
ALONE_MARGIN = 0.8


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
        means = {x: sum(v) / len(v) for x, v in state.samples.items()}
        cap = state.capacity
        self.rates = cap if cap is not None and cap.consistent(means) else None
        self.bounded: tuple[str, ...] = ()
        self.not_alone: tuple[str, ...] = ()

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
        ruled = self._all_by_rates()
        if ruled is not None:
            return ruled
        ref = self.s.reference
        if ref is not None and ref.estimate is not None and not _chosen_by_rates(ref):
            shared = self._verify(ref)
            if shared is not None:
                return shared
        return self._forward()

    def _forward(self, contradicted: tuple[Step, ...] = ()) -> _Outcome:
        singles = self._worth_alone(self._starts(contradicted))
        wanted = self.missing(singles, self.s.min_runs)
        if wanted:
            return self._outcome(wanted, [], None, contradicted)
        alone = sorted((x for x in singles if self.runs(x)), key=lambda x: -self.est(x).mean_mbps)
        if not alone:
            return self._outcome([], [], None, contradicted, reason="nothing_usable")
        current = self._quickest_of_tied(alone)
        rival = next((x for x in alone if x != current), None)
        path = [Step("start", self.ordered(current), self.est(current),
                     rival=None if rival is None else self.ordered(rival),
                     gain=None if rival is None else gain(self.est(rival), self.est(current)))]
        while True:
            candidates = [current | {n} for n in self.s.subflows if n not in current]
            candidates = self._worth_adding(current, [x for x in candidates if self.usable(x)])
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

    def _quickest_of_tied(self, alone: list[Subset]) -> Subset:
        """The start: the best subflow alone, or, among those whose mean is within
        `negligible` of the best's, the one with the shortest known RTT. Two paths through one
        uplink read its rate alike, and the one with the longer RTT needs a larger buffer for
        it (shared.yaml: D-T alone read 7.471 against D-U's 7.469 Mbit/s, 80 against 30 ms;
        PCDC on D-T needed 0.10 MiB where D-U needs 0.04). Means only, not intervals: the
        pooled spread widens as subsets are measured, and a start that became a tie halfway
        sent SRL-HU's selection down a second path (K-C, then U-C: 31 probes of 9 s)."""
        best = alone[0]
        rtts = self.s.rtts_ms or {}
        floor = (1 - self.s.negligible) * self.est(best).mean_mbps
        tied = [x for x in alone if self.est(x).mean_mbps >= floor]
        known = [x for x in tied if rtts.get(next(iter(x))) is not None]
        if len(known) < 2 or best not in known:
            return best
        return min(known, key=lambda x: (rtts[next(iter(x))], -self.est(x).mean_mbps))

    def _worth_alone(self, singles: list[Subset]) -> list[Subset]:
        """With trusted rates: the fastest stated first (the first probes set the bar), and
        none whose rate is under `ALONE_MARGIN` of the best mean measured alone."""
        if self.rates is None:
            return singles
        rate = {x: self.rates.alone_mbps(next(iter(x))) for x in singles}
        ranked = sorted(singles, key=lambda x: -rate[x])
        measured = [sum(v) / len(v) for x in ranked if (v := self.s.samples.get(x))]
        if not measured:
            return ranked
        bar = ALONE_MARGIN * max(measured)
        kept = [x for x in ranked if self.runs(x) or rate[x] >= bar]
        self.not_alone = tuple(n for n in self.s.subflows if frozenset({n}) not in kept
                               and frozenset({n}) in rate)
        return kept

    def _worth_adding(self, current: Subset, candidates: list[Subset]) -> list[Subset]:
        """With trusted rates: the unmeasured additions whose bounded gains, smallest first,
        add up to at most `negligible` of S's goodput are left out (`bounded`)."""
        self.bounded = ()
        if self.rates is None or self.s.negligible <= 0 or not self.runs(current):
            return candidates
        reached = self.est(current).mean_mbps
        bounds = {x: self.rates.gain_bound_mbps(current, next(iter(x - current)), reached)
                  for x in candidates if not self.runs(x)}
        room = self.s.negligible * reached
        skipped = set()
        for x in sorted(bounds, key=lambda x: (bounds[x], self.ordered(x))):
            if bounds[x] > room:
                break
            room -= bounds[x]
            skipped.add(x)
        self.bounded = tuple(n for n in self.s.subflows
                             if any(n in x - current for x in skipped))
        return [x for x in candidates if x not in skipped]

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

    def _all_by_rates(self) -> _Outcome | None:
        """With trusted rates: when all subflows together measured more than any proper
        subset can carry (by a margin for a high draw), SP* is every subflow and no subset is
        probed. (Two similar uplinks into one fast downlink: each alone is capped by its own
        uplink, both together measured their sum.)"""
        if self.rates is None or len(self.full) < 2 or not self.runs(self.full):
            return None
        reached = sum(self.s.samples[self.full]) / self.runs(self.full)
        most = max(self.rates.max_mbps(self.full - {n}) for n in self.full)
        if ALONE_MARGIN * reached <= most:
            return None
        return self._outcome([], [Step("all", self.ordered(self.full), self.est(self.full))],
                             self.full)

    def _ruled_out_by_rates(self, kept: Subset, rival: Subset) -> bool:
        """The rival cannot beat `kept` as measured: its stated rates are under it."""
        if self.rates is None or not self.runs(kept):
            return False
        reached = sum(self.s.samples[kept]) / self.runs(kept)
        return self.rates.max_mbps(rival) < ALONE_MARGIN * reached

    def _verify(self, ref: SelectionResult) -> _Outcome | None:
        """The reference's decisions checked on this CC's runs: the shared outcome, the probes
        the check still needs, or None when a decision was overturned (then: own selection).
        A rival whose stated rates are under the kept subset's measurement is not measured."""
        pairs = _decisive_pairs(ref)
        needed = []
        for kept, rival, _step in pairs:
            needed.append(frozenset(kept))
            if not self._ruled_out_by_rates(frozenset(kept), frozenset(rival)):
                needed.append(frozenset(rival))
        needed = list(dict.fromkeys(x for x in needed if self.usable(x)))
        wanted = self.missing(needed, self.s.check_runs)
        if wanted:
            return self._outcome(wanted, [], frozenset(ref.subset), shared_from=ref.cc)
        overturned, path = [], []
        for preferred, other, ref_step in pairs:
            kept, rival = frozenset(preferred), frozenset(other)
            if not (self.runs(kept) and self.runs(rival)):
                continue  # unusable here: nothing to contradict
            g = gain(self.est(rival), self.est(kept))
            # Following the reference where this CC's rival is ahead by no more than
            # `negligible` costs at most that: only a larger loss overturns a decision, and a
            # tie of the reference's only when this CC settles it the other way too (two
            # subflows alike, K-C and U-C on SRL-HU, settle either way by chance).
            costly = g.fraction < -self.s.negligible or (
                self.s.negligible == 0 and g.fraction <= 0)
            ok = not costly if ref_step.settled else (g.high >= 0 or not costly)
            if ref_step.decision == "add" and g.fraction <= self.s.min_gain:
                ok = False  # the addition does not pay here: a smaller subset does as well
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
            tuple(standbys), reach, unusable, shared_from, tuple(contradicted), reason,
            self.bounded, self.not_alone)
        return _Outcome(list(wanted), res)


def _chosen_by_rates(ref: SelectionResult) -> bool:
    """The reference chose every subflow by the stated rates alone: there is no decision of
    its to check, so another CC whose own runs do not rule the same way selects for itself."""
    return len(ref.path) == 1 and ref.path[0].decision == "all" and ref.path[0].rival is None


def _decisive_pairs(ref: SelectionResult) -> list[tuple[tuple[str, ...], tuple[str, ...], Step]]:
    """(the subset the reference kept, the one it weighed it against, the step): every step keeps
    `subset` over `rival` (a stop keeps the subset over its best addition)."""
    return [(step.subset, step.rival, step) for step in ref.path
            if step.rival is not None and step.decision != "pending"]

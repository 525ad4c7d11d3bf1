"""What a subflow selection (`selection.py`) is given and answers: the state (runs per subset,
failures, settings, the budget, the stated rates) and the result (its path of decisions, SP*
with its estimate and standbys).

The result is stored as it is, in a campaign's state (`state.selection_state.Selection`, per
CC): `SelectionResult.to_dict` is the stored JSON form (the `run_state` column, bundle versions
1 and 2) and `from_dict` reads every form ever stored (`stored_form`): what a user reads of it
(SP*'s label, whether it is usable and settled, the standbys in failover order) is computed when
the result is made and stored with it; the working figures behind it (the other subsets'
estimates, the subflows' names, the unusable subsets) are not, and a value read back has them
empty."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

from .alternative import Alternative
from .capacity import LinkCapacity
from .stored_form import (
    OTHER,
    PRESENT,
    StoredForm,
    each,
    flag,
    names,
    nested,
    text,
)
from .subset_stats import Gain, Subset, SubsetEstimate, stored_figure

DEFAULT_CONFIDENCE = 0.9
MIN_RUNS = 2
MAX_RUNS = 4


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


def _rival(value: Any) -> tuple[str, ...] | None:
    return None if value is None else names(value)


def subset_label(subset: Sequence[str] | Subset, subflows: Sequence[str]) -> str:
    """How a statement names a subset: `U-C alone`, `U-C+K-C`, `all subflows`."""
    if set(subset) == set(subflows):
        return "all subflows"
    ordered = [n for n in subflows if n in subset]
    return f"{ordered[0]} alone" if len(ordered) == 1 else "+".join(ordered)


@dataclass(frozen=True)
class Step(StoredForm):
    """One decision of the selection path. `subset` is the subset kept after it. `gain` is the
    change the step weighed: start, the best alone over the runner-up alone; add, the new subset
    over the previous one; stop, the best candidate over the kept subset (what adding would have
    brought); all / measured, every subflow / another measured subset over the forward
    selection's subset. `settled`: its interval excludes zero (or there was nothing to weigh).
    `label`: the subset as a user reads it, given when its result is made."""

    # start | add | stop | all | measured | pending (waits for repeats, or the budget ended)
    decision: str = ""
    subset: tuple[str, ...] = ()
    estimate: SubsetEstimate | None = None
    subflow: str | None = None  # added (add) or the best rejected addition (stop)
    rival: tuple[str, ...] | None = None  # the other side of `gain`
    gain: Gain | None = None
    label: str | None = None
    settled: bool | None = None
    other: Mapping[str, Any] = OTHER()
    present: frozenset[str] | None = PRESENT()
    READERS: ClassVar = {"decision": text, "subset": names, "label": text, "subflow": text,
                         "rival": _rival, "estimate": nested(SubsetEstimate),
                         "gain": nested(Gain), "settled": flag}

    def __post_init__(self) -> None:
        if self.present is None and self.settled is None:
            object.__setattr__(self, "settled", self.gain is None or bool(self.gain.settled))


@dataclass(frozen=True)
class OmegaView(StoredForm):
    """Ω's SP* beside the measured one, whether they agree and the sentence that says so
    (`selection_omega.OmegaComparison.view`)."""

    subset: tuple[str, ...] = ()
    agree: bool | None = None
    statement: str | None = None
    other: Mapping[str, Any] = OTHER()
    present: frozenset[str] | None = PRESENT()
    READERS: ClassVar = {"subset": names, "agree": flag, "statement": text}


def _within_reach(alternatives: Sequence[Alternative]) -> list:
    """A selection's subsets within reach as stored: label and relative mean (6 decimals)."""
    return [{"label": a.label, "relative": stored_figure(a.relative)} if a.present is None
            else a for a in alternatives]


@dataclass(frozen=True)
class SelectionResult(StoredForm):
    """A CC's selection: SP* (`subset`, in the subflows' order) with its estimate and `path`,
    whether it is `complete` (nothing more to measure) and settled, the other usable measured
    subsets (`standbys`, best mean first) and those within reach of SP*, the CC it shares SP*
    with (`shared_from`), the reference's decisions this CC's runs overturned, the subflows not
    tried (`bounded`, `not_alone`); for the answer the flow adds the fixed-buffer check
    (`buffer_check`), Ω's view (`omega`) and, for a stream, the metric weighed and why a
    subflow is kept (`metric`, `why`: `selection_stream.delay_view`)."""

    cc: str | None = None
    subflows: tuple[str, ...] = ()
    subset: tuple[str, ...] = ()  # SP*, in the subflows' order
    path: tuple[Step, ...] = ()
    complete: bool | None = False  # nothing more to measure (False: measuring, or out of budget)
    estimate: SubsetEstimate | None = None  # SP*'s goodput (None: nothing usable was measured)
    standbys: tuple[SubsetEstimate, ...] = ()  # every other usable measured subset, best first
    within_reach: tuple[Alternative, ...] = ()  # measured subsets whose interval overlaps SP*'s
    unusable: tuple[tuple[str, ...], ...] = ()
    shared_from: str | None = None  # the reference CC whose SP* this CC shares
    contradicted: tuple[Step, ...] = ()  # the reference's decisions this CC's runs overturned
    reason: str | None = "selected"  # selected | measuring | budget | nothing_usable
    # subflows not tried as the last addition: their stated rates bound the gain below negligible
    bounded: tuple[str, ...] = ()
    # subflows not measured alone: their stated rates are under the best alone's goodput
    not_alone: tuple[str, ...] = ()
    # what a user reads of it, computed when it is made (`revised` computes them again)
    label: str | None = None
    usable: bool | None = None  # SP* rests on a measurement
    settled: bool | None = None  # complete, and no other measured subset within reach of SP*
    standby_subflows: tuple[str, ...] | None = None  # outside SP*, best alone first: failover
    # what the flow adds for the answer
    buffer_check: Mapping[str, Any] | None = None
    omega: OmegaView | None = None
    metric: str | None = None
    why: str | None = None
    other: Mapping[str, Any] = OTHER()
    present: frozenset[str] | None = PRESENT()
    READERS: ClassVar = {
        "subset": names, "label": text, "usable": flag, "complete": flag, "settled": flag,
        "reason": text, "shared_from": text, "estimate": nested(SubsetEstimate),
        "path": each(Step), "standby_subflows": names, "within_reach": each(Alternative),
        "contradicted": each(Step), "bounded": names, "not_alone": names,
        "buffer_check": lambda v: None if v is None else dict(_mapping(v)),
        "omega": nested(OmegaView), "metric": text, "why": text,
    }
    WRITERS: ClassVar = {"within_reach": _within_reach}
    OPTIONAL: ClassVar = frozenset({"buffer_check", "omega", "metric", "why"})

    def __post_init__(self) -> None:
        if self.present is not None:
            return  # read back: as it was stored
        names_ = self.subflows

        def labelled(steps: tuple[Step, ...]) -> tuple[Step, ...]:
            return tuple(s if s.label is not None or not names_
                         else replace(s, label=subset_label(s.subset, names_)) for s in steps)

        object.__setattr__(self, "path", labelled(self.path))
        object.__setattr__(self, "contradicted", labelled(self.contradicted))
        if self.label is None and names_:
            object.__setattr__(self, "label", subset_label(self.subset, names_))
        if self.usable is None:
            object.__setattr__(self, "usable", self.estimate is not None)
        if self.settled is None:
            object.__setattr__(self, "settled", bool(
                self.complete and self.estimate is not None and not self.within_reach))
        if self.standby_subflows is None:
            alone = {next(iter(e.subset)): e.mean_mbps for e in self.standbys
                     if len(e.subset) == 1}
            rest = [n for n in names_ if n not in self.subset]
            object.__setattr__(self, "standby_subflows",
                               tuple(sorted(rest, key=lambda n: -alone.get(n, -1.0))))

    def revised(self, **changes: Any) -> SelectionResult:
        """The result with `changes`, what a user reads of it computed again."""
        return replace(self, **changes, label=None, usable=None, settled=None,
                       standby_subflows=None)

    def path_dicts(self) -> list[dict[str, Any]]:
        """The path's JSON form (an answer's `subset_choice.path`)."""
        return [s.to_dict() for s in self.path]


def _mapping(value: Any) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ValueError(value)
    return value


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
    # runs per subset when checking a reference's decisions: their verdicts are read off means
    # (a reversal beyond `negligible`, an addition under `min_gain`), and a tie of the
    # reference's is overturned only when settled the other way, which one run never claims
    check_runs: int = 1
    capacity: LinkCapacity | None = None  # the topology's stated rates (None: not used)
    # additions whose bounded gains together stay under this share of S's goodput are not tried
    negligible: float = 0.0
    # per subflow its round-trip time (ms), where known: among subflows alone that tie, the
    # path starts on the quickest (the same rate from a smaller buffer)
    rtts_ms: Mapping[str, float] | None = None

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
        if not 1 <= self.check_runs <= self.max_runs:
            raise ValueError(f"check_runs: must be in [1, max_runs], got {self.check_runs!r}")
        if not 0 <= self.min_gain < 10:
            raise ValueError(f"min_gain: must be in [0, 10), got {self.min_gain!r}")
        if not 0 <= self.negligible < 1:
            raise ValueError(f"negligible: must be in [0, 1), got {self.negligible!r}")
        if self.capacity is not None and set(names) - set(self.capacity.ends):
            raise ValueError("capacity: has no rates for some subflows")
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

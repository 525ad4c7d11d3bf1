"""What an adaptive sweep decided, as the campaign state keeps it (`CampaignState.sweep_decision`).

Two kinds: a bulk campaign's sweep (`flows.campaign.phases.adaptive_sweep`) stores a
`BulkSweepDecision` (OPM, OCC, OBS, OTP, T*, the promise a fresh probe should keep), a stream
campaign's (`phases.stream_sweep`) a `StreamSweepDecision` (the chosen point's p99 frame delay,
which arms carry the stream); its stored form says `"objective": "stream"`. Both say why the
sweep stopped (`stop`: "settled" or "budget").

`to_dict` is the stored JSON form (the `run_state` column, bundle versions 1 and 2, where it is
`notes["adaptive"]`); `read_sweep_decision` reads every form ever stored. A value read from a
stored form writes back the keys that form had: an older form lacking a key reads it as its
default and writes it back without it, so the campaign report and an exported bundle show what
was stored. A key this version does not name, or a named one whose value is not of its type (an
imported bundle's may be anything), is kept in `other` as it was and written back so; the typed
field then reads its default (`models.stored_form`).

Nothing outside this module reads the stored decision by key.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar

from .stored_form import (
    PRESENT,
    StoredForm,
    count,
    flag,
    names,
    nested,
    number,
    text,
    why,
)

STOP_SETTLED = "settled"  # the decision settled
STOP_BUDGET = "budget"  # the budget (or the grid's probe count) stopped the sweep
STREAM = "stream"  # the stored form's "objective" of a stream sweep's decision

@dataclass(frozen=True)
class DecidedPromise(StoredForm):
    """Where one fresh probe of the answer should land (`of`: "one fresh probe", or "the mean"
    where no spread is known), in Mbit/s."""

    low_mbps: float | None = None
    high_mbps: float | None = None
    of: str | None = None
    other: Mapping[str, Any] = field(default_factory=dict)
    present: frozenset[str] | None = PRESENT
    READERS: ClassVar = {"low_mbps": number, "high_mbps": number, "of": text}


@dataclass(frozen=True)
class StoredAlternative(StoredForm):
    """A configuration the measurements cannot tell apart from the decided one
    (`algorithm.alternative.Alternative` as stored); a selection's subset within reach of SP*
    (`SelectedCC.within_reach`) is stored with its label and relative mean only."""

    label: str | None = None
    relative: float | None = None
    differs_in: tuple[str, ...] = ()
    other: Mapping[str, Any] = field(default_factory=dict)
    present: frozenset[str] | None = PRESENT
    READERS: ClassVar = {"label": text, "relative": number, "differs_in": names}


def _alternatives(value: Any) -> tuple[StoredAlternative, ...]:
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, Mapping) for v in value):
        raise ValueError(value)
    return tuple(StoredAlternative.from_dict(v) for v in value)


@dataclass(frozen=True)
class SpreadAtObs(StoredForm):
    """The spread of the rate inside the probes at OBS (`window_spread`): the sd of one
    interval, intervals per run, the runs and how many never settled, the half-width it adds."""

    interval_sd_mbps: float | None = None
    intervals_per_run: float | None = None
    runs: int | None = None
    unsteady_runs: int | None = None
    half_width_mbps: float | None = None
    other: Mapping[str, Any] = field(default_factory=dict)
    present: frozenset[str] | None = PRESENT
    READERS: ClassVar = {"interval_sd_mbps": number, "intervals_per_run": number,
                         "runs": number, "unsteady_runs": number, "half_width_mbps": number}


@dataclass(frozen=True)
class PathVariation(StoredForm):
    """Whether the path moved over time under the campaign's probes (`varies`) and by how much
    at the decided configuration (`algorithm.adaptive.variation.Variation` as stored)."""

    varies: bool | None = None
    runs: int | None = None
    span_s: float | None = None
    p10_mbps: float | None = None
    p90_mbps: float | None = None
    spread_mbps: float | None = None
    run_low_mbps: float | None = None
    run_high_mbps: float | None = None
    between_rel_sd: float | None = None
    between_dof: int | None = None
    expected_rel_sd: float | None = None
    other: Mapping[str, Any] = field(default_factory=dict)
    present: frozenset[str] | None = PRESENT
    READERS: ClassVar = {"varies": flag, "runs": number, "span_s": number,
                         "p10_mbps": number, "p90_mbps": number, "spread_mbps": number,
                         "run_low_mbps": number, "run_high_mbps": number,
                         "between_rel_sd": number, "between_dof": number,
                         "expected_rel_sd": number}


@dataclass(frozen=True)
class BulkSweepDecision(StoredForm):
    """A bulk campaign's adaptive sweep decision (`algorithm.adaptive.BulkDecision` as stored,
    with what the answer promises): OPM, OCC, OBS, OTP with its half-width, T* and whether it
    held, the target, the arms that survived or were eliminated, what is settled, the promise
    and its statement, the alternatives within reach, the path's variation and the spread at
    OBS; `pcdc_as_fullmesh`: the CCs whose PCDC arm was measured as FullMesh."""

    stop: str | None = None
    opm: str | None = None
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
    t_star_held: bool | None = None
    pm_settled: bool | None = None
    cc_settled: bool | None = None
    promise: DecidedPromise | None = None
    alternatives: tuple[StoredAlternative, ...] = ()
    subset_settled: bool | None = None
    statement: str | None = None
    variation: PathVariation | None = None
    spread_at_obs: SpreadAtObs | None = None
    pcdc_as_fullmesh: tuple[str, ...] = ()
    confidence: float | None = None
    other: Mapping[str, Any] = field(default_factory=dict)
    present: frozenset[str] | None = PRESENT
    READERS: ClassVar = {
        "stop": text, "opm": text, "occ": text, "obs_mib": number, "otp_mbps": number,
        "otp_half_width_mbps": number, "t_star_mbps": number, "target_mbps": number,
        "survivors": names, "eliminated": names, "otp_runs": count,
        "t_star_half_width_mbps": number, "t_star_runs": count, "t_star_held": flag,
        "pm_settled": flag, "cc_settled": flag, "promise": nested(DecidedPromise),
        "alternatives": _alternatives, "subset_settled": flag, "statement": text,
        "variation": nested(PathVariation), "spread_at_obs": nested(SpreadAtObs),
        "pcdc_as_fullmesh": names, "confidence": number,
    }

    @property
    def settled(self) -> bool:
        return self.stop == STOP_SETTLED

    @property
    def answers(self) -> bool:
        """Settled on a configuration: OPM and OBS decided (the campaign's answer at finish)."""
        return self.settled and self.opm is not None and self.obs_mib is not None

    @property
    def unsteady_at_obs(self) -> bool:
        """The rate inside a probe at OBS never settled in some run (the promise is wide)."""
        return bool(self.spread_at_obs is not None and self.spread_at_obs.unsteady_runs)

    @property
    def path_varies(self) -> bool:
        return bool(self.variation is not None and self.variation.varies)


@dataclass(frozen=True)
class StreamSweepDecision(StoredForm):
    """A stream campaign's adaptive sweep decision (`algorithm.stream_choice.StreamDecision` as
    stored, without the probes it still wanted): the chosen point, its p99 frame delay with the
    half-width, goodput and loss, the arm's best point and the limit (1 + delta) x best, which
    arms carry the stream and why the others do not, what is settled;
    `pcdc_as_fullmesh` as for a bulk decision."""

    stop: str | None = None
    settled: bool = False
    opm: str | None = None
    occ: str | None = None
    obs_mib: float | None = None
    p99_ms: float | None = None
    p99_half_width_ms: float | None = None
    goodput_mbps: float | None = None
    lost_fraction: float | None = None
    best_p99_ms: float | None = None
    best_bs_mib: float | None = None
    limit_p99_ms: float | None = None
    skipped_edge_mib: float | None = None
    carrying: tuple[str, ...] = ()
    not_carrying: Mapping[str, str] = field(default_factory=dict)
    alternatives: tuple[StoredAlternative, ...] = ()
    pm_settled: bool = False
    cc_settled: bool = False
    confidence: float | None = None
    pcdc_as_fullmesh: tuple[str, ...] = ()
    other: Mapping[str, Any] = field(default_factory=dict)
    present: frozenset[str] | None = PRESENT
    CONSTANT: ClassVar = {"objective": STREAM}
    READERS: ClassVar = {
        "stop": text, "settled": flag, "opm": text, "occ": text, "obs_mib": number,
        "p99_ms": number, "p99_half_width_ms": number, "goodput_mbps": number,
        "lost_fraction": number, "best_p99_ms": number, "best_bs_mib": number,
        "limit_p99_ms": number, "skipped_edge_mib": number, "carrying": names,
        "not_carrying": why, "alternatives": _alternatives, "pm_settled": flag,
        "cc_settled": flag, "confidence": number, "pcdc_as_fullmesh": names,
    }

    # a bulk decision's checks (`campaign_report.flags`): a stream decision has neither
    unsteady_at_obs: ClassVar[bool] = False
    path_varies: ClassVar[bool] = False

    def decision_fields(self) -> dict[str, Any]:
        """The decision's own fields by name (what `StreamDecision` takes), nested values as
        they are typed here."""
        skip = {"stop", "other", "present"}
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name not in skip}


SweepDecision = BulkSweepDecision | StreamSweepDecision


def read_sweep_decision(data: Mapping[str, Any] | SweepDecision | None) -> SweepDecision | None:
    """A stored decision (every form: see the module's docstring) as its type; None stays
    None. A stream sweep's says so (`"objective": "stream"`); any other is a bulk sweep's."""
    if data is None or isinstance(data, (BulkSweepDecision, StreamSweepDecision)):
        return data
    if not isinstance(data, Mapping):
        raise ValueError(f"a sweep decision is a JSON object, not {type(data).__name__}")
    kind = StreamSweepDecision if data.get("objective") == STREAM else BulkSweepDecision
    return kind.from_dict(data)

"""What an adaptive sweep ended with, as the campaign state keeps it
(`CampaignState.sweep_decision`): the algorithm's own decision, why the sweep stopped and what
the flow derived from it.

Two kinds: a bulk campaign's sweep (`flows.campaign.phases.adaptive_sweep`) ends with a
`BulkSweepOutcome`: `adaptive.BulkDecision` (OPM, OCC, OBS, OTP, T*, ...) with the promise a
fresh probe should keep, its statement, the path's variation (`adaptive.variation.Variation`) and
the spread at OBS (`window_spread.WindowSpread`); a stream campaign's (`phases.stream_sweep`) a
`StreamSweepOutcome`: `stream_choice.StreamDecision`, whose stored form says
`"objective": "stream"`. Both say why the sweep stopped (`stop`: "settled" or "budget") and which
CCs' PCDC arm was measured as FullMesh (`pcdc_as_fullmesh`).

The stored JSON form is one flat object (the `run_state` column, bundle versions 1 and 2, where
it is `notes["adaptive"]`): the outcome's own keys beside the decision's, as each type's
`to_dict` writes them; `read_sweep_decision` reads every form ever stored. A value read from a
stored form writes back the keys that form had (an older form lacking a key reads it as its
default and writes it back without it); a key neither names, or a named one whose value is not of
its type, is kept in the decision's `other` as it was and written back so
(`algorithm.stored_form`).

Nothing outside this module reads the stored decision by key.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

from ..algorithm.adaptive import BulkDecision
from ..algorithm.adaptive.variation import Variation
from ..algorithm.stored_form import (
    OTHER,
    PRESENT,
    StoredForm,
    flag,
    names,
    nested,
    number,
    text,
)
from ..algorithm.stream_choice import StreamDecision
from ..algorithm.window_spread import WindowSpread

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
    other: Mapping[str, Any] = OTHER()
    present: frozenset[str] | None = PRESENT()
    READERS: ClassVar = {"low_mbps": number, "high_mbps": number, "of": text}


class _Outcome(StoredForm):
    """A flat stored form split between the outcome's own keys (its `READERS`) and its
    decision's (`DECISION`, the algorithm's type, which keeps any key neither names)."""

    DECISION: ClassVar[type]
    ORDER: ClassVar[tuple[str, ...]]  # the stored form's key order

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]):
        own_keys = {*cls.READERS, *cls.CONSTANT}
        own = super().from_dict({k: v for k, v in data.items() if k in own_keys})
        decision = cls.DECISION.from_dict({k: v for k, v in data.items() if k not in own_keys})
        return replace(own, decision=decision)

    def to_dict(self) -> dict[str, Any]:
        out = {**super().to_dict(), **self.decision.to_dict()}
        rank = {k: i for i, k in enumerate(self.ORDER)}
        return dict(sorted(out.items(), key=lambda kv: rank.get(kv[0], len(rank))))


@dataclass(frozen=True)
class BulkSweepOutcome(_Outcome):
    """A bulk campaign's adaptive sweep: its `decision` (`adaptive.BulkDecision`, settled when
    `stop` is "settled"), the promise a fresh probe of its answer should keep and the sentence
    that states it (with the selection's verdict on the subset, `subset_settled`), the path's
    variation and the spread inside the probes at OBS; `pcdc_as_fullmesh`: the CCs whose PCDC
    arm was measured as FullMesh. `other` and `present`: the outcome's own keys' (see the
    module)."""

    decision: BulkDecision = field(default_factory=BulkDecision)
    stop: str | None = None
    promise: DecidedPromise | None = None
    subset_settled: bool | None = None
    statement: str | None = None
    variation: Variation | None = None
    spread_at_obs: WindowSpread | None = None
    pcdc_as_fullmesh: tuple[str, ...] = ()
    other: Mapping[str, Any] = OTHER()
    present: frozenset[str] | None = PRESENT()
    READERS: ClassVar = {
        "stop": text, "promise": nested(DecidedPromise), "subset_settled": flag,
        "statement": text, "variation": nested(Variation),
        "spread_at_obs": nested(WindowSpread), "pcdc_as_fullmesh": names,
    }
    DECISION: ClassVar = BulkDecision
    ORDER: ClassVar = (
        "stop", "opm", "occ", "obs_mib", "otp_mbps", "otp_half_width_mbps", "t_star_mbps",
        "target_mbps", "survivors", "eliminated", "otp_runs", "t_star_half_width_mbps",
        "t_star_runs", "t_star_held", "pm_settled", "cc_settled", "promise", "alternatives",
        "subset_settled", "statement", "variation", "spread_at_obs", "pcdc_as_fullmesh",
        "confidence")

    def __post_init__(self) -> None:
        # the stored form has no "settled": the decision settled when the sweep said so
        if self.decision.settled != self.settled:
            object.__setattr__(self, "decision", replace(self.decision, settled=self.settled))

    @property
    def settled(self) -> bool:
        return self.stop == STOP_SETTLED

    @property
    def answers(self) -> bool:
        """Settled on a configuration: OPM and OBS decided (the campaign's answer at finish)."""
        d = self.decision
        return self.settled and d.opm is not None and d.obs_mib is not None

    @property
    def unsteady_at_obs(self) -> bool:
        """The rate inside a probe at OBS never settled in some run (the promise is wide)."""
        return bool(self.spread_at_obs is not None and self.spread_at_obs.unsteady)

    @property
    def path_varies(self) -> bool:
        return bool(self.variation is not None and self.variation.varies)


@dataclass(frozen=True)
class StreamSweepOutcome(_Outcome):
    """A stream campaign's adaptive sweep: its `decision` (`stream_choice.StreamDecision`: the
    chosen point, its p99 frame delay with the half-width, which arms carry the stream, what is
    settled), why it stopped and `pcdc_as_fullmesh` as for a bulk sweep."""

    decision: StreamDecision = field(default_factory=StreamDecision)
    stop: str | None = None
    pcdc_as_fullmesh: tuple[str, ...] = ()
    other: Mapping[str, Any] = OTHER()
    present: frozenset[str] | None = PRESENT()
    CONSTANT: ClassVar = {"objective": STREAM}
    READERS: ClassVar = {"stop": text, "pcdc_as_fullmesh": names}
    DECISION: ClassVar = StreamDecision
    ORDER: ClassVar = (
        "objective", "stop", "settled", "opm", "occ", "obs_mib", "p99_ms", "p99_half_width_ms",
        "goodput_mbps", "lost_fraction", "best_p99_ms", "best_bs_mib", "limit_p99_ms",
        "skipped_edge_mib", "carrying", "not_carrying", "alternatives", "pm_settled",
        "cc_settled", "confidence", "pcdc_as_fullmesh")

    # a bulk outcome's checks (`campaign_report.flags`): a stream outcome has neither
    unsteady_at_obs: ClassVar[bool] = False
    path_varies: ClassVar[bool] = False


SweepOutcome = BulkSweepOutcome | StreamSweepOutcome


def read_sweep_decision(data: Mapping[str, Any] | SweepOutcome | None) -> SweepOutcome | None:
    """A stored decision (every form: see the module's docstring) as its type; None stays
    None. A stream sweep's says so (`"objective": "stream"`); any other is a bulk sweep's."""
    if data is None or isinstance(data, (BulkSweepOutcome, StreamSweepOutcome)):
        return data
    if not isinstance(data, Mapping):
        raise ValueError(f"a sweep decision is a JSON object, not {type(data).__name__}")
    kind = StreamSweepOutcome if data.get("objective") == STREAM else BulkSweepOutcome
    return kind.from_dict(data)

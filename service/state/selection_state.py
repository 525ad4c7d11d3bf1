"""The measured subflow selection as the campaign's state keeps it (`CampaignState.selection`).

`flows.campaign.phases.selection` decides it once per campaign: per CC, SP* (the subset that
measurably delivers most), the path that led there, the standbys and Ω's view. Everything that
reads it (the sweep, the answer, the report, the dashboard, the bundle) reads these attributes;
`to_dict` is the stored JSON form (the `run_state` column, bundle versions 1 and 2) and
`from_dict` reads every form ever stored: keys a form did not have take their defaults, keys this
version does not name are kept in `other` and written back as they were.

A stream objective's selection weighs p99 frame delay (`metric` set): its estimates carry the
delay view (`carries`, `p99_*`) and its gains `p99_change`; `to_dict` writes those keys only then.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..algorithm.alternative import Alternative

_ESTIMATE = ("subset", "runs", "mean_mbps", "low_mbps", "high_mbps")
_DELAY = ("carries", "p99_ms", "p99_low_ms", "p99_high_ms")
_GAIN = ("fraction", "low", "high", "settled", "p99_change")
_STEP = ("decision", "subset", "label", "subflow", "rival", "estimate", "gain", "settled")
_OMEGA = ("subset", "agree", "statement")
_ENTRY = ("subset", "label", "usable", "complete", "settled", "reason", "shared_from",
          "estimate", "path", "standby_subflows", "within_reach", "contradicted", "bounded",
          "not_alone", "buffer_check", "omega", "metric", "why")


def _other(data: Mapping[str, Any], named: Iterable[str]) -> dict[str, Any]:
    return {k: v for k, v in data.items() if k not in named}


def _written(out: dict[str, Any], present: frozenset[str] | None, optional: Iterable[str],
             other: Mapping[str, Any]) -> dict[str, Any]:
    """`out` as stored: a value read from a stored form writes back the keys that form had (an
    older form lacks some: it reads and writes as it was); a new value writes every key but
    the `optional` ones that are None (a key the phase did not write)."""
    if present is not None:
        out = {k: v for k, v in out.items() if k in present}
    else:
        out = {k: v for k, v in out.items() if k not in optional or v is not None}
    return {**out, **other}


# the keys a value was read with (`_written`); not part of its meaning
_PRESENT = field(default=None, compare=False, repr=False)


def _names(value: Iterable[str] | None) -> tuple[str, ...]:
    return tuple(value) if isinstance(value, (list, tuple)) else ()


def _objects(value: Any) -> list[Mapping[str, Any]]:
    """The JSON objects of a list (an imported bundle's may hold anything: not an object, left
    out, rather than failing every read of the campaign)."""
    return [v for v in value if isinstance(v, Mapping)] if isinstance(value, (list, tuple)) else []


@dataclass(frozen=True)
class SelectionEstimate:
    """A subset's measured value: goodput (Mbit/s, mean and interval) over `runs` runs; for a
    stream also the p99 frame delay (ms) those scores stand for and whether the runs carried."""

    subset: tuple[str, ...] = ()
    runs: int = 0
    mean_mbps: float | None = None
    low_mbps: float | None = None
    high_mbps: float | None = None
    carries: bool | None = None
    p99_ms: float | None = None
    p99_low_ms: float | None = None
    p99_high_ms: float | None = None
    other: Mapping[str, Any] = field(default_factory=dict)
    present: frozenset[str] | None = _PRESENT

    def to_dict(self, delay: bool = False) -> dict[str, Any]:
        out = {"subset": list(self.subset), "runs": self.runs, "mean_mbps": self.mean_mbps,
               "low_mbps": self.low_mbps, "high_mbps": self.high_mbps}
        if delay or self.present is not None:
            out.update(carries=self.carries, p99_ms=self.p99_ms, p99_low_ms=self.p99_low_ms,
                       p99_high_ms=self.p99_high_ms)
        return _written(out, self.present, (), self.other)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> SelectionEstimate | None:
        if not isinstance(data, Mapping):
            return None
        return cls(subset=_names(data.get("subset")), runs=data.get("runs") or 0,
                   mean_mbps=data.get("mean_mbps"), low_mbps=data.get("low_mbps"),
                   high_mbps=data.get("high_mbps"), carries=data.get("carries"),
                   p99_ms=data.get("p99_ms"), p99_low_ms=data.get("p99_low_ms"),
                   p99_high_ms=data.get("p99_high_ms"), other=_other(data, _ESTIMATE + _DELAY),
                   present=frozenset(data))


@dataclass(frozen=True)
class SelectionGain:
    """What adding a subflow gained (a fraction with its interval); for a stream also the change
    of p99 frame delay it stands for (−0.2: 20 % lower)."""

    fraction: float | None = None
    low: float | None = None
    high: float | None = None
    settled: bool | None = None
    p99_change: float | None = None
    other: Mapping[str, Any] = field(default_factory=dict)
    present: frozenset[str] | None = _PRESENT

    def to_dict(self, delay: bool = False) -> dict[str, Any]:
        out = {"fraction": self.fraction, "low": self.low, "high": self.high,
               "settled": self.settled}
        if delay or self.present is not None:
            out["p99_change"] = self.p99_change
        return _written(out, self.present, (), self.other)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> SelectionGain | None:
        if not isinstance(data, Mapping):
            return None
        return cls(fraction=data.get("fraction"), low=data.get("low"), high=data.get("high"),
                   settled=data.get("settled"), p99_change=data.get("p99_change"),
                   other=_other(data, _GAIN), present=frozenset(data))


@dataclass(frozen=True)
class SelectionStep:
    """One step of the selection's path: its decision ("alone", "add", "all", ...), the subset it
    measured, the subflow it added and the subset it was weighed against (`rival`)."""

    decision: str = ""
    subset: tuple[str, ...] = ()
    label: str | None = None
    subflow: str | None = None
    rival: tuple[str, ...] | None = None
    estimate: SelectionEstimate | None = None
    gain: SelectionGain | None = None
    settled: bool | None = None
    other: Mapping[str, Any] = field(default_factory=dict)
    present: frozenset[str] | None = _PRESENT

    def to_dict(self, delay: bool = False) -> dict[str, Any]:
        return _written({
            "decision": self.decision, "subset": list(self.subset), "label": self.label,
            "subflow": self.subflow, "rival": None if self.rival is None else list(self.rival),
            "estimate": None if self.estimate is None else self.estimate.to_dict(delay),
            "gain": None if self.gain is None else self.gain.to_dict(delay),
            "settled": self.settled,
        }, self.present, (), self.other)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SelectionStep:
        rival = data.get("rival")
        return cls(decision=data.get("decision") or "", subset=_names(data.get("subset")),
                   label=data.get("label"), subflow=data.get("subflow"),
                   rival=None if rival is None else _names(rival),
                   estimate=SelectionEstimate.from_dict(data.get("estimate")),
                   gain=SelectionGain.from_dict(data.get("gain")), settled=data.get("settled"),
                   other=_other(data, _STEP), present=frozenset(data))


@dataclass(frozen=True)
class OmegaView:
    """Ω's SP* beside the measured one, whether they agree and the sentence that says so."""

    subset: tuple[str, ...] = ()
    agree: bool | None = None
    statement: str | None = None
    present: frozenset[str] | None = _PRESENT

    def to_dict(self) -> dict[str, Any]:
        return _written({"subset": list(self.subset), "agree": self.agree,
                         "statement": self.statement}, self.present, (), {})

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> OmegaView | None:
        if not isinstance(data, Mapping):
            return None
        return cls(subset=_names(data.get("subset")), agree=data.get("agree"),
                   statement=data.get("statement"), present=frozenset(data))


@dataclass(frozen=True)
class SelectedCC:
    """One CC's measured selection: SP* (`subset`, `label`), whether it rests on a measurement
    (`usable`), is complete and settled, the CC it was shared from, its estimate and path, the
    standbys (best alone first), the subsets within reach of it, the steps later runs
    contradicted, the subflows not tried (`bounded`, `not_alone`), the fixed-buffer check, Ω's
    view and, for a stream, the metric weighed (`metric`) and why a subflow is kept (`why`)."""

    subset: tuple[str, ...] = ()
    label: str | None = None
    usable: bool | None = None
    complete: bool | None = None
    settled: bool | None = None
    reason: str | None = None
    shared_from: str | None = None
    estimate: SelectionEstimate | None = None
    path: tuple[SelectionStep, ...] = ()
    standby_subflows: tuple[str, ...] = ()
    within_reach: tuple[Alternative, ...] = ()  # label and relative mean
    contradicted: tuple[SelectionStep, ...] = ()
    bounded: tuple[str, ...] = ()
    not_alone: tuple[str, ...] = ()
    buffer_check: Mapping[str, Any] | None = None
    omega: OmegaView | None = None
    metric: str | None = None
    why: str | None = None
    other: Mapping[str, Any] = field(default_factory=dict)
    present: frozenset[str] | None = _PRESENT

    def path_dicts(self) -> list[dict[str, Any]]:
        """The path's JSON form (an answer's `subset_choice.path`)."""
        return [s.to_dict(self.metric is not None) for s in self.path]

    def to_dict(self) -> dict[str, Any]:
        delay = self.metric is not None
        out: dict[str, Any] = {
            "subset": list(self.subset), "label": self.label, "usable": self.usable,
            "complete": self.complete, "settled": self.settled, "reason": self.reason,
            "shared_from": self.shared_from,
            "estimate": None if self.estimate is None else self.estimate.to_dict(delay),
            "path": [s.to_dict(delay) for s in self.path],
            "standby_subflows": list(self.standby_subflows),
            "within_reach": [a.to_dict() for a in self.within_reach],
            "contradicted": [s.to_dict(delay) for s in self.contradicted],
            "bounded": list(self.bounded), "not_alone": list(self.not_alone),
            "buffer_check": None if self.buffer_check is None else dict(self.buffer_check),
            "omega": None if self.omega is None else self.omega.to_dict(),
            "metric": self.metric, "why": self.why,
        }
        # written only where the phase wrote them (a bulk selection has no metric, ...)
        return _written(out, self.present, ("buffer_check", "omega", "metric", "why"),
                        self.other)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SelectedCC:
        return cls(
            subset=_names(data.get("subset")), label=data.get("label"), usable=data.get("usable"),
            complete=data.get("complete"), settled=data.get("settled"),
            reason=data.get("reason"), shared_from=data.get("shared_from"),
            estimate=SelectionEstimate.from_dict(data.get("estimate")),
            path=tuple(SelectionStep.from_dict(s) for s in _objects(data.get("path"))),
            standby_subflows=_names(data.get("standby_subflows")),
            within_reach=tuple(Alternative.from_dict(a)
                               for a in _objects(data.get("within_reach"))),
            contradicted=tuple(SelectionStep.from_dict(s)
                               for s in _objects(data.get("contradicted"))),
            bounded=_names(data.get("bounded")), not_alone=_names(data.get("not_alone")),
            buffer_check=(data.get("buffer_check")
                          if isinstance(data.get("buffer_check"), Mapping) else None),
            omega=OmegaView.from_dict(data.get("omega")), metric=data.get("metric"),
            why=data.get("why"), other=_other(data, _ENTRY), present=frozenset(data),
        )


@dataclass(frozen=True)
class Selection:
    """The campaign's measured selection: `done` once decided, and per CC its `SelectedCC`."""

    done: bool = False
    ccs: Mapping[str, SelectedCC] = field(default_factory=dict)
    other: Mapping[str, Any] = field(default_factory=dict)

    def of(self, cc: str | None) -> SelectedCC | None:
        """The CC's selection; None where the selection did not decide one (or `cc` is None)."""
        return None if cc is None else self.ccs.get(cc)

    def usable(self, cc: str | None) -> SelectedCC | None:
        """The CC's selection where it rests on a measurement (SP* the sweep and answer use)."""
        entry = self.of(cc)
        return entry if entry is not None and entry.usable else None

    def to_dict(self) -> dict[str, Any]:
        return {"done": self.done, "ccs": {cc: e.to_dict() for cc, e in self.ccs.items()},
                **self.other}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | Selection | None) -> Selection | None:
        """Reads the stored form; a `Selection` passes through, None stays None."""
        if data is None or isinstance(data, Selection):
            return data
        return cls(done=bool(data.get("done", False)),
                   ccs={cc: SelectedCC.from_dict(e) for cc, e in (data.get("ccs") or {}).items()
                        if isinstance(e, Mapping)},
                   other=_other(data, ("done", "ccs")))

"""The parts of a campaign's state that are the flows' own (not the algorithm's results): a
warm campaign's check and its report, the CCs Ω was measured under, and where an imported
campaign came from (`CampaignState` holds them; `campaign_state`'s docstring says how every
stored form is read)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ..algorithm.stored_form import PRESENT, StoredForm, flag, number, text


@dataclass(frozen=True)
class WarmCheck(StoredForm):
    """One warm check's report (`flows.campaign.warm.judge`): which promise (`check`: "obs" or
    "t_star") of which arm at which buffer, the goodput promised and measured (None: every
    probe failed, and then no runs, tolerance or verdict), the runs, the tolerance and whether it
    drifted."""

    check: str | None = None
    arm: str | None = None
    bs_mib: float | None = None
    promised_mbps: float | None = None
    measured_mbps: float | None = None
    runs: int | None = None
    tolerance_mbps: float | None = None
    drifted: bool | None = None
    other: Mapping[str, Any] = field(default_factory=dict)
    present: frozenset[str] | None = PRESENT()
    READERS: ClassVar = {"check": text, "arm": text, "bs_mib": number,
                         "promised_mbps": number, "measured_mbps": number, "runs": number,
                         "tolerance_mbps": number, "drifted": flag}


@dataclass(frozen=True)
class Warm:
    """A warm campaign: the answer it checks, the probes planned for the check, the verdict
    (warm_confirmed / warm_drifted) and the checks' report once judged."""

    from_campaign: int | None = None
    from_recommendation: int | None = None
    probes: int = 0
    verdict: str | None = None
    checks: tuple[WarmCheck, ...] = ()

    def __post_init__(self) -> None:
        # a check given in its stored form (a seed, `from_dict`) is read as a `WarmCheck`
        object.__setattr__(self, "checks", tuple(
            c if isinstance(c, WarmCheck) else WarmCheck.from_dict(c)
            for c in self.checks if isinstance(c, (WarmCheck, Mapping))))

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"from_campaign": self.from_campaign,
                               "from_recommendation": self.from_recommendation,
                               "probes": self.probes}
        if self.verdict is not None:
            out["verdict"] = self.verdict
            out["checks"] = [c.to_dict() for c in self.checks]
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Warm:
        return cls(from_campaign=data.get("from_campaign"),
                   from_recommendation=data.get("from_recommendation"),
                   probes=int(data.get("probes", 0)), verdict=data.get("verdict"),
                   checks=tuple(data.get("checks") or ()))


@dataclass(frozen=True)
class OmegaCCs:
    """Adaptive mode: the CCs Ω was measured under (the reference CC) and why."""

    ccs: tuple[str, ...] = ()
    why: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"ccs": list(self.ccs), "why": self.why}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | OmegaCCs | None) -> OmegaCCs | None:
        if data is None or isinstance(data, OmegaCCs):
            return data
        ccs = data.get("ccs")  # an imported bundle's may be anything
        return cls(ccs=tuple(ccs) if isinstance(ccs, (list, tuple)) else (), why=data.get("why"))


@dataclass(frozen=True)
class ImportOrigin:
    """Where an imported campaign came from (`flows.takeaways.bundle_import`): the bundle's
    source (stored as "from": the exporting campaign, when and by whom, the bundle's version and
    SHA-256), the sites' capability reports and the software it carried; once the import solved
    it again (`answered`), the bundle's answer, how the answer here differs and why there is
    none."""

    source: Mapping[str, Any] = field(default_factory=dict)
    capabilities: Mapping[str, Any] | None = None
    software: Mapping[str, Any] | None = None
    answered: bool = False
    answer: Mapping[str, Any] | None = None
    answer_differs: Any = None
    no_answer: Any = None
    other: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"from": plain(self.source),
                               "capabilities": plain(self.capabilities),
                               "software": plain(self.software)}
        if self.answered:
            out.update(answer=plain(self.answer), answer_differs=plain(self.answer_differs),
                       no_answer=plain(self.no_answer))
        return {**out, **plain(self.other)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | ImportOrigin | None) -> ImportOrigin | None:
        if data is None or isinstance(data, ImportOrigin):
            return data
        named = ("from", "capabilities", "software", "answer", "answer_differs", "no_answer")
        return cls(source=data.get("from") or {}, capabilities=data.get("capabilities"),
                   software=data.get("software"), answered="answer" in data,
                   answer=data.get("answer"), answer_differs=data.get("answer_differs"),
                   no_answer=data.get("no_answer"),
                   other={k: v for k, v in data.items() if k not in named})


def plain(value: Any) -> Any:
    """A JSON value with every mapping a plain dict, every tuple a list and every typed value its
    stored form (a fresh copy)."""
    if hasattr(value, "to_dict"):
        return value.to_dict()
    if isinstance(value, Mapping):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value

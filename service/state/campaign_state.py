"""What a campaign decided and met on its way, as one typed, versioned value (`CampaignState`).

A campaign row keeps its plan (CCs, PMs, grid, runs, ...) in columns and everything its phases
decide in one JSON column, `run_state` (`Campaign.run_state_json`: `models/` keeps the JSON only):
the probe budget, the warm check, Ω's CCs, the measured selection, the sweep's outcome and what
the answer must flag. `state_of(campaign)` reads it as this type and `put_state` writes it;
nothing reads the stored JSON by key but `from_dict`.

Frozen: a phase that decides something makes a new state (`dataclasses.replace`) and assigns it,
so SQLAlchemy sees the change and nothing shares a half-updated state. The nested values a phase
keeps as JSON (a warm check's report, a failed probe) are the JSON forms their own types write;
the state names them, it does not re-type them. The measured selection
(`state.selection_state.Selection`), the sweep's outcome (`state.sweep_outcome`), Ω's CCs
(`OmegaCCs`) and an import's origin (`ImportOrigin`) are typed; a stored or hand-written dict of
one is read as it.

`legacy_notes` and `from_legacy` convert to and from the layout before the state existed (the
`notes` column and the budget columns): bundle format version 1 carries it, and the campaign
report (GET /campaigns/{id}) still shows the notes as they were.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from .campaign_parts import ImportOrigin, OmegaCCs, Warm
from .campaign_parts import plain as _plain
from .selection_state import Selection
from .sweep_outcome import SweepOutcome, read_sweep_decision

STATE_VERSION = 1

# The notes keys of the layout before the state, per field (`legacy_notes`, `from_legacy`).
_NOTE_FIELDS = {
    "warm": "warm",
    "omega_ccs": "omega_ccs",
    "unsettled_omegas": "unsettled_omegas",
    "selection": "selection",
    "adaptive": "sweep_decision",
    "grid_extended": "grid_extended",
    "grid_below_plateau": "grid_below_plateau",
    "failed_probes": "failed_probes",
    "unfitted_arms": "unfitted_arms",
    "imported": "imported",
}


@dataclass(frozen=True)
class Tally:
    """One budget phase's probes and probe-seconds (planned, or spent)."""

    probes: int = 0
    probe_seconds: float = 0.0

    def plus(self, probe_seconds: float) -> Tally:
        """This tally with one more probe of `probe_seconds`."""
        return Tally(self.probes + 1, self.probe_seconds + float(probe_seconds))

    def to_dict(self) -> dict[str, Any]:
        return {"probes": self.probes, "probe_seconds": self.probe_seconds}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | Tally) -> Tally:
        if isinstance(data, Tally):
            return data
        return cls(probes=int(data.get("probes", 0)),
                   probe_seconds=float(data.get("probe_seconds", 0.0)))


def _tallies(data: Mapping[str, Any]) -> dict[str, Tally]:
    return {phase: Tally.from_dict(t) for phase, t in data.items()}


@dataclass(frozen=True)
class Budget:
    """The probe budget: the cap and the counts every phase books to, in one place.

    `planned` is the campaign's total of probes by the plan now (`flows.campaign.budget.replan`),
    `done` and `used_s` what it probed; per phase: `phase_plan` ({phase: {"probes",
    "probe_seconds"}}), `spent` (the same shape) and `asked` (the probes a phase that chooses as it
    goes asked for); `settled`: nothing more will be probed. `extra_impact_runs` (per CC) and
    `extra_rounds` are what the impact phase and the grid sweep added past the plan; `exhausted`:
    the cap stopped a phase."""

    cap_s: float | None = None
    planned: int = 0
    done: int = 0
    used_s: float = 0.0
    phase_plan: Mapping[str, Tally] = field(default_factory=dict)
    spent: Mapping[str, Tally] = field(default_factory=dict)
    asked: Mapping[str, int] = field(default_factory=dict)
    settled: bool = False
    exhausted: bool = False
    extra_impact_runs: Mapping[str, int] = field(default_factory=dict)
    extra_rounds: int = 0

    def __post_init__(self) -> None:
        # a tally given in its stored form (a seed, `from_dict`) is read as a `Tally`
        object.__setattr__(self, "phase_plan", _tallies(self.phase_plan))
        object.__setattr__(self, "spent", _tallies(self.spent))

    def left_s(self) -> float | None:
        """Probe-seconds left of the cap; None: no cap."""
        return None if self.cap_s is None else self.cap_s - self.used_s

    def progress(self) -> float:
        """done / planned in 0..1."""
        return 0.0 if not self.planned else min(1.0, self.done / self.planned)

    def spent_probes(self, phase: str) -> int:
        return self.spent.get(phase, Tally()).probes

    def charged(self, phase: str, probe_seconds: float) -> Budget:
        """The budget with one more probe of `probe_seconds` done, booked to `phase`."""
        return replace(self, done=self.done + 1, used_s=self.used_s + float(probe_seconds),
                       spent={**self.spent,
                              phase: self.spent.get(phase, Tally()).plus(probe_seconds)})

    def to_dict(self) -> dict[str, Any]:
        return {
            "cap_s": self.cap_s, "planned": self.planned, "done": self.done,
            "used_s": self.used_s, "phase_plan": _plain(self.phase_plan),
            "spent": _plain(self.spent), "asked": dict(self.asked), "settled": self.settled,
            "exhausted": self.exhausted, "extra_impact_runs": dict(self.extra_impact_runs),
            "extra_rounds": self.extra_rounds,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Budget:
        return cls(
            cap_s=data.get("cap_s"), planned=int(data.get("planned", 0)),
            done=int(data.get("done", 0)), used_s=float(data.get("used_s", 0.0)),
            phase_plan=_tallies(data.get("phase_plan") or {}),
            spent=_tallies(data.get("spent") or {}), asked=dict(data.get("asked") or {}),
            settled=bool(data.get("settled", False)), exhausted=bool(data.get("exhausted", False)),
            extra_impact_runs=dict(data.get("extra_impact_runs") or {}),
            extra_rounds=int(data.get("extra_rounds", 0)),
        )


@dataclass(frozen=True)
class CampaignState:
    """Everything a campaign's phases decided (see the module's docstring).

    - `budget`: the probe budget (`Budget`);
    - `warm`: the warm check, None when the campaign is not warm;
    - `omega_ccs`: adaptive mode, the CCs Ω was measured under and why (`OmegaCCs`);
    - `unsettled_omegas`: per CC the subflows whose Ω sign stayed unsettled;
    - `selection`: the measured selection once done (`Selection`: per CC the algorithm's
      `SelectionResult`);
    - `sweep_decision`: how the adaptive sweep ended (`BulkSweepOutcome` or
      `StreamSweepOutcome`, each holding the algorithm's own decision);
    - `grid_extended`, `grid_below_plateau`: how the grid sweep met the plateau;
    - `failed_probes`, `unfitted_arms`: what the answer must say is missing;
    - `imported`: where an imported campaign came from (`ImportOrigin`);
    - `other`: keys an imported bundle carried that this version does not name (kept as they are).
    """

    version: int = STATE_VERSION
    budget: Budget = field(default_factory=Budget)
    warm: Warm | None = None
    omega_ccs: OmegaCCs | None = None
    unsettled_omegas: Mapping[str, list[str]] | None = None
    selection: Selection | None = None
    sweep_decision: SweepOutcome | None = None
    grid_extended: tuple[float, ...] | None = None
    grid_below_plateau: float | None = None
    failed_probes: tuple[Mapping[str, Any], ...] | None = None
    unfitted_arms: tuple[str, ...] | None = None
    imported: ImportOrigin | None = None
    other: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # a typed part given in its stored form (a bundle, a test's seed) is read as its type;
        # frozen, so set once here
        for name, read in (("selection", Selection.from_dict), ("omega_ccs", OmegaCCs.from_dict),
                           ("imported", ImportOrigin.from_dict),
                           ("sweep_decision", read_sweep_decision)):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, read(value))

    def with_budget(self, **changes: Any) -> CampaignState:
        return replace(self, budget=replace(self.budget, **changes))

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "budget": self.budget.to_dict(),
            "warm": None if self.warm is None else self.warm.to_dict(),
            "omega_ccs": None if self.omega_ccs is None else self.omega_ccs.to_dict(),
            "unsettled_omegas": _plain(self.unsettled_omegas),
            "selection": None if self.selection is None else self.selection.to_dict(),
            "sweep_decision": (None if self.sweep_decision is None
                               else self.sweep_decision.to_dict()),
            "grid_extended": _plain(self.grid_extended),
            "grid_below_plateau": self.grid_below_plateau,
            "failed_probes": _plain(self.failed_probes),
            "unfitted_arms": _plain(self.unfitted_arms),
            "imported": None if self.imported is None else self.imported.to_dict(),
            "other": _plain(self.other),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> CampaignState:
        """The stored form (`to_dict`); an empty or missing one is a fresh state."""
        data = data or {}
        version = int(data.get("version", STATE_VERSION))
        if version > STATE_VERSION:
            raise ValueError(f"campaign state version {version}: this mpcoa reads up to "
                             f"{STATE_VERSION}")
        warm = data.get("warm")
        return cls(
            version=STATE_VERSION,
            budget=Budget.from_dict(data.get("budget") or {}),
            warm=None if warm is None else Warm.from_dict(warm),
            omega_ccs=OmegaCCs.from_dict(data.get("omega_ccs")),
            unsettled_omegas=data.get("unsettled_omegas"),
            selection=Selection.from_dict(data.get("selection")),
            sweep_decision=read_sweep_decision(data.get("sweep_decision")),
            grid_extended=_tuple(data.get("grid_extended")),
            grid_below_plateau=data.get("grid_below_plateau"),
            failed_probes=_tuple(data.get("failed_probes")),
            unfitted_arms=_tuple(data.get("unfitted_arms")),
            imported=ImportOrigin.from_dict(data.get("imported")),
            other=dict(data.get("other") or {}),
        )

    # --- the layout before the state: notes + budget columns ---------------------------------
    def legacy_notes(self) -> dict[str, Any]:
        """The state as the `notes` dict it replaced (the campaign report, bundle version 1):
        only what was decided, and the probe budget under "probe_budget"."""
        out: dict[str, Any] = dict(_plain(self.other))
        for key, name in _NOTE_FIELDS.items():
            value = getattr(self, name)
            if value is not None:  # None: never written
                out[key] = (value.to_dict() if hasattr(value, "to_dict") else _plain(value))
        b = self.budget
        if b.phase_plan or b.spent or b.asked or b.settled or b.planned:
            note: dict[str, Any] = {"spent": _plain(b.spent)}
            if b.phase_plan or b.planned:
                note["planned"] = _plain(b.phase_plan)
                note["budget_s"] = b.cap_s
            if b.asked:
                note["asked"] = dict(b.asked)
            if b.settled:
                note["settled"] = True
            out["probe_budget"] = note
        return out

    @classmethod
    def from_legacy(cls, columns: Mapping[str, Any], notes: Mapping[str, Any] | None
                    ) -> CampaignState:
        """The state of a campaign stored before it existed: its budget columns
        (probe_seconds_budget, probes_total, probes_done, probe_seconds_used, extra_impact_runs,
        extra_rounds, budget_exhausted) and its notes."""
        notes = dict(notes or {})
        pb = dict(notes.pop("probe_budget", None) or {})
        budget = Budget(
            cap_s=columns.get("probe_seconds_budget", pb.get("budget_s")),
            planned=int(columns.get("probes_total") or 0),
            done=int(columns.get("probes_done") or 0),
            used_s=float(columns.get("probe_seconds_used") or 0.0),
            phase_plan=_tallies(pb.get("planned") or {}), spent=_tallies(pb.get("spent") or {}),
            asked=dict(pb.get("asked") or {}), settled=bool(pb.get("settled", False)),
            exhausted=bool(columns.get("budget_exhausted") or False),
            extra_impact_runs=dict(columns.get("extra_impact_runs") or {}),
            extra_rounds=int(columns.get("extra_rounds") or 0),
        )
        values: dict[str, Any] = {}
        for key, name in _NOTE_FIELDS.items():
            if key in notes:
                values[name] = notes.pop(key)
        return cls.from_dict({"budget": budget.to_dict(), **values, "other": notes})

    def legacy_columns(self) -> dict[str, Any]:
        """The budget columns the state replaced, by their names (bundle version 1)."""
        b = self.budget
        return {"probe_seconds_budget": b.cap_s, "probes_total": b.planned,
                "probes_done": b.done, "probe_seconds_used": b.used_s,
                "extra_impact_runs": dict(b.extra_impact_runs), "extra_rounds": b.extra_rounds,
                "budget_exhausted": b.exhausted}


def state_of(campaign: Any) -> CampaignState:
    """A campaign row's state (its `run_state_json` as `CampaignState`). Read once per stored
    value: a page reads it many times, and the measured selection is no small value. The JSON is
    never changed in place (`put_state` assigns a new dict; a refresh loads a new one), so the
    value read stands while it is the same object."""
    stored = campaign.run_state_json
    read = campaign.__dict__.get("_run_state_read")
    if read is None or read[0] is not stored:
        read = (stored, CampaignState.from_dict(stored))
        campaign.__dict__["_run_state_read"] = read
    return read[1]


def put_state(campaign: Any, state: CampaignState) -> None:
    """Write `state` as the campaign row's run state (a new dict: SQLAlchemy sees the change)."""
    campaign.run_state_json = state.to_dict()


def _tuple(value: Any) -> tuple | None:
    return None if value is None else tuple(value)

"""A campaign's plan: what a user may ask for, the defaults, and the probes it takes.

The impact phase (Eq. 5) runs, per CC and run, TP_0 with every subflow and one TP_i per excluded
subflow; the buffer phase (Eq. 7) runs every (PM, CC, buffer, run), PCDC on SP* of its CC.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from models import NO_EXCLUSION
from probes.vocabulary import FULLMESH, PATH_MANAGERS, PCDC, CongestionControl, normalize_pm

from ..algorithm.regression import MODEL_KINDS
from ..algorithm.solver import DEFAULT_DELTA
from ..errors import Invalid
from ..settings import Settings

# The paper's grid: 0.5 .. 30 MiB in 0.5 MiB steps (60 points).
DEFAULT_BUFFER_GRID_MIB = [0.5 * k for k in range(1, 61)]
IMPACT_BS_MIB = 0.0  # the impact phase runs with the kernel's autotuned buffers
Mib = Annotated[float, Field(gt=0, le=1_000_000, allow_inf_nan=False)]


class CampaignParameters(BaseModel):
    """A campaign's plan (POST /campaigns, schedules, the CLI); what is left out takes the
    settings' default, which is the paper's plan."""

    model_config = ConfigDict(extra="forbid")

    ccs: list[CongestionControl] | None = Field(default=None, min_length=1, max_length=16)
    pms: list[Literal["PCDC", "FullMesh"]] | None = Field(default=None, min_length=1, max_length=2)
    buffer_grid_mib: list[Mib] | None = Field(default=None, min_length=3, max_length=400)
    runs: int | None = Field(default=None, ge=1, le=100)
    duration_s: float | None = Field(default=None, gt=0, le=3600, allow_inf_nan=False)
    delta: float = Field(default=DEFAULT_DELTA, ge=0, lt=1, allow_inf_nan=False)
    model_kind: Literal["paper", "per-arm"] = "paper"
    probe_seconds_budget: float | None = Field(default=None, gt=0, le=1e9, allow_inf_nan=False)


@dataclass(frozen=True)
class Plan:
    """A campaign's parameters with every default filled in and checked."""

    ccs: list[str]
    pms: list[str]
    buffer_grid_mib: list[float]
    runs: int
    duration_s: float
    delta: float
    model_kind: str
    probe_seconds_budget: float | None


def resolve(params: CampaignParameters, settings: Settings) -> Plan:
    """Fill in the settings' defaults and check what the schema cannot (also for CLI input)."""
    ccs = list(dict.fromkeys(c.strip().lower() for c in (params.ccs or settings.campaign_ccs)))
    try:
        pms = list(dict.fromkeys(normalize_pm(p) for p in (params.pms or PATH_MANAGERS)))
    except ValueError as exc:
        raise Invalid(str(exc), ("body", "pms")) from exc
    grid = sorted({
        float(b)
        for b in (
            params.buffer_grid_mib or settings.campaign_buffer_grid_mib or DEFAULT_BUFFER_GRID_MIB
        )
    })
    if len(grid) < 3 or any(not math.isfinite(b) or not 0 < b <= 1_000_000 for b in grid):
        raise Invalid(
            "needs at least 3 distinct positive buffer sizes", ("body", "buffer_grid_mib")
        )
    if params.model_kind not in MODEL_KINDS:
        raise Invalid(f"must be one of {MODEL_KINDS}", ("body", "model_kind"))
    budget = params.probe_seconds_budget
    if budget is None:
        budget = settings.campaign_probe_seconds_budget
    return Plan(
        ccs=ccs,
        pms=pms,
        buffer_grid_mib=grid,
        runs=params.runs or settings.campaign_runs,
        duration_s=params.duration_s or settings.campaign_duration_s,
        delta=params.delta,
        model_kind=params.model_kind,
        probe_seconds_budget=budget,
    )


# A plan's size is bounded as a whole (issue 14: each field within its bounds still made 1,283,200
# probes). The paper's plan on 8 subflows is 6,966 probes, about 2.4 days of probing.
MAX_PLANNED_PROBES = 20_000
MAX_PLANNED_PROBE_SECONDS = 14 * 24 * 3600.0


def checked_probes(plan: Plan, n_subflows: int) -> int:
    """The plan's probe count on `n_subflows` subflows; a plan too large to run is Invalid."""
    total = planned_probes(
        n_subflows, len(plan.ccs), len(plan.pms), len(plan.buffer_grid_mib), plan.runs
    )
    seconds = total * plan.duration_s
    if total > MAX_PLANNED_PROBES or seconds > MAX_PLANNED_PROBE_SECONDS:
        raise Invalid(
            f"the plan is {total} probes ({seconds / 86400:.1f} days of probing); at most "
            f"{MAX_PLANNED_PROBES} probes and {MAX_PLANNED_PROBE_SECONDS / 86400:g} days: "
            "fewer ccs, buffer_grid_mib points, runs or a shorter duration_s",
            ("body",),
        )
    return total


def planned_probes(n_subflows: int, ccs: int, pms: int, grid: int, runs: int) -> int:
    """Impact phase: per CC and run, one all-subflow run plus one per excluded subflow;
    buffer phase: every (PM, CC, bs, run)."""
    return ccs * runs * (1 + n_subflows) + pms * ccs * grid * runs


@dataclass(frozen=True)
class ProbeStep:
    """One probe of a campaign; `key` is its measurement's unique key."""

    phase: str  # "impact" | "buffer"
    pm: str
    cc: str
    bs_mib: float
    run: int
    excluded_subflow: str = NO_EXCLUSION
    allowed_subflows: tuple[str, ...] | None = None  # None: every subflow carries data

    @property
    def key(self) -> tuple:
        return (self.phase, self.pm, self.cc, float(self.bs_mib), self.run, self.excluded_subflow)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["allowed_subflows"] = (
            None if self.allowed_subflows is None else list(self.allowed_subflows)
        )
        return d

    @classmethod
    def from_dict(cls, data: dict) -> ProbeStep:
        allowed = data.get("allowed_subflows")
        return cls(**{**data, "allowed_subflows": None if allowed is None else tuple(allowed)})

    def describe(self) -> str:
        what = f"{self.phase} {self.pm}/{self.cc} run {self.run}"
        if self.phase == "buffer":
            what += f" bs {self.bs_mib:g} MiB"
        if self.excluded_subflow:
            what += f" without {self.excluded_subflow}"
        return what


def impact_steps(ccs: Iterable[str], runs: int, subflows: list[str]) -> list[ProbeStep]:
    """Per CC and run: TP_0 with every subflow, then TP_i with subflow i carrying no payload."""
    steps = []
    for cc in ccs:
        for run in range(1, runs + 1):
            steps.append(ProbeStep("impact", FULLMESH, cc, IMPACT_BS_MIB, run))
            for sf in subflows:
                others = tuple(s for s in subflows if s != sf)
                steps.append(ProbeStep("impact", FULLMESH, cc, IMPACT_BS_MIB, run, sf, others))
    return steps


def buffer_steps(
    pms: Iterable[str],
    ccs: Iterable[str],
    grid: Iterable[float],
    runs: int,
    subsets: dict[str, list[str]],
    subflows: list[str],
) -> list[ProbeStep]:
    """Every (PM, CC, buffer, run): PCDC with SP* of that CC, FullMesh with SP (Eq. 7)."""
    steps = []
    for run in range(1, runs + 1):  # run-major: a budget cut leaves every arm some data
        for pm in pms:
            for cc in ccs:
                allowed = None
                if pm == PCDC and set(subsets[cc]) != set(subflows):
                    allowed = tuple(subsets[cc])
                steps.extend(
                    ProbeStep("buffer", pm, cc, float(bs), run, NO_EXCLUSION, allowed)
                    for bs in grid
                )
    return steps

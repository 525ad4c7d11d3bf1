"""A campaign's plan: what a user may ask for, the defaults, and the probes it takes.

The impact phase (Eq. 5) runs, per CC and run, TP_0 with every subflow and one TP_i per excluded
subflow; the buffer phase (Eq. 7) runs every (PM, CC, buffer, run), PCDC on SP* of its CC.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from models import NO_EXCLUSION, MeasurementPhase
from probes.tools.choice import AskedTool
from probes.vocabulary import (
    FULLMESH,
    PATH_MANAGERS,
    PCDC,
    CongestionControl,
    PathManager,
    normalize_pm,
)

from ...algorithm.objective import Objective
from ...algorithm.probe_duration import probe_timing
from ...algorithm.regression import ALL_MODEL_KINDS
from ...algorithm.solver import DEFAULT_DELTA
from ...algorithm.sweep import bdp_buffer_grid, run_order
from ...errors import Invalid
from ...settings import Settings
from ...store.measurements import MeasurementKey

# The paper's grid: 0.5 .. 30 MiB in 0.5 MiB steps (60 points).
DEFAULT_BUFFER_GRID_MIB = [0.5 * k for k in range(1, 61)]
IMPACT_BS_MIB = 0.0  # the impact phase runs with the kernel's autotuned buffers
Mib = Annotated[float, Field(gt=0, le=1_000_000, allow_inf_nan=False)]


class CampaignParameters(BaseModel):
    """A campaign's plan (POST /campaigns, schedules, the CLI); what is left out takes the
    settings' default, which is the paper's plan."""

    model_config = ConfigDict(extra="forbid")

    ccs: list[CongestionControl] | None = Field(default=None, min_length=1, max_length=16)
    pms: list[PathManager] | None = Field(default=None, min_length=1, max_length=2)
    buffer_grid_mib: list[Mib] | None = Field(default=None, min_length=3, max_length=400)
    runs: int | None = Field(default=None, ge=1, le=100)
    duration_s: float | None = Field(default=None, gt=0, le=3600, allow_inf_nan=False)
    delta: float = Field(default=DEFAULT_DELTA, ge=0, lt=1, allow_inf_nan=False)
    model_kind: Literal[ALL_MODEL_KINDS] | None = Field(
        default=None,
        description="paper: the pooled quadratic of Eq. 13-15; per-arm: one quadratic per "
        "(PM, CC); saturating: a ramp to a plateau per arm; auto: per arm the quadratic or the "
        "saturating curve by AIC (default)",
    )
    probe_seconds_budget: float | None = Field(default=None, gt=0, le=1e9, allow_inf_nan=False)
    mode: Literal["grid", "adaptive"] | None = Field(
        default=None,
        description="grid: every (PM, CC, buffer, run) of the plan (the paper's sweep); adaptive: "
        "probes chosen from what was measured until OPM, OCC and OBS are settled or the budget "
        "is spent (default: the settings' campaign_mode, adaptive)",
    )
    objective: Objective | None = Field(
        default=None,
        description="what to optimise: bulk goodput (default) or a stream's p99 frame delay "
        "(paced probes, in either mode)",
    )
    probe_tool: AskedTool | None = Field(
        default=None,
        description="the tool every phase's probes run on: netperfmeter (NetPerfMeter 2.x on "
        "both sites), iperf3 (bulk; a stream's probes on the paced tool), or auto: NetPerfMeter "
        "2.x where both sites have it, else iperf3 and the paced tool (default: the settings' "
        "probe_tool)",
    )


@dataclass(frozen=True)
class Plan:
    """A campaign's parameters with every default filled in and checked."""

    ccs: list[str]
    pms: list[PathManager]
    buffer_grid_mib: list[float]
    runs: int
    duration_s: float
    delta: float
    model_kind: str
    probe_seconds_budget: float | None
    mode: str = "grid"
    objective: Objective = field(default_factory=Objective)
    probe_tool: str = "auto"


def resolve(
    params: CampaignParameters, settings: Settings, links: Sequence[tuple[float, float | None]]
) -> Plan:
    """Fill in the settings' defaults and check what the schema cannot (also for CLI input).

    `links`: per subflow (bandwidth kbit/s, RTT ms or None), for the default buffer grid.
    """
    ccs = list(dict.fromkeys(c.strip().lower() for c in (params.ccs or settings.campaign_ccs)))
    try:
        pms = list(dict.fromkeys(normalize_pm(p) for p in (params.pms or PATH_MANAGERS)))
    except ValueError as exc:
        raise Invalid(str(exc), ("body", "pms")) from exc
    grid = sorted({float(b) for b in (params.buffer_grid_mib or default_grid(settings, links))})
    if len(grid) < 3 or any(not math.isfinite(b) or not 0 < b <= 1_000_000 for b in grid):
        raise Invalid(
            "needs at least 3 distinct positive buffer sizes", ("body", "buffer_grid_mib")
        )
    model_kind = params.model_kind or settings.campaign_model_kind
    if model_kind not in ALL_MODEL_KINDS:
        raise Invalid(f"must be one of {ALL_MODEL_KINDS}", ("body", "model_kind"))
    budget = params.probe_seconds_budget
    if budget is None:
        budget = settings.campaign_probe_seconds_budget
    objective = params.objective or Objective()
    mode = params.mode or settings.campaign_mode
    runs = params.runs or settings.campaign_runs
    duration = params.duration_s or settings.campaign_duration_s
    if duration > settings.longest_probe_s:
        raise Invalid(
            f"at most {settings.longest_probe_s:g} s: a probe's task must end before the broker "
            "redelivers it (raise broker_visibility_timeout_s for longer probes)",
            ("body", "duration_s"))
    if budget is None and mode == "adaptive":
        probes = planned_probes(len(links), len(ccs), len(pms), len(grid), runs)
        probes += selection_probes(len(links), len(ccs))
        budget = grid_mode_seconds(probes, duration, links, grid[-1])
    return Plan(
        ccs=ccs,
        pms=pms,
        buffer_grid_mib=grid,
        runs=runs,
        duration_s=duration,
        delta=params.delta,
        model_kind=model_kind,
        probe_seconds_budget=budget,
        mode=mode,
        objective=objective,
        probe_tool=params.probe_tool or settings.probe_tool,
    )


def grid_mode_seconds(probes: int, duration_s: float,
                      links: Sequence[tuple[float, float | None]], top_mib: float) -> float:
    """An adaptive campaign's default budget: the probe-seconds of the paper's procedure on
    the same plan (`planned_probes`: the impact runs, every PM x CC x buffer x run) and of the
    measured selection it adds (`selection_probes`), each probe as long as the timing rule
    makes one over every subflow at the grid's largest buffer. One that runs out says so
    (`adaptive:budget`)."""
    if not links:
        return probes * duration_s
    timing = probe_timing(links, duration_s, buffer_bytes=max(1, round(top_mib * 2**20)))
    return probes * timing.duration_s


def default_grid(settings: Settings, links: Sequence[tuple[float, float | None]]) -> list[float]:
    """The settings' grid; else one from the subflows' bandwidth-delay products (from well under
    the smallest to well over the summed BDP) when every RTT is known; else the paper's."""
    if settings.campaign_buffer_grid_mib:
        return list(settings.campaign_buffer_grid_mib)
    if links and all(rtt for _bw, rtt in links):
        return bdp_buffer_grid([bw for bw, _ in links], [rtt / 1000.0 for _, rtt in links])
    return list(DEFAULT_BUFFER_GRID_MIB)


# A plan's size is bounded as a whole (each field within its bounds once still made 1,283,200
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


def selection_probes(n_subflows: int, n_ccs: int) -> int:
    """A measured selection's estimate: every subflow alone and the first additions, twice, on
    the reference CC; a check of its decisions (about four subsets, twice) on every other CC."""
    if n_subflows <= 1:
        return 0
    return 2 * (2 * n_subflows - 1) + 8 * max(0, n_ccs - 1)


@dataclass(frozen=True)
class ProbeStep:
    """One probe of a campaign; `key` is its measurement's unique key."""

    phase: str  # a MeasurementPhase (the sweep's probes: SWEEP, stored as "buffer")
    pm: PathManager
    cc: str
    bs_mib: float
    run: int
    excluded_subflow: str = NO_EXCLUSION
    allowed_subflows: tuple[str, ...] | None = None  # None: every subflow carries data

    @property
    def key(self) -> MeasurementKey:
        return MeasurementKey.of(self)

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
        if self.phase == MeasurementPhase.SWEEP:
            what += f" bs {self.bs_mib:g} MiB"
        if self.phase == "selection":
            what += f" on {'+'.join(self.allowed_subflows or ()) or 'every subflow'}"
        elif self.excluded_subflow:
            what += f" without {self.excluded_subflow}"
        return what


def impact_steps(
    ccs: Iterable[str], runs: Mapping[str, int], subflows: list[str]
) -> list[ProbeStep]:
    """Per CC and run (`runs[cc]` of them): TP_0 with every subflow, then TP_i with subflow i
    carrying no payload."""
    steps = []
    for cc in ccs:
        for run in range(1, runs[cc] + 1):
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
    seed: int,
) -> list[ProbeStep]:
    """Every (PM, CC, buffer, run): PCDC with SP* of that CC, FullMesh with SP (Eq. 7).

    Run-major, so a budget cut leaves every arm some data; within a run every arm takes the
    buffers in that run's random order (seeded, replayable), so drift over the day cannot pass
    for a buffer effect.
    """
    steps = []
    for run in range(1, runs + 1):
        order = run_order(list(grid), run, seed)
        for pm in pms:
            for cc in ccs:
                allowed = None
                if pm == PCDC and set(subsets[cc]) != set(subflows):
                    allowed = tuple(subsets[cc])
                steps.extend(
                    ProbeStep(MeasurementPhase.SWEEP, pm, cc, float(bs), run, NO_EXCLUSION, allowed)
                    for bs in order
                )
    return steps

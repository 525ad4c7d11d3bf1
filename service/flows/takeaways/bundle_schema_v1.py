"""Version 1 of the campaign bundle's document (docs/formats.md, "Campaign bundle").

One model per section; a row's model has the exported columns of its table (store/bundle_rows),
each with the column's type and the range a campaign can produce (`bundle_limits`). Free-form
JSON (notes, provenance, a capability report) is only bounded in depth: nothing reads it to
decide an answer, and an answer is always derived again on import (flows/takeaways/bundle_import).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, Field, model_validator

from models import (
    CAMPAIGN_MODES,
    EVENT_KINDS,
    FINAL_CAMPAIGN_STATES,
    MEASUREMENT_PHASES,
)
from probes.base import ARTIFACT_NAME_PATTERN
from probes.tools.choice import AskedTool
from probes.vocabulary import (
    CC_PATTERN,
    MAX_KBPS,
    Description,
    Label,
    Name,
    PathManager,
    SubflowName,
)

from ...algorithm.regression import ALL_MODEL_KINDS
from ...formats import curve_from_dict
from . import bundle_limits as lim
from .bundle_fields import STRICT, Int, Items, Json, JsonObject, Num, Raw, Text, Timestamp, bounded

CC = Annotated[str, Field(pattern=CC_PATTERN)]
Mib = Num(0, 1_000_000, gt=True)  # the API's buffer bound (flows/campaign/plan.Mib)
# a probe's buffer: 0 where it ran on the kernel's autotuned buffers (the impact phase)
ProbeMib = Num(0, 1_000_000)
Mbps = Num(0, lim.MAX_MBPS)
Ms = Num(0, lim.MAX_RTT_MS)
Bytes = Int(0, lim.MAX_BYTES)
Seconds = Num(0, lim.MAX_PROBE_S)
Count = Int(0, lim.MAX_MEASUREMENTS)
Omega = Num(-1e6, 1e6)  # 1 - TP_i / TP_0: any sign, never unbounded
#: A probe's variant: "" (none excluded), the excluded subflow, or a probed subset ("only:A+B").
Variant = Annotated[str, Field(max_length=200, pattern=r"^(only:)?[A-Za-z0-9+-]*$")]
Flag = Text(500)
Flags = Items(Flag, 1000)
Subflows = Items(SubflowName, lim.MAX_SUBFLOWS)


def _curve(value: dict) -> dict:
    """A stored fit's curve must read back as the solver's curve (store/results.fit_curves)."""
    try:
        curve_from_dict({"pm": "FullMesh", **value})
    except ValueError as exc:
        raise ValueError(f"not a curve: {exc}") from None
    return value


# --- the sites and their pairs ------------------------------------------------------------------
class Isp(BaseModel):
    model_config = STRICT
    name: Name
    label: Label
    down_kbps: Num(0, MAX_KBPS, gt=True)
    up_kbps: Num(0, MAX_KBPS, gt=True)


class SiteRow(BaseModel):
    model_config = STRICT
    name: Name
    description: Description = ""
    isps: Items(Isp, lim.MAX_SUBFLOWS, 1)


class Pair(BaseModel):
    model_config = STRICT
    name: SubflowName
    bandwidth_kbps: Num(0, MAX_KBPS)
    rtt_ms: Num(0, lim.MAX_RTT_MS, gt=True) | None = None


class TopologyRow(BaseModel):
    model_config = STRICT
    local: SiteRow
    remote: SiteRow
    subflows: Items(Pair, lim.MAX_SUBFLOWS)


# --- a campaign's notes: free-form but for what the answer and the export read ----------------
class Open(BaseModel):
    """A section with typed keys that may hold more (bounded free-form JSON)."""

    model_config = STRICT | {"extra": "allow"}

    @model_validator(mode="after")
    def _extra_bounded(self):
        bounded(self.model_extra or {})
        return self


class PromiseNote(Open):
    low_mbps: Mbps
    high_mbps: Mbps
    of: Text(200)


class Spread(Open):
    unsteady_runs: Int(0, lim.MAX_MEASUREMENTS) | None = None


class AdaptiveNote(Open):
    """The adaptive decision (flows/answers/decided, store/campaigns.flags)."""

    stop: Text(32)
    opm: PathManager | None = None
    occ: CC | None = None
    statement: Text(2000) | None = None
    confidence: Num(0, 1) | None = None
    promise: PromiseNote | None = None
    spread_at_obs: Spread | None = None


class SelectionEntry(Open):
    """A CC's measured selection (flows/campaign/selected, flows/answers/calibrated): SP*, its
    standbys."""

    subset: Subflows
    standby_subflows: Subflows = []
    usable: bool | None = None
    settled: bool | None = None
    shared_from: CC | None = None
    path: Items(JsonObject, 4 * lim.MAX_SUBFLOWS) = []
    omega: JsonObject | None = None


class SelectionNote(Open):
    done: bool | None = None
    ccs: Annotated[dict[CC, SelectionEntry], Field(max_length=lim.MAX_OFFERED_CCS)] = {}


class WarmNote(Open):
    verdict: Text(64)
    probes: Count = 0


class Spent(Open):
    probes: Count = 0
    probe_seconds: Num(0, 1e12) = 0.0


class BudgetNote(Open):
    """The probe budget (flows/campaign/budget): what each phase spent, whether it is settled."""

    spent: Annotated[dict[Text(16), Spent], Field(max_length=16)] = {}
    settled: bool | None = None


class Notes(Open):
    """What store/campaigns.flags and report, flows/answers/calibrated and flows/campaign/selected
    read."""

    failed_probes: Items(JsonObject, lim.MAX_MEASUREMENTS) = []
    unfitted_arms: Items(Text(64), 4 * lim.MAX_CCS) = []
    grid_extended: Items(Mib, lim.MAX_GRID) = []
    grid_below_plateau: Mib | None = None
    adaptive: AdaptiveNote | None = None
    warm: WarmNote | None = None
    unsettled_omegas: Annotated[dict[CC, Subflows], Field(max_length=lim.MAX_OFFERED_CCS)] = {}
    selection: SelectionNote | None = None
    probe_budget: BudgetNote | None = None


# --- the rows -------------------------------------------------------------------------------------
class CampaignPlan(BaseModel):
    """A campaign row's columns every version has (its plan, CCs, times)."""

    model_config = STRICT
    state: Literal[FINAL_CAMPAIGN_STATES]
    reason: Text(32) = "manual"
    ccs: Items(CC, lim.MAX_CCS, 1)
    pms: Items(PathManager, lim.MAX_PMS, 1)
    buffer_grid_mib: Items(Mib, lim.MAX_GRID, 1)
    runs: Int(1, lim.MAX_PLAN_RUNS)
    duration_s: Num(0, lim.MAX_PROBE_S, gt=True)
    delta: Annotated[float, Field(ge=0, lt=1, allow_inf_nan=False)]
    model_kind: Literal[ALL_MODEL_KINDS] = "paper"
    mode: Literal[CAMPAIGN_MODES] = "grid"
    objective: JsonObject | None = None
    objective_key: Text(120) = "bulk"
    probe_tool: AskedTool = "auto"
    executor: Text(32) | None = None
    error: Raw(lim.MAX_TEXT) | None = None
    offered_ccs: Items(CC, lim.MAX_OFFERED_CCS) | None = None
    active_ccs: Items(CC, lim.MAX_CCS) | None = None
    dropped_ccs: Annotated[dict[CC, Text(2000)], Field(max_length=lim.MAX_OFFERED_CCS)] = {}
    impact_runs: Int(1, lim.MAX_IMPACT_RUNS) | None = None
    seed: Int(-(2**31), 2**31 - 1) = 0
    created_at: Timestamp | None = None
    queued_at: Timestamp | None = None
    started_at: Timestamp | None = None
    finished_at: Timestamp | None = None


ExtraImpactRuns = Annotated[dict[CC, Int(0, lim.MAX_IMPACT_RUNS)], Field(max_length=lim.MAX_CCS)]


class CampaignRow(CampaignPlan):
    """Version 1: the budget in seven columns and the phases' decisions in `notes`."""

    probe_seconds_budget: Num(0, 1e9, gt=True) | None = None
    probes_total: Count = 0
    probes_done: Count = 0
    probe_seconds_used: Num(0, 1e12) = 0.0
    extra_impact_runs: ExtraImpactRuns = {}
    extra_rounds: Int(0, 10_000) = 0
    budget_exhausted: bool = False
    notes: Notes = Notes()


class ArtifactEntry(BaseModel):
    model_config = STRICT
    name: Annotated[str, Field(pattern=ARTIFACT_NAME_PATTERN)]
    media_type: Text(100) = ""
    size: Int(0, lim.MAX_ARTIFACT_MEMBER_BYTES) = 0
    path: Text(200) = ""


class QuietCheck(Open):
    """What the table reads of it (flows/takeaways/measurement_table): `quiet` and `waited_s`
    typed."""

    quiet: bool | None = None
    waited_s: Seconds | None = None


class MeasurementRow(BaseModel):
    model_config = STRICT
    source_id: Int(0, 2**63 - 1) | None = None  # the exporting database's id (not imported)
    artifacts: Items(ArtifactEntry, lim.MAX_ARTIFACTS_PER_MEASUREMENT) = []
    phase: Literal[MEASUREMENT_PHASES]
    pm: PathManager
    cc: CC
    bs_mib: ProbeMib
    run: Int(0, lim.MAX_RUN_INDEX)
    excluded_subflow: Variant = ""
    subflows: Subflows
    duration_s: Num(0, lim.MAX_PROBE_S, gt=True)
    interval_s: Num(lim.MIN_INTERVAL_S, lim.MAX_PROBE_S) = 1.0
    goodput_mbps: Items(Mbps, lim.MAX_SERIES)
    mean_goodput_mbps: Mbps | None = None
    subflow_bytes: Annotated[dict[SubflowName, Bytes], Field(max_length=lim.MAX_SUBFLOWS)] = {}
    rtt_ms: Annotated[dict[SubflowName, Ms], Field(max_length=lim.MAX_SUBFLOWS)] = {}
    rto_ms: Annotated[dict[SubflowName, Ms], Field(max_length=lim.MAX_SUBFLOWS)] = {}
    tool: Text(64)
    tool_version: Text(64) = ""
    raw_output: Raw(lim.MAX_RAW_OUTPUT) = ""
    observed_subflows: Items(JsonObject, lim.MAX_SUBFLOWS) = []
    effective_buffers: Annotated[dict[Annotated[str, Field(max_length=64)], Bytes | None],
                                 Field(max_length=64)] = {}
    quiet_check: QuietCheck | None = None
    warmup_s: Seconds = 0.0
    timing: JsonObject | None = None
    clock_offset_ms: Num(-lim.MAX_CLOCK_OFFSET_MS, lim.MAX_CLOCK_OFFSET_MS) | None = None
    clock_offset_uncertainty_ms: Ms | None = None
    status: Literal["ok", "failed"] = "ok"
    error: Raw(lim.MAX_TEXT) | None = None
    started_at: Timestamp
    finished_at: Timestamp
    created_at: Timestamp | None = None

    @model_validator(mode="after")
    def _series_fits_the_probe(self):
        longest = int(self.duration_s / self.interval_s) + 2
        if len(self.goodput_mbps) > longest:
            raise ValueError(f"goodput_mbps: {len(self.goodput_mbps)} intervals, more than a "
                             f"{self.duration_s:g} s probe at {self.interval_s:g} s has")
        return self


class ImpactRow(BaseModel):
    model_config = STRICT
    cc: CC
    subflow: SubflowName
    position: Int(0, lim.MAX_SUBFLOWS) = 0
    omega: Omega
    in_subset: bool
    omega_low: Omega | None = None
    omega_high: Omega | None = None
    settled: bool | None = None
    runs: Int(0, lim.MAX_MEASUREMENTS) | None = None
    created_at: Timestamp | None = None


class FitRow(BaseModel):
    model_config = STRICT
    pm: PathManager
    model_kind: Literal[ALL_MODEL_KINDS]
    n: Count
    curves: Items(Annotated[JsonObject, AfterValidator(_curve)], 4 * lim.MAX_CCS)
    coefficients: Items(JsonObject, 1000)
    curve_p_values: JsonObject = {}
    r2: Num(-1e9, 1)
    adj_r2: Num(-1e9, 1) | None = None
    buffer_p_value: Num(0, 1) | None = None
    gate_passed: bool
    warnings: Flags = []
    arms: Items(JsonObject, 4 * lim.MAX_CCS) = []
    created_at: Timestamp | None = None


class AnswerRow(BaseModel):
    model_config = STRICT
    kind: Literal["calibrated", "provisional"]
    delta: Annotated[float, Field(ge=0, lt=1, allow_inf_nan=False)]
    bs_min_mib: Mib
    bs_max_mib: Mib
    inputs: JsonObject
    opm: PathManager
    occ: CC | None = None
    obs_mib: Mib | None = None
    otp_mbps: Mbps | None = None
    tp_max_mbps: Mbps | None = None
    outputs: JsonObject
    traditional: JsonObject
    provenance: JsonObject
    quality_flags: Flags = []
    created_at: Timestamp | None = None

    @model_validator(mode="after")
    def _bounds_in_order(self):
        if self.bs_min_mib > self.bs_max_mib:
            raise ValueError("bs_min_mib is above bs_max_mib")
        return self


class EventRow(BaseModel):
    model_config = STRICT
    kind: Literal[EVENT_KINDS]
    subject: Text(64) = ""
    before: Json = None
    after: Json = None
    change_pct: Num(-1e12, 1e12) | None = None
    created_at: Timestamp | None = None


class Source(Open):
    campaign_id: Int(0, 2**63 - 1) | None = None
    topology_id: Int(0, 2**63 - 1) | None = None
    recommendation_id: Int(0, 2**63 - 1) | None = None
    database: Text(32) | None = None
    imported_from: JsonObject | None = None


class Document(BaseModel):
    model_config = STRICT
    format: Literal["mpcoa-campaign-bundle"]
    version: Literal[1]
    exported_at: Text(40) | None = None
    exported_by: JsonObject = {}
    source: Source = Source()
    topology: TopologyRow
    capabilities: Annotated[dict[Name, JsonObject], Field(max_length=2)] = {}
    software: JsonObject = {}
    campaign: CampaignRow
    measurements: Items(MeasurementRow, lim.MAX_MEASUREMENTS)
    impact_factors: Items(ImpactRow, lim.MAX_CCS * lim.MAX_SUBFLOWS)
    selection: Json = None
    fits: Items(FitRow, 64)
    answer: AnswerRow | None = None
    events: Items(EventRow, 10_000)

"""Request and response bodies (pydantic v2). Domain validation is the algorithm's own models."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from sqlalchemy import inspect as sa_inspect

from models import CAMPAIGN_STATES, MEASUREMENT_PHASES, MEASUREMENT_STATUSES, RECOMMENDATION_KINDS
from probes.vocabulary import Description, PathManager, Site, SubflowName
from service.algorithm import topology as algo
from service.algorithm.objective import Objective, objective_of
from service.algorithm.solver import DEFAULT_BS_MAX_MIB, DEFAULT_BS_MIN_MIB, DEFAULT_DELTA
from service.flows.answers.answer import (
    Eq1,
    Outputs,
    Promise,
    StreamOutputs,
    SubsetChoice,
)
from service.flows.answers.provenance import canonical
from service.flows.campaign import budget
from service.flows.campaign.plan import CampaignParameters
from service.state import state_of
from service.store.campaigns import report

T = TypeVar("T")

MAX_ID = 2**31 - 1
#: a stored row's id in a request body: a JSON number only (true is not topology 1)
BodyId = Annotated[int, Field(ge=1, le=MAX_ID, strict=True)]
RttMs = Annotated[float, Field(gt=0, le=600_000, allow_inf_nan=False, description="RTT in ms")]
Delta = Annotated[float, Field(ge=0, lt=1, allow_inf_nan=False)]
Mib = Annotated[float, Field(gt=0, le=1_000_000, allow_inf_nan=False)]

SRL = {
    "name": "SRL",
    "isps": [
        {"name": "Uninett", "label": "U", "down_kbps": 100000, "up_kbps": 100000},
        {"name": "Kvantel", "label": "K", "down_kbps": 1000000, "up_kbps": 1000000},
        {"name": "PowerTech", "label": "P", "down_kbps": 6000, "up_kbps": 256},
        {"name": "Telenor", "label": "T", "down_kbps": 3000, "up_kbps": 768},
    ],
}
HU = {
    "name": "HU",
    "isps": [
        {"name": "CERNET", "label": "C", "down_kbps": 100000, "up_kbps": 100000},
        {"name": "CnUnicom", "label": "CU", "down_kbps": 20000, "up_kbps": 20000},
    ],
}


class Page(BaseModel, Generic[T]):
    items: list[T]
    total: int
    limit: int
    offset: int


class FieldError(BaseModel):
    loc: list[str | int] = Field(description="the path to the field at fault")
    msg: str
    type: str


class Problem(BaseModel):
    """Every error: an RFC 9457 problem document, served as application/problem+json."""

    type: str = Field(description="the problem type: a URI reference to its section in "
                      "docs/api.md, relative to the repository's root (`docs/api.md#conflict`)")
    title: str = Field(description="the status's phrase")
    status: int
    detail: str = Field(description="what went wrong, for a person")
    loc: list[str | int] | None = Field(None, description="the field at fault (400, 409, 422)")
    errors: list[FieldError] | None = Field(None, description="a 422's every field at fault")


# --- sites ---------------------------------------------------------------------------------------
class SiteIn(Site):
    """A site and its ISPs (Table 1): the vocabulary's Site (its bounds and rules) plus a
    description."""

    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        json_schema_extra={"examples": [{**SRL, "description": "Simula Research Laboratory"}]},
    )

    description: Description = ""

    def spec(self) -> Site:
        return Site(name=self.name, isps=self.isps)


class ISPOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: int
    name: str
    label: str
    down_kbps: float
    up_kbps: float
    address: str | None = Field(None, description="the site's address on this ISP, IPv4 or IPv6")


class SiteOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: int
    name: str
    description: str
    isps: list[ISPOut]
    created_at: datetime
    updated_at: datetime


# --- topologies ----------------------------------------------------------------------------------
class TopologyIn(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [{"local_site_id": 1, "remote_site_id": 2, "rtts_ms": {"K-C": 310.0}}]
        },
    )

    local_site_id: BodyId = Field(description="sender site")
    remote_site_id: BodyId = Field(description="receiver site")
    rtts_ms: dict[SubflowName, RttMs] | None = Field(
        default=None, max_length=256, description="optional per-subflow RTT for Eq. 1"
    )


class TopologyPatch(BaseModel):
    model_config = ConfigDict(
        extra="forbid", json_schema_extra={"examples": [{"rtts_ms": {"K-C": 305.0, "P-C": None}}]}
    )

    rtts_ms: dict[SubflowName, RttMs | None] = Field(
        max_length=256, description="set (or with null clear) subflows' RTTs"
    )


class SubflowOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    name: str
    local_isp_id: int
    remote_isp_id: int
    bandwidth_kbps: float
    rtt_ms: float | None


class TopologyOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: int
    local_site: SiteOut
    remote_site: SiteOut
    subflows: list[SubflowOut]
    homogeneous: bool
    created_at: datetime
    updated_at: datetime


class InlineTopology(BaseModel):
    """Two sites with their ISPs. Stored on the way: a site is matched by name and must then have
    the same ISPs (else 409); a missing site or topology is created."""

    model_config = ConfigDict(extra="forbid")

    local: Site
    remote: Site
    rtts_ms: dict[SubflowName, RttMs] | None = Field(default=None, max_length=256)

    @model_validator(mode="after")
    def _distinct(self) -> InlineTopology:
        if self.local.name == self.remote.name:
            raise ValueError(f"local and remote site are both {self.local.name!r}")
        return self

    def spec(self) -> algo.TopologySpec:
        return algo.TopologySpec(local=self.local, remote=self.remote)


# --- recommendations -----------------------------------------------------------------------------
class RecommendationIn(BaseModel):
    """A topology (by id, or inline) and delta."""

    model_config = ConfigDict(extra="forbid")

    topology_id: BodyId | None = None
    topology: InlineTopology | None = None
    delta: Delta = DEFAULT_DELTA
    objective: Objective = Field(
        default_factory=Objective,
        description="bulk (default): the paper's goodput; stream: the smallest p99 frame delay "
        "that carries the stream's rate (docs/algorithm.md)")
    bs_min_mib: Mib | None = Field(
        default=None,
        description="default: the range the campaign measured; provisional: "
        f"{DEFAULT_BS_MIN_MIB}",
    )
    bs_max_mib: Mib | None = Field(
        default=None,
        description="default: the range the campaign measured; provisional: "
        f"{DEFAULT_BS_MAX_MIB}",
    )

    @model_validator(mode="after")
    def _one_topology(self) -> RecommendationIn:
        if (self.topology_id is None) == (self.topology is None):
            raise ValueError("give exactly one of topology_id and topology")
        if (self.bs_min_mib is not None and self.bs_max_mib is not None
                and self.bs_min_mib >= self.bs_max_mib):
            raise ValueError("bs_min_mib must be below bs_max_mib")
        return self


RECOMMENDATION_EXAMPLES = {
    "by_id": {
        "summary": "A stored topology",
        "value": {"topology_id": 1, "delta": 0.07},
    },
    "inline": {
        "summary": "SRL -> HU inline (Table 1), with RTTs for Eq. 1",
        "value": {
            "topology": {
                "local": SRL,
                "remote": HU,
                "rtts_ms": {f"{a}-{b}": 310.0 for a in "UKPT" for b in ("C", "CU")},
            },
            "delta": 0.07,
        },
    },
}


Traditional = Eq1  # Eq. 1, the traditional buffer


class RecommendationOut(Outputs):
    """Table 5, with T*, Eq. 1 and the provenance behind it: the stored answer's row and its
    `Outputs`, the one type the answer's figures are computed in (a field added there is sent
    here; the three below stay inside the row)."""

    # every field is sent, defaults included: the response schema says so
    model_config = ConfigDict(json_schema_serialization_defaults_required=True)

    id: int
    kind: Literal[RECOMMENDATION_KINDS]
    provisional: bool
    topology_id: int
    campaign_id: int | None
    delta: float
    objective: Objective = Field(description="what the answer optimises")
    bs_min_mib: float
    bs_max_mib: float
    opm: PathManager
    occ: str | None
    obs_mib: float | None
    otp_mbps: float | None
    promise: Promise | None = Field(
        default=None, description="read this first: where a fresh probe of the answer should "
        "land, and what is settled or within reach (adaptive campaigns)")
    stream: StreamOutputs | None = Field(
        default=None, description="a stream objective's answer: p99 frame delay at OBS with "
        "its interval, the arm's best, what carried the stream")
    subset_choice: SubsetChoice | None = Field(
        default=None, description="how PCDC's subflows were chosen: the measured selection's "
        "path, and where the paper's leave-one-out Omega disagrees")
    traditional: Traditional
    provenance: dict[str, Any] = Field(
        description="what the answer came from, every object's keys in sorted order; "
        "`data_age_s`: its newest measurement's age when the answer was first given (s)")
    quality_flags: list[str]
    created_at: datetime
    # kept with the stored answer, not sent (the fitted OTP and the measured OBS are in
    # `arms`, OCC's unsettled Omega signs in `quality_flags`)
    otp_fitted_mbps: float | None = Field(default=None, exclude=True)
    measured_obs_mib: float | None = Field(default=None, exclude=True)
    unsettled_omegas: list[str] = Field(default=[], exclude=True)

    @classmethod
    def of(cls, rec) -> RecommendationOut:
        return cls.model_validate({
            **(rec.outputs or {}),
            "id": rec.id,
            "kind": rec.kind,
            "provisional": rec.kind == "provisional",
            "topology_id": rec.topology_id,
            "campaign_id": rec.campaign_id,
            "delta": rec.delta,
            "objective": objective_of((rec.inputs or {}).get("objective")),
            "bs_min_mib": rec.bs_min_mib,
            "bs_max_mib": rec.bs_max_mib,
            "opm": rec.opm,
            "occ": rec.occ,
            "obs_mib": rec.obs_mib,
            "otp_mbps": rec.otp_mbps,
            "traditional": rec.traditional,
            "provenance": canonical(rec.provenance),
            "quality_flags": rec.quality_flags,
            "created_at": rec.created_at,
        })


# --- campaigns, measurements --------------------------------------------------------------------
class CampaignIn(CampaignParameters):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "topology_id": 1,
                    "ccs": ["cubic", "hybla"],
                    "pms": ["PCDC", "FullMesh"],
                    "buffer_grid_mib": [0.5, 1, 2, 4, 8, 16, 30],
                    "runs": 3,
                    "duration_s": 30,
                }
            ]
        },
    )

    topology_id: BodyId


class CampaignOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: int
    topology_id: int
    state: Literal[CAMPAIGN_STATES]
    reason: str
    ccs: list[str]
    pms: list[PathManager]
    buffer_grid_mib: list[float]
    runs: int
    duration_s: float
    delta: float
    model_kind: str
    mode: str = "grid"  # grid or adaptive
    objective: Objective = Field(default_factory=Objective,
                                 description="what the campaign optimises (bulk or a stream)")
    probe_tool: str = Field(default="auto", description="the tool its probes run on: auto, "
                            "netperfmeter or iperf3 (each measurement names the one it ran on)")
    probe_seconds_budget: float | None
    probes_total: int
    probes_done: int
    probe_seconds_used: float
    progress: float = Field(description="probes_done / probes_total, 0..1")
    elapsed_s: float | None = Field(description="since the campaign started (to its end)")
    remaining_s: float | None = Field(
        description="probe time left: probes left (at least one while active) x duration_s, "
        "0 once final; the probing only, setup between probes comes on top"
    )
    notes: dict[str, Any] = Field(
        default_factory=dict,
        description="CCs kept and dropped (and why), failed probes, extra rounds, recommendation",
    )
    executor: str | None
    error: str | None
    created_at: datetime
    queued_at: datetime | None
    started_at: datetime | None
    finished_at: datetime | None

    @classmethod
    def of(cls, row) -> CampaignOut:
        elapsed = None
        if row.started_at is not None:
            end = row.finished_at or datetime.now(UTC)
            elapsed = max(0.0, (end - row.started_at).total_seconds())
        notes = report(row)
        spent = state_of(row).budget
        return cls.model_validate({
            **_attrs(row), "objective": objective_of(row.objective),
            "probe_seconds_budget": spent.cap_s, "probes_total": spent.planned,
            "probes_done": spent.done, "probe_seconds_used": spent.used_s,
            "progress": budget.progress(row), "elapsed_s": elapsed,
            "remaining_s": budget.remaining_s(row), "notes": notes,
        })


def _attrs(row) -> dict[str, Any]:
    mapper = sa_inspect(type(row))
    return {c.key: getattr(row, mapper.get_property_by_column(c).key)
            for c in row.__table__.columns}


class MeasurementOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: int
    campaign_id: int
    phase: Literal[MEASUREMENT_PHASES]
    pm: PathManager
    cc: str
    bs_mib: float
    run: int
    excluded_subflow: str | None
    subflows: list[str]
    duration_s: float
    interval_s: float
    goodput_mbps: list[float]
    mean_goodput_mbps: float | None
    subflow_bytes: dict[str, int]
    rtt_ms: dict[str, float]
    rto_ms: dict[str, float]
    observed_subflows: list[dict[str, Any]] = Field(
        default_factory=list,
        description="what the kernel ran: name, backup flag, bytes acked, RTT, min RTT, RTO, "
        "skmem buffers per subflow",
    )
    effective_buffers: dict[str, Any] = Field(
        default_factory=dict, description="socket buffers read back on both ends (bytes)"
    )
    quiet_check: dict[str, Any] | None = Field(
        default=None, description="both sites idle before the probe: queued bytes, backlogs"
    )
    warmup_s: float = Field(default=0.0, description="left out of mean_goodput_mbps")
    tool: str
    tool_version: str
    status: Literal[MEASUREMENT_STATUSES]
    error: str | None
    started_at: datetime
    finished_at: datetime

    @field_validator("excluded_subflow", mode="before")
    @classmethod
    def _none(cls, value):
        return value or None


class MeasurementDetail(MeasurementOut):
    raw_output: str


# --- the paper's tables ---------------------------------------------------------------------------
class OmegaInterval(BaseModel):
    """Omega's confidence interval over the impact runs; settled = it excludes 0."""

    low: float | None
    high: float | None
    settled: bool | None
    runs: int | None


class ImpactRow(BaseModel):
    cc: str
    omegas: dict[str, float]
    intervals: dict[str, OmegaInterval] = {}


class ImpactTable(BaseModel):
    """Table 2: Omega per (CC, subflow)."""

    topology_id: int
    campaign_id: int | None
    subflows: list[str]
    rows: list[ImpactRow]


class SubsetRow(BaseModel):
    cc: str
    subset: list[str]
    standby: list[str]
    same_as_fullmesh: bool


class SubsetTable(BaseModel):
    """Table 3: SP* per CC."""

    topology_id: int
    campaign_id: int | None
    subflows: list[str]
    rows: list[SubsetRow]


class CurveOut(BaseModel):
    """A fitted curve: the paper's quadratic (a + b*bs + c*bs^2) or a saturating one (a ramp to
    plateau_mbps with its knee at knee_mib)."""

    kind: Literal["quadratic", "saturating"] = "quadratic"
    cc: str
    a: float | None = None
    b: float | None = None
    c: float | None = None
    plateau_mbps: float | None = None
    knee_mib: float | None = None
    sharpness: float | None = None
    same_as_fullmesh: bool = False


class ArmFitOut(BaseModel):
    """One (PM, CC) arm of a fit: its model and why, and its own quality gate."""

    pm: PathManager
    cc: str
    model: str
    reason: str
    n: int
    r2: float | None
    buffer_p_value: float | None
    gate_passed: bool
    aic_quadratic: float | None = None
    aic_saturating: float | None = None
    failures: list[str] = []


class CoefficientOut(BaseModel):
    name: str
    value: float
    p_value: float | None


class FitOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: int
    campaign_id: int
    pm: PathManager
    model_kind: str
    n: int
    curves: list[CurveOut]
    coefficients: list[CoefficientOut]
    curve_p_values: dict[str, Any]
    r2: float
    adj_r2: float | None
    buffer_p_value: float | None
    gate_passed: bool
    warnings: list[str]
    arms: list[ArmFitOut] = []
    created_at: datetime


class FitTable(BaseModel):
    """Table 4: one regression per PM."""

    topology_id: int
    campaign_id: int | None
    fits: list[FitOut]


class Health(BaseModel):
    status: Literal["ok"]
    database: str
    executor: str
    reads_need_token: bool


class ArtifactOut(BaseModel):
    """One raw output stored with a measurement; download it from ``url``."""

    model_config = ConfigDict(from_attributes=True)

    name: str
    size: int  #: bytes, uncompressed
    media_type: str
    url: str


class SiteCapabilitiesOut(BaseModel):
    """The latest report of a site's worker (``mpcoa worker --site``)."""

    site_id: int
    reported_at: datetime
    report: dict[str, Any]

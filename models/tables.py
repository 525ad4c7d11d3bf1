"""Every table of mpcoa: what was measured, what was computed from it, and what was recommended.

Units follow the spec: buffer in MiB, throughput in Mbit/s, bandwidth in kbit/s, times in seconds
unless the column name says otherwise (rtt_ms).
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.orm import Mapped, mapped_column, relationship

from .base import Base, JSONType, UTCDateTime, utcnow

CAMPAIGN_STATES = ("queued", "running", "done", "failed", "cancelled")
CAMPAIGN_MODES = ("grid", "adaptive")
ACTIVE_CAMPAIGN_STATES = ("queued", "running")
FINAL_CAMPAIGN_STATES = ("done", "failed", "cancelled")


class MeasurementPhase(StrEnum):
    """The phase a stored measurement (and a `ProbeStep`) belongs to; a plain `str` (it compares,
    hashes and serialises as its value).

    The buffer sweep's probes are `SWEEP`, stored as "buffer": the value predates the name and
    stays, since the measurements table (its CHECK and every unique key), bundles of version 1
    and 2 and the API's measurement lists carry it. In the probe budget the sweep is "sweep"
    (`budget_phase`), the phase's own name. `WARM`: a recalibration's checks."""

    IMPACT = "impact"
    SWEEP = "buffer"
    WARM = "warm"
    SELECTION = "selection"
    #: probes that set no socket buffer under a candidate autotuning ceiling (tcp_rmem /
    #: tcp_wmem max), which the key's `bs_mib` holds (`algorithm.autotune_ceiling`)
    AUTOTUNE = "autotune"

    @property
    def budget_phase(self) -> str:
        """The probe budget's name of this phase (the campaign state's budget keys)."""
        return "sweep" if self is MeasurementPhase.SWEEP else self.value


MEASUREMENT_PHASES = tuple(p.value for p in MeasurementPhase)
MEASUREMENT_STATUSES = ("ok", "failed")
RECOMMENDATION_KINDS = ("calibrated", "provisional")
TOKEN_SCOPES = ("read", "write")
# Stored in the measurement key instead of NULL so that the unique key also holds for
# "no subflow excluded" (NULLs are distinct in a unique constraint).
NO_EXCLUSION = ""


def _in(column: str, values: tuple[str, ...]) -> str:
    quoted = ", ".join(f"'{v}'" for v in values)
    return f"{column} IN ({quoted})"


ACTIVE_WHERE = _in("state", ACTIVE_CAMPAIGN_STATES)


class Site(Base):
    __tablename__ = "sites"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(32), unique=True)
    description: Mapped[str] = mapped_column(String(200), default="")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, onupdate=utcnow)

    isps: Mapped[list[ISP]] = relationship(
        back_populates="site",
        cascade="all, delete-orphan",
        order_by="ISP.position",
        lazy="selectin",
    )


class ISP(Base):
    """An access link of a site (Table 1)."""

    __tablename__ = "isps"
    __table_args__ = (
        UniqueConstraint("site_id", "label"),
        UniqueConstraint("site_id", "name"),
        CheckConstraint("down_kbps > 0 AND up_kbps > 0", name="positive_bandwidth"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    site_id: Mapped[int] = mapped_column(ForeignKey("sites.id", ondelete="CASCADE"), index=True)
    position: Mapped[int] = mapped_column(Integer, default=0)
    name: Mapped[str] = mapped_column(String(32))
    label: Mapped[str] = mapped_column(String(8))
    down_kbps: Mapped[float] = mapped_column(Float)
    up_kbps: Mapped[float] = mapped_column(Float)
    #: the site's address on this ISP, IPv4 or IPv6, as the API normalised it (optional)
    address: Mapped[str | None] = mapped_column(String(45), nullable=True, default=None)

    site: Mapped[Site] = relationship(back_populates="isps")


class Topology(Base):
    """A sender ("local") and receiver ("remote") site pair."""

    __tablename__ = "topologies"
    __table_args__ = (
        UniqueConstraint("local_site_id", "remote_site_id"),
        CheckConstraint("local_site_id <> remote_site_id", name="distinct_sites"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    local_site_id: Mapped[int] = mapped_column(ForeignKey("sites.id", ondelete="RESTRICT"))
    remote_site_id: Mapped[int] = mapped_column(ForeignKey("sites.id", ondelete="RESTRICT"))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, onupdate=utcnow)

    local_site: Mapped[Site] = relationship(foreign_keys=[local_site_id], lazy="joined")
    remote_site: Mapped[Site] = relationship(foreign_keys=[remote_site_id], lazy="joined")
    subflows: Mapped[list[Subflow]] = relationship(
        back_populates="topology",
        cascade="all, delete-orphan",
        order_by="Subflow.position",
        lazy="selectin",
    )


class Subflow(Base):
    """One (local ISP, remote ISP) pair of a topology, named '<local label>-<remote label>'."""

    __tablename__ = "subflows"
    __table_args__ = (UniqueConstraint("topology_id", "name"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    topology_id: Mapped[int] = mapped_column(
        ForeignKey("topologies.id", ondelete="CASCADE"), index=True
    )
    position: Mapped[int] = mapped_column(Integer, default=0)
    name: Mapped[str] = mapped_column(String(20))
    local_isp_id: Mapped[int] = mapped_column(ForeignKey("isps.id", ondelete="RESTRICT"))
    remote_isp_id: Mapped[int] = mapped_column(ForeignKey("isps.id", ondelete="RESTRICT"))
    bandwidth_kbps: Mapped[float] = mapped_column(Float)
    # Optional operator-supplied path RTT (Eq. 1 needs it when no measurement carries one).
    rtt_ms: Mapped[float | None] = mapped_column(Float, nullable=True)

    topology: Mapped[Topology] = relationship(back_populates="subflows")


class Campaign(Base):
    """A measurement campaign for one topology: parameters, state and progress."""

    __tablename__ = "campaigns"
    __table_args__ = (
        CheckConstraint(_in("state", CAMPAIGN_STATES), name="state"),
        CheckConstraint(_in("mode", CAMPAIGN_MODES), name="mode"),
        CheckConstraint("runs >= 1 AND duration_s > 0", name="positive_plan"),
        # One active campaign per topology, held by the database: a check-then-insert in the
        # service loses races between two API processes.
        Index(
            "uq_campaigns_active_topology",
            "topology_id",
            unique=True,
            postgresql_where=text(ACTIVE_WHERE),
            sqlite_where=text(ACTIVE_WHERE),
        ),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    topology_id: Mapped[int] = mapped_column(
        ForeignKey("topologies.id", ondelete="CASCADE"), index=True
    )
    state: Mapped[str] = mapped_column(String(16), default="queued", index=True)
    reason: Mapped[str] = mapped_column(String(32), default="manual")
    # parameters
    ccs: Mapped[list[str]] = mapped_column(JSONType)
    pms: Mapped[list[str]] = mapped_column(JSONType)
    buffer_grid_mib: Mapped[list[float]] = mapped_column(JSONType)
    runs: Mapped[int] = mapped_column(Integer)
    duration_s: Mapped[float] = mapped_column(Float)
    delta: Mapped[float] = mapped_column(Float)
    model_kind: Mapped[str] = mapped_column(String(16), default="paper")
    # grid: every (PM, CC, buffer, run) of the plan; adaptive: probes chosen from what was
    # measured until the decision is settled (service/algorithm/adaptive/)
    mode: Mapped[str] = mapped_column(String(16), default="grid", server_default="grid")
    # what the campaign optimises (service/algorithm/objective.py): NULL = bulk goodput; the
    # key ("bulk", or the resolved stream) is what answers are looked up by
    objective: Mapped[dict[str, Any] | None] = mapped_column(JSONType, nullable=True)
    objective_key: Mapped[str] = mapped_column(String(120), default="bulk",
                                               server_default="bulk", index=True)
    # the probe tool every phase runs on: auto or a registered tool's name, validated by the plan
    # against the registry (probes.tools.choice.check_choice), not here: a tool registers itself
    probe_tool: Mapped[str] = mapped_column(String(16), default="auto", server_default="auto")
    executor: Mapped[str | None] = mapped_column(String(32), nullable=True)
    # The outbox: when the executor last accepted a hand-over; NULL = one is owed (the broker
    # was down, or the last probe's follow-up could not be sent): the sweeper sends it.
    dispatched_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    task_id: Mapped[str | None] = mapped_column(String(200), nullable=True)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    # What the campaign decided on the way. CCs: offered by both sites' kernels, still measured
    # (None until chosen), dropped with the reason.
    offered_ccs: Mapped[list[str] | None] = mapped_column(JSONType, nullable=True)
    active_ccs: Mapped[list[str] | None] = mapped_column(JSONType, nullable=True)
    dropped_ccs: Mapped[dict[str, str]] = mapped_column(JSONType, default=dict)
    impact_runs: Mapped[int | None] = mapped_column(Integer, nullable=True)
    # Seed of the buffer sweep's per-run random order (sweep.run_order), so it can be replayed.
    seed: Mapped[int] = mapped_column(Integer, default=0)
    recommendation_id: Mapped[int | None] = mapped_column(Integer, nullable=True)
    # The probe lease: one probe in flight per campaign, taken under a row lock.
    lease_id: Mapped[str | None] = mapped_column(String(32), nullable=True)
    lease_step: Mapped[list[Any] | None] = mapped_column(JSONType, nullable=True)
    lease_until: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    # Who runs the lease's probe now: the claimant's token, handed on to the one execution
    # that takes the probe over (a redelivered copy of its task finds it taken).
    lease_owner: Mapped[str | None] = mapped_column(String(32), nullable=True)
    # When it last asked for its two sites and had to wait (busy, or giving way to a busier
    # site's campaign under the fleet policy); NULL while it holds them or has not asked.
    site_wait_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    # Everything the phases decided, the probe budget included: the JSON form of
    # `service.state.CampaignState` (`state_of(campaign)` reads it typed).
    run_state_json: Mapped[dict[str, Any]] = mapped_column("run_state", JSONType, default=dict)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    queued_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    started_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)

    @property
    def measured_ccs(self) -> list[str]:
        """The CCs still measured: the active ones once chosen, else the plan's."""
        return list(self.active_ccs if self.active_ccs is not None else self.ccs)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, onupdate=utcnow)

    topology: Mapped[Topology] = relationship()


class Measurement(Base):
    """One probe run: the parameters, the goodput series and the raw tool output.

    The unique key (campaign, phase, pm, cc, bs, run, excluded subflow) makes a re-executed task
    find its earlier result instead of adding a second one.
    """

    __tablename__ = "measurements"
    __table_args__ = (
        UniqueConstraint(
            "campaign_id",
            "phase",
            "pm",
            "cc",
            "bs_mib",
            "run",
            "excluded_subflow",
            name="uq_measurements_key",
        ),
        CheckConstraint(_in("phase", MEASUREMENT_PHASES), name="phase"),
        CheckConstraint(_in("status", MEASUREMENT_STATUSES), name="status"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    campaign_id: Mapped[int] = mapped_column(
        ForeignKey("campaigns.id", ondelete="CASCADE"), index=True
    )
    phase: Mapped[str] = mapped_column(String(16))
    pm: Mapped[str] = mapped_column(String(16))
    cc: Mapped[str] = mapped_column(String(16))
    bs_mib: Mapped[float] = mapped_column(Float)
    run: Mapped[int] = mapped_column(Integer)
    # The step's variant: the excluded subflow of an impact run (TP_i), the probed subset of a
    # selection run (SELECTION_PREFIX and the names joined by "+"), else NO_EXCLUSION.
    excluded_subflow: Mapped[str] = mapped_column(String(200), default=NO_EXCLUSION)
    subflows: Mapped[list[str]] = mapped_column(JSONType)  # the subflows carrying data
    duration_s: Mapped[float] = mapped_column(Float)
    interval_s: Mapped[float] = mapped_column(Float, default=1.0)
    goodput_mbps: Mapped[list[float]] = mapped_column(JSONType)  # the TP(t) series
    mean_goodput_mbps: Mapped[float | None] = mapped_column(Float, nullable=True)
    subflow_bytes: Mapped[dict[str, int]] = mapped_column(JSONType, default=dict)
    rtt_ms: Mapped[dict[str, float]] = mapped_column(JSONType, default=dict)  # per subflow
    rto_ms: Mapped[dict[str, float]] = mapped_column(JSONType, default=dict)  # per subflow
    tool: Mapped[str] = mapped_column(String(64))
    tool_version: Mapped[str] = mapped_column(String(64), default="")
    raw_output: Mapped[str] = mapped_column(Text, default="")
    # What the probe really ran, so that it can be judged afterwards: the subflows the kernel
    # showed (name, backup flag, bytes, RTT, RTO), the socket buffers read back on both ends, the
    # quiet check before it, and the warm-up left out of mean_goodput_mbps.
    observed_subflows: Mapped[list[dict[str, Any]]] = mapped_column(JSONType, default=list)
    effective_buffers: Mapped[dict[str, Any]] = mapped_column(JSONType, default=dict)
    quiet_check: Mapped[dict[str, Any] | None] = mapped_column(JSONType, nullable=True)
    warmup_s: Mapped[float] = mapped_column(Float, default=0.0)
    # How long the probe ran and why (the timing rule's inputs and result), when a rule chose it.
    timing: Mapped[dict[str, Any] | None] = mapped_column(JSONType, nullable=True)
    # A stream probe between two hosts' clocks: the receiver's clock minus the sender's as the
    # control connection's exchanges estimated it, and its uncertainty (ms); None: one clock.
    clock_offset_ms: Mapped[float | None] = mapped_column(Float, nullable=True)
    clock_offset_uncertainty_ms: Mapped[float | None] = mapped_column(Float, nullable=True)
    status: Mapped[str] = mapped_column(String(16), default="ok")
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    started_at: Mapped[datetime] = mapped_column(UTCDateTime)
    finished_at: Mapped[datetime] = mapped_column(UTCDateTime)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class ImpactFactor(Base):
    """Omega of one subflow under one congestion control (Table 2)."""

    __tablename__ = "impact_factors"
    __table_args__ = (UniqueConstraint("campaign_id", "cc", "subflow"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    campaign_id: Mapped[int] = mapped_column(
        ForeignKey("campaigns.id", ondelete="CASCADE"), index=True
    )
    cc: Mapped[str] = mapped_column(String(16))
    subflow: Mapped[str] = mapped_column(String(20))
    position: Mapped[int] = mapped_column(Integer, default=0)
    omega: Mapped[float] = mapped_column(Float)
    in_subset: Mapped[bool] = mapped_column(Boolean)  # member of SP* (Table 3)
    # The mean Omega's confidence interval over the runs, and whether it excludes 0 (None: one
    # run, or stored without runs).
    omega_low: Mapped[float | None] = mapped_column(Float, nullable=True)
    omega_high: Mapped[float | None] = mapped_column(Float, nullable=True)
    settled: Mapped[bool | None] = mapped_column(Boolean, nullable=True)
    runs: Mapped[int | None] = mapped_column(Integer, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class FitRecord(Base):
    """One regression per (campaign, PM, model kind) (Table 4)."""

    __tablename__ = "fits"
    __table_args__ = (UniqueConstraint("campaign_id", "pm", "model_kind"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    campaign_id: Mapped[int] = mapped_column(
        ForeignKey("campaigns.id", ondelete="CASCADE"), index=True
    )
    pm: Mapped[str] = mapped_column(String(16))
    model_kind: Mapped[str] = mapped_column(String(16))
    n: Mapped[int] = mapped_column(Integer)
    # [{"cc", "a", "b", "c", "same_as_fullmesh"}]
    curves: Mapped[list[dict[str, Any]]] = mapped_column(JSONType)
    # [{"name", "value", "p_value"}]
    coefficients: Mapped[list[dict[str, Any]]] = mapped_column(JSONType)
    curve_p_values: Mapped[dict[str, Any]] = mapped_column(JSONType, default=dict)
    r2: Mapped[float] = mapped_column(Float)
    adj_r2: Mapped[float | None] = mapped_column(Float, nullable=True)
    buffer_p_value: Mapped[float | None] = mapped_column(Float, nullable=True)
    gate_passed: Mapped[bool] = mapped_column(Boolean)
    warnings: Mapped[list[str]] = mapped_column(JSONType, default=list)
    # Per (PM, CC) arm: model chosen and why, R^2, buffer-effect p, gate (arm_fit.ArmFit).
    arms: Mapped[list[dict[str, Any]]] = mapped_column(JSONType, default=list)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class Recommendation(Base):
    """Every answer given: inputs, delta, outputs, provenance and quality flags (Table 5)."""

    __tablename__ = "recommendations"
    __table_args__ = (CheckConstraint(_in("kind", RECOMMENDATION_KINDS), name="kind"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    topology_id: Mapped[int] = mapped_column(
        ForeignKey("topologies.id", ondelete="CASCADE"), index=True
    )
    campaign_id: Mapped[int | None] = mapped_column(
        ForeignKey("campaigns.id", ondelete="SET NULL"), nullable=True
    )
    kind: Mapped[str] = mapped_column(String(16))
    delta: Mapped[float] = mapped_column(Float)
    bs_min_mib: Mapped[float] = mapped_column(Float)
    bs_max_mib: Mapped[float] = mapped_column(Float)
    inputs: Mapped[dict[str, Any]] = mapped_column(JSONType)
    opm: Mapped[str] = mapped_column(String(16))
    occ: Mapped[str | None] = mapped_column(String(16), nullable=True)
    obs_mib: Mapped[float | None] = mapped_column(Float, nullable=True)
    otp_mbps: Mapped[float | None] = mapped_column(Float, nullable=True)
    tp_max_mbps: Mapped[float | None] = mapped_column(Float, nullable=True)
    outputs: Mapped[dict[str, Any]] = mapped_column(JSONType)
    traditional: Mapped[dict[str, Any]] = mapped_column(JSONType)
    provenance: Mapped[dict[str, Any]] = mapped_column(JSONType)
    quality_flags: Mapped[list[str]] = mapped_column(JSONType, default=list)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, index=True)


class ApiToken(Base):
    """API tokens; only the SHA-256 of the token is kept. `scope` 'read' allows reads only;
    `expires_at` (optional) ends it."""

    __tablename__ = "api_tokens"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(64), unique=True)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    last_used_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    revoked: Mapped[bool] = mapped_column(Boolean, default=False)
    scope: Mapped[str] = mapped_column(String(8), default="write", server_default="write")
    expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)


class BrowserSession(Base):
    """A dashboard login made with a token (api.session): the cookie names the row, logging out
    deletes it, so a copied cookie stops working then; it goes with its token."""

    __tablename__ = "browser_sessions"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)  # random, in the cookie
    token_id: Mapped[int] = mapped_column(
        ForeignKey("api_tokens.id", ondelete="CASCADE"), index=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime, index=True)


class AnswerGeneration(Base):
    """One row whose `value` grows whenever something an answer depends on changes (a topology,
    a site, a calibration, a token): cached answers are valid for one value only, and every API
    process reads it, so a change made by any process is seen by all of them."""

    __tablename__ = "answer_generation"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    value: Mapped[int] = mapped_column(BigInteger, default=0)

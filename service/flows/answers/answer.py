"""The typed parts of a recommendation: what the flows compute and store, and what the API
returns (its schemas import these instead of re-declaring them)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from probes.vocabulary import PathManager

from ...algorithm.adaptive.variation import Variation


class TStar(BaseModel):
    """T*: the largest throughput any (PM, CC) curve reaches on the buffer range (Eq. 9)."""

    tp_mbps: float
    bs_mib: float
    pm: PathManager
    cc: str


class ArmLine(BaseModel):
    """One (PM, CC) curve's peak and its own relaxed minimum buffer (Eq. 10-12), beside what was
    measured: the smallest measured buffer whose mean reaches the target, the largest mean."""

    pm: PathManager
    cc: str
    peak_bs_mib: float
    peak_tp_mbps: float
    obs_mib: float | None
    tp_at_obs_mbps: float | None
    same_as_fullmesh: bool
    kind: str = "quadratic"  # the curve's model: quadratic or saturating
    model_reason: str | None = None  # why that model (AIC, or the campaign's model kind)
    measured_obs_mib: float | None = None
    measured_max_mbps: float | None = None


class Eq1(BaseModel):
    """Eq. 1, the traditional buffer, over the subflows the answer uses, or why it is unknown."""

    available: bool
    subflows: list[str]
    buffer_mib: float | None = None
    fallback_mib: float | None = None
    obs_ratio: float | None = None
    rtt_max_s: float | None = None
    rto_max_s: float | None = None
    bandwidth_sum_kbps: float | None = None
    rtt_source: str | None = None
    rto_source: str | None = None
    reason: str | None = None
    missing_rtt_subflows: list[str] = []


class Promise(BaseModel):
    """What the answer promises, first: where a fresh probe of the recommended configuration
    should land (`of`: "one fresh probe", or "the mean" when no spread is known), and the one
    sentence a user reads before the figures (what is settled, what is within reach)."""

    statement: str | None = None
    low_mbps: float | None = None
    high_mbps: float | None = None
    of: str | None = None
    confidence: float | None = None
    variation: dict[str, Any] | None = Field(
        default=None, description="whether the path moved over time under the campaign's "
        "probes (`varies`) and by how much at this configuration: its 1 s goodputs' 10th-90th "
        "percentile (`p10_mbps`, `p90_mbps`, `spread_mbps`), its runs' range and the time "
        "they span; where it varies, the interval covers one fresh probe's range")

    @property
    def path_variation(self) -> Variation | None:
        """`variation` as the algorithm's own type (its stored form is what is sent)."""
        return None if self.variation is None else Variation.from_dict(self.variation)


class SubsetChoice(BaseModel):
    """How SP* was chosen for OCC: the measured selection's path (each step's subset, goodput
    and interval, the gain weighed) and where the paper's leave-one-out Ω disagrees."""

    method: str  # "measured selection" | "omega"
    subset: list[str]
    settled: bool | None = None
    shared_from: str | None = None
    path: list[dict] = []
    omega_subset: list[str] | None = None
    omega_agrees: bool | None = None
    omega_statement: str | None = None
    why: str | None = None  #: what the selection weighed, where it was not goodput (a stream)


class StreamAlternative(BaseModel):
    label: str
    relative: float  #: its best p99 against the chosen arm's best (0.03 = 3 % more)
    differs_in: list[str] = []


class StreamOutputs(BaseModel):
    """A stream objective's answer (`algorithm.stream_choice`): the p99 frame delay at OBS with
    its interval, the arm's best and the (1 + delta) limit, what carried the stream."""

    p99_ms: float | None
    p99_interval_ms: list[float] | None
    confidence: float
    best_p99_ms: float | None
    best_bs_mib: float | None
    limit_p99_ms: float | None
    #: a buffer within the limit passed because the one below it did not carry the stream
    skipped_edge_mib: float | None = None
    goodput_mbps: float | None
    lost_fraction: float | None
    settled: bool
    pm_settled: bool
    cc_settled: bool
    carrying: list[str] = []
    not_carrying: dict[str, str] = {}
    alternatives: list[StreamAlternative] = []
    points: list[dict] = []  #: per (PM, CC, buffer): the runs' p99, goodput, lost fraction
    #: what the delays are: ``one_way``, or ``relative_to_minimum`` (each probe's delays less
    #: its flow's least one: the two hosts' clock offset was not known within delta of them)
    delay_clock: Literal["one_way", "relative_to_minimum"] = "one_way"
    #: the largest clock offset uncertainty (ms) of the probes between two hosts' clocks
    clock_offset_uncertainty_ms: float | None = None
    #: beside p99, the figures the seeds report, over the probes of the answer's point (OPM,
    #: OCC, OBS): the mean of their mean frame delays, the largest frame delay of any, and the
    #: same of RFC 3550 jitter (on `delay_clock` like p99; None: no probe stored it)
    delay_mean_ms: float | None = None
    delay_max_ms: float | None = None
    jitter_mean_ms: float | None = None
    jitter_max_ms: float | None = None


class Outputs(BaseModel):
    """Everything of an answer beyond OPM / OCC / OBS / OTP."""

    promise: Promise | None = None
    subset_choice: SubsetChoice | None = None
    t_star: TStar | None = None
    target_mbps: float | None = None
    arms: list[ArmLine] = []
    subflows_used: list[str] = []
    standby_subflows: list[str] = []
    otp_fitted_mbps: float | None = None  # the fitted curve at OBS, before a cap to measurements
    measured_obs_mib: float | None = None  # the chosen arm's smallest measured buffer reaching it
    unsettled_omegas: list[str] = []  # OCC's subflows whose Omega sign stayed uncertain
    notes: list[str] = []
    poll_url: str | None = None
    stream: StreamOutputs | None = None  #: a stream objective's figures
    #: the smallest tcp_rmem/tcp_wmem maximum under which an application that sets no socket
    #: buffer got within delta of the best autotuned goodput, measured by probes that set none
    #: under each candidate ceiling (`algorithm.autotune_ceiling`); None: not measured, and OBS
    #: (the locked socket buffer) is all the answer has
    autotune_max_mib: float | None = None
    autotune_otp_mbps: float | None = None  #: the expected goodput under that ceiling
    autotune_interval_mbps: list[float] | None = None  #: where one fresh autotuned probe lands

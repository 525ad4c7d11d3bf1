"""The probe interface: what a measurement asks for and what it returns.

Nothing here imports from the rest of the project; names and labels follow the vocabulary's rules
(`probes.vocabulary`: site/ISP names ``^[A-Za-z][A-Za-z0-9_]{0,31}$``, labels
``^[A-Za-z][A-Za-z0-9]{0,7}$``, a subflow is ``"<local label>-<remote label>"``).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from probes import environment
from probes.frames import FrameStats
from probes.vocabulary import (  # the names' rules are the vocabulary's (re-exported here)
    CC_PATTERN,
    FULLMESH,
    Name,
    PathManager,
    SubflowName,
    normalize_pm,
)

SiteName = Name

#: An excluded (backup) subflow may carry at most this many payload bytes (bytes_acked; an idle
#: backup subflow shows 1). Absolute, not a share: four fully used 51 kbit/s ADSL subflows are
#: under 1 % of SRL-HU's aggregate. ``MPCOA_EXCLUDED_MAX_BYTES`` overrides it.
DEFAULT_EXCLUDED_MAX_BYTES = 4096
#: ... unless the kernel moved data onto it off a stalled allowed subflow: after an RTO the
#: scheduler sends the unacknowledged data again on another subflow, a backup one when no other
#: is available. Measured on shared.yaml, its allowed subflow's ACKs blackholed mid-probe
#: (bulk and paced): 0.3 s, one segment retransmitted on it and 0.1-27 KB on the backup, at most
#: 0.9 % of the probe's bytes (the 10-32 KB that failed campaign probes); 1 s or 3 s, the
#: backup subflow carried 19-31 % of them: that probe measured another path. So an excluded
#: subflow in backup may carry up to this share of the probe's bytes where an allowed subflow
#: retransmitted (never less than the absolute limit); with no retransmission, or not in
#: backup, the absolute limit alone holds.
REINJECTED_MAX_SHARE = 0.05
#: Warm-up (slow start, joins) left out of ``goodput_mbps`` when a request does not say.
DEFAULT_WARMUP_S = 2.0
#: the longest probe a request may ask for (a deployment with a broker allows less:
#: service.settings.Settings.longest_probe_s)
MAX_PROBE_S = 3600.0
#: Raw outputs kept with a result (``MeasurementResult.artifacts``): each at most this many bytes
#: (a longer one keeps its first MAX_ARTIFACT_BYTES), at most MAX_ARTIFACTS of them. 8 MiB holds
#: a 60 s iperf3 JSON at 0.1 s intervals many times over.
MAX_ARTIFACT_BYTES = 8 << 20
MAX_ARTIFACTS = 32
#: An artifact's name: a file name, no path (the API validates names against the same pattern).
ARTIFACT_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$"


#: A probe tool's name (`probes.tools.protocol`: the registry knows which exist), or "auto": the
#: campaigns table keeps it in 16 characters.
TOOL_NAME_PATTERN = r"^[a-z][a-z0-9-]{0,15}$"


def excluded_max_bytes() -> int:
    """MPCOA_EXCLUDED_MAX_BYTES (service/settings.py validates it: a ValueError naming it)."""
    return environment.get("excluded_max_bytes", DEFAULT_EXCLUDED_MAX_BYTES)


class ProbeError(RuntimeError):
    """A measurement could not be run; the message says why."""


class ReceiverAbsent(ProbeError):
    """A two-sided probe's receiver site has no worker taking its passive side (it died or is
    restarting): the sites' fault, not the probe's, so the step waits for the site and is run
    again rather than used up by its retries."""


class CapabilityError(ProbeError):
    """Something a backend needs is missing on a host; the message names it."""


class TrafficProfile(BaseModel):
    """Saturating bulk transfer, or paced frames (streaming) of a given rate and size."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["bulk", "paced"] = "bulk"
    frame_rate_hz: float | None = Field(default=None, gt=0, le=1e6, allow_inf_nan=False)
    frame_size_bytes: int | None = Field(default=None, ge=1, le=16_000_000)
    #: a frame whose one-way delay exceeds this is late (paced only; None: no budget)
    delay_budget_ms: float | None = Field(default=None, gt=0, le=600_000, allow_inf_nan=False)

    @model_validator(mode="after")
    def _check(self) -> TrafficProfile:
        if self.kind == "paced" and (self.frame_rate_hz is None or self.frame_size_bytes is None):
            raise ValueError("profile: paced needs frame_rate_hz and frame_size_bytes")
        if self.kind == "bulk" and (self.frame_rate_hz is not None
                                    or self.delay_budget_ms is not None):
            raise ValueError("profile.frame_rate_hz, delay_budget_ms: only for kind 'paced'")
        return self

    @classmethod
    def bulk(cls) -> TrafficProfile:
        return cls(kind="bulk")

    @classmethod
    def paced(cls, frame_rate_hz: float, frame_size_bytes: int,
              delay_budget_ms: float | None = None) -> TrafficProfile:
        return cls(kind="paced", frame_rate_hz=frame_rate_hz, frame_size_bytes=frame_size_bytes,
                   delay_budget_ms=delay_budget_ms)

    @property
    def rate_bps(self) -> float | None:
        if self.kind != "paced":
            return None
        assert self.frame_rate_hz is not None
        assert self.frame_size_bytes is not None
        return self.frame_rate_hz * self.frame_size_bytes * 8.0


class MeasurementRequest(BaseModel):
    """One measurement between two sites.

    ``allowed_subflows``: subflow names that may carry payload; ``None`` = all. Subflows not in
    the list are still established (as MPTCP backup subflows) but carry no payload.
    ``buffer_bytes``: SO_SNDBUF and SO_RCVBUF on both ends; ``None`` = kernel autotuning.
    ``autotune_max_bytes``: with no buffer set, the autotuning ceiling (tcp_rmem / tcp_wmem max)
    both ends run under for this probe; ``None`` = whatever the ends have. Only the emulated
    testbed sets it (inside its namespaces, restored after the probe): a real host's ceiling
    is every other connection's too.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    sender: SiteName
    receiver: SiteName
    allowed_subflows: list[SubflowName] | None = None
    cc: str = Field(default="cubic", pattern=CC_PATTERN)
    buffer_bytes: int | None = Field(default=None, ge=4096, le=1 << 31)
    autotune_max_bytes: int | None = Field(default=None, ge=4096, le=(1 << 31) - 1)
    duration_s: float = Field(default=10.0, gt=0, le=MAX_PROBE_S, allow_inf_nan=False)
    profile: TrafficProfile = Field(default_factory=TrafficProfile.bulk)
    path_manager: PathManager = FULLMESH
    #: the campaign's probe tool: auto takes NetPerfMeter 2.x where both ends have it, else
    #: iperf3 for bulk and the paced tool for streams (`probes.tools.choice.choose`, which
    #: refuses a name the registry does not know)
    tool: str = Field(default="auto", pattern=TOOL_NAME_PATTERN)
    #: seconds at the start left out of goodput_mbps; default min(2 s, duration / 2)
    warmup_s: float = Field(default=None, ge=0, le=3600, allow_inf_nan=False)  # type: ignore[assignment]

    @model_validator(mode="before")
    @classmethod
    def _defaults(cls, data: Any) -> Any:
        if isinstance(data, dict):
            data = dict(data)
            pm = data.get("path_manager")
            # Any case, as everywhere ("pcdc" was the old spelling); an unknown name is left for
            # the field's own error, which lists the names.
            if isinstance(pm, str):
                with contextlib.suppress(ValueError):
                    data["path_manager"] = normalize_pm(pm)
            if data.get("warmup_s") is None:
                d = data.get("duration_s", 10.0)
                if isinstance(d, int | float) and not isinstance(d, bool):
                    data["warmup_s"] = min(DEFAULT_WARMUP_S, d / 2)
        return data

    @field_validator("allowed_subflows")
    @classmethod
    def _non_empty(cls, v: list[str] | None) -> list[str] | None:
        if v is not None:
            if not v:
                raise ValueError("allowed_subflows: empty list (use None for all subflows)")
            if len(set(v)) != len(v):
                raise ValueError("allowed_subflows: duplicate subflow names")
        return v

    @model_validator(mode="after")
    def _sites(self) -> MeasurementRequest:
        if self.sender == self.receiver:
            raise ValueError(f"receiver: same site as sender ({self.sender!r})")
        if self.autotune_max_bytes is not None and self.buffer_bytes is not None:
            raise ValueError("autotune_max_bytes: only for a probe that sets no buffer "
                             "(buffer_bytes turns autotuning off)")
        if self.warmup_s >= self.duration_s:
            raise ValueError(f"warmup_s: {self.warmup_s:g} s leaves nothing of duration_s "
                             f"{self.duration_s:g} s")
        return self


class ObservedSubflow(BaseModel):
    """One subflow of the probe's data connection as ``ss`` saw it on the sender (last sample)."""

    model_config = ConfigDict(extra="forbid")

    name: str  #: "L-R" from the addresses, or "addr-addr" when not one of the pair's
    backup: bool  #: the kernel's backup flag on the subflow (ss flag ``b``/``B``)
    bytes_acked: int  #: payload acknowledged on it (an idle subflow shows 1: the SYN)
    bytes_retrans: int = 0
    rtt_ms: float | None = None  #: smoothed RTT under load
    min_rtt_ms: float | None = None  #: ss ``minrtt``: the unloaded RTT estimate (Eq. 1)
    rto_ms: float | None = None  #: ss ``rto``
    sndbuf: int | None = None  #: skmem ``tb`` (the subflow's send buffer)
    rcvbuf: int | None = None  #: skmem ``rb`` (the subflow's receive buffer)


class QuietCheck(BaseModel):
    """Both sites idle before a probe: no socket with queued data, no qdisc backlog."""

    model_config = ConfigDict(extra="forbid")

    waited_s: float
    queued_bytes: int  #: Recv-Q + Send-Q of every non-listening TCP/MPTCP socket at the end
    backlog_bytes: int  #: sum of the qdisc backlogs in the site and core namespaces
    quiet: bool
    checked: list[str] = Field(default_factory=list)  #: namespaces looked at
    busy: list[str] = Field(default_factory=list)  #: what was still busy (socket / qdisc)


def intervals_after_warmup(
    series: Sequence[tuple[float, float]], warmup_s: float
) -> list[tuple[float, float]]:
    """The (length s, Mbit/s) intervals of a (interval end s, Mbit/s) series that start at or
    after ``warmup_s`` (50 ms of slack: tools' interval ends drift by a few ms): the measured
    part of a probe, whose mean is its goodput and whose spread its promise counts."""
    measured = []
    prev = 0.0
    for t, v in series:
        if prev >= warmup_s - 0.05 and t > prev:
            measured.append((t - prev, v))
        prev = t
    return measured


def mean_after_warmup(series: Sequence[tuple[float, float]], warmup_s: float) -> float | None:
    """Time-weighted mean of the intervals after ``warmup_s``; None when no interval is."""
    measured = intervals_after_warmup(series, warmup_s)
    weight = sum(length for length, _ in measured)
    return sum(length * v for length, v in measured) / weight if weight > 0 else None


class MeasurementResult(BaseModel):
    """What a probe measured. JSON-able (``to_dict``/``from_dict``) for storage."""

    model_config = ConfigDict(extra="forbid")

    request: MeasurementRequest
    tool: str
    tool_version: str
    #: receiver-side goodput, (end of interval s since start, Mbit/s), warm-up included
    goodput_series: list[tuple[float, float]] = Field(default_factory=list)
    #: mean of goodput_series after warmup_s (the figure to fit)
    goodput_mbps: float = 0.0
    #: the tool's own mean over the whole run, warm-up included
    goodput_mbps_total: float | None = None
    warmup_s: float = 0.0
    bytes_received: int = 0
    #: per subflow name ("L-R"): bytes the sender got acknowledged on it (kernel's bytes_acked)
    subflow_bytes: dict[str, int] = Field(default_factory=dict)
    #: subflows that were marked backup (no payload) during the run
    backup_subflows: list[str] = Field(default_factory=list)
    #: every subflow the host pair offers (the request's allowed ones plus the excluded ones)
    expected_subflows: list[str] = Field(default_factory=list)
    #: what the kernel really ran: the truth for subflow_set_problems
    observed_subflows: list[ObservedSubflow] = Field(default_factory=list)
    #: reasons the observed subflow set differs from the request (empty = as requested)
    subflow_problems: list[str] = Field(default_factory=list)
    #: socket buffers the kernel used (skmem tb/rb of each end's MPTCP socket, max over the
    #: run): sender_sndbuf, sender_rcvbuf, receiver_sndbuf, receiver_rcvbuf; None = not seen
    effective_buffers: dict[str, int | None] = Field(default_factory=dict)
    #: what the tool says it set per end with SO_SNDBUF/SO_RCVBUF (same keys; 0 = left alone,
    #: missing = the tool does not say)
    buffers_set: dict[str, int] = Field(default_factory=dict)
    #: a paced probe's frame figures (``probes.frames``; the raw records are the artifact
    #: ``frames.csv``); None for bulk probes and tools without per-frame output
    frames: FrameStats | None = None
    #: the pre-probe idle check of both sites (None: not checked, e.g. the host's own stack)
    quiet_check: QuietCheck | None = None
    kernel: dict[str, Any] = Field(default_factory=dict)
    mptcp_settings: dict[str, Any] = Field(default_factory=dict)
    #: "sender"/"receiver" -> how much each MPTCP health counter (``MPTcpExt``: fallbacks,
    #: dropped or disabled MP_CAPABLE SYNs, Blackhole, SubflowStale/Recover) rose during the run
    mptcp_counters: dict[str, dict[str, int]] = Field(default_factory=dict)
    started_at: datetime
    ended_at: datetime
    mptcp_ok: bool = False
    subflow_count: int = 0
    fallback_reason: str | None = None
    raw: dict[str, Any] = Field(default_factory=dict)
    #: the tools' raw outputs, name -> bytes (iperf3 JSON, NetPerfMeter files and logs), each
    #: capped at MAX_ARTIFACT_BYTES; not in to_dict (stored compressed in their own table)
    artifacts: dict[str, bytes] = Field(default_factory=dict, exclude=True)

    def add_artifact(self, name: str, content: bytes | str) -> None:
        """Keep one raw output (capped at MAX_ARTIFACT_BYTES, at most MAX_ARTIFACTS)."""
        if not re.fullmatch(ARTIFACT_NAME_PATTERN, name):
            raise ValueError(f"artifact name {name!r}: not a plain file name")
        if len(self.artifacts) >= MAX_ARTIFACTS and name not in self.artifacts:
            return
        data = content.encode() if isinstance(content, str) else bytes(content)
        self.artifacts[name] = data[:MAX_ARTIFACT_BYTES]

    def subflow_set_problems(self, max_excluded_bytes: int | None = None) -> list[str]:
        """How the observed subflows differ from the request; [] when they match.

        Allowed subflows must be established, not backup, and carry payload -- unless the flow is
        paced (it need not use every path) or its socket buffer is set: a buffer under the BDP
        is filled through whichever subflow the scheduler picks first, so an idle thin subflow
        is what that buffer does, not a wrong subflow set (it shows in ``observed_subflows``).
        Excluded ones must be established with the backup flag and carry at most
        ``max_excluded_bytes`` (default ``excluded_max_bytes()``), or, in backup where an allowed
        subflow retransmitted, ``REINJECTED_MAX_SHARE`` of the probe's bytes if that is more.
        """
        must_carry = self.request.profile.kind == "bulk" and self.request.buffer_bytes is None
        limit = excluded_max_bytes() if max_excluded_bytes is None else max_excluded_bytes
        expected = self.expected_subflows or sorted({o.name for o in self.observed_subflows})
        allowed = self.request.allowed_subflows or expected
        seen = {o.name: o for o in self.observed_subflows}
        problems = [f"subflow {n}: seen but not a subflow of this pair" for n in sorted(seen)
                    if n not in expected]
        stalled = any(seen[n].bytes_retrans > 0 for n in allowed if n in seen)
        reinjected = int(REINJECTED_MAX_SHARE * sum(o.bytes_acked for o in seen.values()))
        for name in expected:
            o = seen.get(name)
            if name in allowed:
                if o is None:
                    problems.append(f"subflow {name}: allowed but not established")
                elif o.backup:
                    problems.append(f"subflow {name}: allowed but in backup")
                elif must_carry and o.bytes_acked <= 1:
                    problems.append(f"subflow {name}: allowed but carried no payload")
            elif o is None:
                problems.append(f"subflow {name}: excluded but not established")
            else:
                if not o.backup:
                    problems.append(f"subflow {name}: excluded but not in backup")
                cap = max(limit, reinjected) if o.backup and stalled else limit
                if o.bytes_acked > cap:
                    problems.append(f"subflow {name}: excluded but carried {o.bytes_acked} "
                                    f"bytes (limit {cap})")
        return problems

    def buffer_problems(self) -> list[str]:
        """How the socket buffers differ from the request; [] when they match.

        A buffer of B bytes asked: the tool must have set B, and every end's buffer read back
        (``effective_buffers``, the MPTCP sockets' skmem) must be 2B, as Linux doubles the value
        (a value capped by ``wmem_max``/``rmem_max`` is not what was asked either). No buffer
        asked (autotuning): the tool must have set none, since any SO_SNDBUF/SO_RCVBUF turns
        autotuning off. What ``ss`` reads back cannot tell a socket locked by something else
        from an autotuned one that has not grown, so the tool's own report is the check there.
        """
        asked = self.request.buffer_bytes
        problems = []
        for end, value in sorted(self.buffers_set.items()):
            if asked is None and value:
                problems.append(f"buffer {end}: {self.tool} set {value} bytes, none was asked "
                                "(autotuning)")
            elif asked is not None and value != asked:
                problems.append(f"buffer {end}: {self.tool} set {value} bytes, {asked} asked")
        if asked is not None:
            for end, value in sorted(self.effective_buffers.items()):
                if value is not None and value != 2 * asked:
                    problems.append(f"buffer {end}: read back {value} bytes, {asked} asked "
                                    f"(Linux doubles it: {2 * asked})")
        return problems

    def failure_reason(self) -> str | None:
        """Why this probe must not be used (fallback, subflow set, buffers other than asked,
        a delay below its paths' floor, busy sites); None if none."""
        reasons = []
        if not self.mptcp_ok:
            reasons.append(self.fallback_reason or "no MPTCP")
        reasons += self.subflow_problems
        reasons += self.buffer_problems()
        if mean_after_warmup(self.goodput_series, self.warmup_s) is None:
            reasons.append(f"no goodput interval after the warm-up of {self.warmup_s:g} s")
        if self.frames is not None and (floor := self.frames.below_floor()):
            reasons.append(floor)
        if self.quiet_check is not None and not self.quiet_check.quiet:
            reasons.append("sites not quiet before the probe: "
                           + ", ".join(self.quiet_check.busy[:4]))
        return "; ".join(reasons) or None

    def subflow_share(self, name: str) -> float:
        total = sum(self.subflow_bytes.values())
        return self.subflow_bytes.get(name, 0) / total if total else 0.0

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json")

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> MeasurementResult:
        return cls.model_validate(data)


def set_on_both_ends(request: MeasurementRequest) -> dict[str, int]:
    """``buffers_set`` of a tool that sets the request's buffer (0: none) on both sockets of
    both ends, as iperf3's ``-w`` (passed to its server) and the paced tool do."""
    value = request.buffer_bytes or 0
    return {f"{end}_{buf}": value for end in ("sender", "receiver") for buf in ("sndbuf", "rcvbuf")}


def utcnow() -> datetime:
    return datetime.now(UTC)

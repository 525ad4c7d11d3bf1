"""The probe interface: what a measurement asks for and what it returns.

Nothing here imports from the rest of the project; names and labels follow the algorithm's
topology rules (site/ISP names ``^[A-Za-z][A-Za-z0-9_]{0,31}$``, labels
``^[A-Za-z][A-Za-z0-9]{0,7}$``, a subflow is ``"<local label>-<remote label>"``).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

NAME_PATTERN = r"^[A-Za-z][A-Za-z0-9_]{0,31}$"
LABEL_PATTERN = r"^[A-Za-z][A-Za-z0-9]{0,7}$"
SUBFLOW_PATTERN = r"^[A-Za-z][A-Za-z0-9]{0,7}-[A-Za-z][A-Za-z0-9]{0,7}$"
CC_PATTERN = r"^[a-z][a-z0-9_]{0,15}$"

SiteName = Annotated[str, Field(pattern=NAME_PATTERN)]
SubflowName = Annotated[str, Field(pattern=SUBFLOW_PATTERN)]

#: Excluded subflows may carry at most this share of the bytes (issue 3, PCDC / impact factors).
EXCLUSION_MAX_SHARE = 0.01


class ProbeError(RuntimeError):
    """A measurement could not be run; the message says why."""


class CapabilityError(ProbeError):
    """Something a backend needs is missing on a host; the message names it."""


class TrafficProfile(BaseModel):
    """Saturating bulk transfer, or paced frames (streaming) of a given rate and size."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["bulk", "paced"] = "bulk"
    frame_rate_hz: float | None = Field(default=None, gt=0, le=1e6, allow_inf_nan=False)
    frame_size_bytes: int | None = Field(default=None, ge=1, le=16_000_000)

    @model_validator(mode="after")
    def _check(self) -> TrafficProfile:
        if self.kind == "paced" and (self.frame_rate_hz is None or self.frame_size_bytes is None):
            raise ValueError("profile: paced needs frame_rate_hz and frame_size_bytes")
        if self.kind == "bulk" and (self.frame_rate_hz is not None):
            raise ValueError("profile.frame_rate_hz: only for kind 'paced'")
        return self

    @classmethod
    def bulk(cls) -> TrafficProfile:
        return cls(kind="bulk")

    @classmethod
    def paced(cls, frame_rate_hz: float, frame_size_bytes: int) -> TrafficProfile:
        return cls(kind="paced", frame_rate_hz=frame_rate_hz, frame_size_bytes=frame_size_bytes)

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
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    sender: SiteName
    receiver: SiteName
    allowed_subflows: list[SubflowName] | None = None
    cc: str = Field(default="cubic", pattern=CC_PATTERN)
    buffer_bytes: int | None = Field(default=None, ge=4096, le=1 << 31)
    duration_s: float = Field(default=10.0, gt=0, le=3600, allow_inf_nan=False)
    profile: TrafficProfile = Field(default_factory=TrafficProfile.bulk)
    path_manager: Literal["fullmesh", "pcdc"] = "fullmesh"

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
        return self


class MeasurementResult(BaseModel):
    """What a probe measured. JSON-able (``to_dict``/``from_dict``) for storage."""

    model_config = ConfigDict(extra="forbid")

    request: MeasurementRequest
    tool: str
    tool_version: str
    #: receiver-side goodput, (seconds since start, Mbit/s), 1 s steps or finer
    goodput_series: list[tuple[float, float]] = Field(default_factory=list)
    goodput_mbps: float = 0.0
    bytes_received: int = 0
    #: per subflow name ("L-R"): bytes the sender got acknowledged on it (kernel's bytes_acked)
    subflow_bytes: dict[str, int] = Field(default_factory=dict)
    #: subflows that were marked backup (no payload) during the run
    backup_subflows: list[str] = Field(default_factory=list)
    #: effective socket buffers read back: sender_sndbuf, sender_rcvbuf, receiver_sndbuf, ...
    effective_buffers: dict[str, int | None] = Field(default_factory=dict)
    kernel: dict[str, Any] = Field(default_factory=dict)
    mptcp_settings: dict[str, Any] = Field(default_factory=dict)
    started_at: datetime
    ended_at: datetime
    mptcp_ok: bool = False
    subflow_count: int = 0
    fallback_reason: str | None = None
    raw: dict[str, Any] = Field(default_factory=dict)

    @property
    def fittable(self) -> bool:
        """A run that fell back to TCP (or never ran MPTCP) is never fitted."""
        return self.mptcp_ok

    def subflow_share(self, name: str) -> float:
        total = sum(self.subflow_bytes.values())
        return self.subflow_bytes.get(name, 0) / total if total else 0.0

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json")

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> MeasurementResult:
        return cls.model_validate(data)


def utcnow() -> datetime:
    return datetime.now(UTC)


@runtime_checkable
class ProbeBackend(Protocol):
    """A measurement tool. ``measure`` runs one measurement; ``capabilities`` checks the host."""

    name: str

    def measure(self, request: MeasurementRequest) -> MeasurementResult: ...

    def capabilities(self) -> dict[str, Any]: ...

"""What a question optimises: bulk goodput (the paper's, the default) or a stream's frame delay.

A stream is given by its bitrate (frames at `DEFAULT_FRAME_RATE_HZ`, their size derived) or by
its frame rate and frame size; optionally a delay budget (a frame over it is late) and the
fraction of frames it may lose (`max_loss`, default 1 %). The objective is part of the question:
stored with the campaign and the answer, and part of every cache key, so answers for different
objectives never mix.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_serializer, model_validator

DEFAULT_FRAME_RATE_HZ = 25.0
DEFAULT_MAX_LOSS = 0.01
#: the paced tool's frame header and size field take 20 bytes
MIN_FRAME_BYTES = 64


class Objective(BaseModel):
    model_config = ConfigDict(
        extra="forbid", frozen=True,
        json_schema_extra={"examples": [
            {"kind": "bulk"},
            {"kind": "stream", "bitrate_mbps": 8, "delay_budget_ms": 150},
            {"kind": "stream", "frame_rate_hz": 25, "frame_size_bytes": 40000}]})

    kind: Literal["bulk", "stream"] = "bulk"
    bitrate_mbps: float | None = Field(default=None, gt=0, le=100_000, allow_inf_nan=False,
                                       description="stream: its rate (frames at 25/s)")
    frame_rate_hz: float | None = Field(default=None, gt=0, le=10_000, allow_inf_nan=False)
    frame_size_bytes: int | None = Field(default=None, ge=MIN_FRAME_BYTES, le=16_000_000)
    delay_budget_ms: float | None = Field(default=None, gt=0, le=600_000, allow_inf_nan=False,
                                          description="stream: a frame later than this is late")
    max_loss: float | None = Field(default=None, ge=0, lt=1, allow_inf_nan=False,
                                   description="stream: the fraction of frames it may lose "
                                   "(default 0.01)")

    @model_validator(mode="after")
    def _check(self) -> Objective:
        stream_fields = {k: getattr(self, k) for k in ("bitrate_mbps", "frame_rate_hz",
                                                       "frame_size_bytes", "delay_budget_ms",
                                                       "max_loss")}
        if self.kind == "bulk":
            given = [k for k, v in stream_fields.items() if v is not None]
            if given:
                raise ValueError(f"objective: {', '.join(given)} only for kind 'stream'")
            return self
        if self.bitrate_mbps is not None:
            if self.frame_size_bytes is not None:
                raise ValueError("objective: give bitrate_mbps (and optionally frame_rate_hz), "
                                 "or frame_rate_hz and frame_size_bytes")
        elif self.frame_rate_hz is None or self.frame_size_bytes is None:
            raise ValueError("objective: a stream needs bitrate_mbps, or frame_rate_hz and "
                             "frame_size_bytes")
        if self.frame_bytes < MIN_FRAME_BYTES:
            raise ValueError(f"objective: frames of {self.frame_bytes} bytes are under "
                             f"{MIN_FRAME_BYTES}: lower frame_rate_hz")
        return self

    @model_serializer(mode="wrap")
    def _given_only(self, handler) -> dict[str, Any]:
        """What was given: a field left out stays out (``{"kind": "bulk"}``)."""
        return {k: v for k, v in handler(self).items() if v is not None}

    @classmethod
    def bulk(cls) -> Objective:
        return cls()

    @property
    def is_stream(self) -> bool:
        return self.kind == "stream"

    @property
    def rate_hz(self) -> float:
        return self.frame_rate_hz or DEFAULT_FRAME_RATE_HZ

    @property
    def frame_bytes(self) -> int:
        if self.frame_size_bytes is not None:
            return self.frame_size_bytes
        assert self.bitrate_mbps is not None
        return round(self.bitrate_mbps * 1e6 / 8 / self.rate_hz)

    @property
    def rate_mbps(self) -> float:
        return self.rate_hz * self.frame_bytes * 8 / 1e6

    @property
    def loss_allowed(self) -> float:
        return DEFAULT_MAX_LOSS if self.max_loss is None else self.max_loss

    def stored(self) -> dict[str, Any]:
        """The stored form (a campaign's column, an answer's inputs): what was given."""
        return self.model_dump(mode="json", exclude_none=True)

    def key(self) -> str:
        """The resolved stream, not its spelling (8 Mbit/s is 25 frames of 40,000 bytes): the
        cache key's part and the campaigns' ``objective_key`` column ("bulk" for bulk)."""
        if not self.is_stream:
            return "bulk"
        budget = "-" if self.delay_budget_ms is None else f"{self.delay_budget_ms:g}"
        return (f"stream:{self.rate_hz:g}Hz:{self.frame_bytes}B:budget={budget}:"
                f"loss={self.loss_allowed:g}")


def objective_of(stored: dict[str, Any] | None) -> Objective:
    """A stored objective back (None or {}: bulk, as every row before objectives existed)."""
    return Objective.model_validate(stored) if stored else Objective.bulk()

"""Field conditions of a topology file: competing traffic on an ISP's link (``cross``), the link's
capacity over time (``schedule``) and bursty losses on a path (``loss_burst``).

Like the rest of the file, every rate here is multiplied by the testbed's ``rate_scale``::

    isps:
      - name: Uninett
        label: U
        down_kbps: 20000
        up_kbps: 20000
        cross:                                    # one entry or a list of them
          - {kind: bulk, direction: up, flows: 2, cc: cubic}
          - {kind: onoff, direction: down, mbps: 4, on_s: 5, off_s: 10}
          - {kind: web, direction: down, mbps: 2}
        schedule: {period_s: 60, steps: [[0, 20000, 20000], [30, 5000, 8000]]}
    paths:
      U-D: {loss_pct: 1, loss_burst: 4}
"""

from __future__ import annotations

import itertools
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from probes.vocabulary import MAX_KBPS, CongestionControl

MAX_CROSS_PER_ISP = 8
MAX_STEPS = 1000
MAX_PERIOD_S = 86_400.0
MAX_CROSS_MBPS = 10_000.0
MAX_LOSS_BURST = 10_000.0

Direction = Literal["up", "down"]
CrossMbps = Annotated[float, Field(gt=0, le=MAX_CROSS_MBPS, allow_inf_nan=False)]
Seconds = Annotated[float, Field(gt=0, le=3600, allow_inf_nan=False)]
#: mean length of a loss burst in packets: 1 is the shortest a burst can be
LossBurst = Annotated[float, Field(ge=1, le=MAX_LOSS_BURST, allow_inf_nan=False)]


class _Cross(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    #: up = from the site out through the ISP's uplink; down = in through its downlink
    direction: Direction


class CrossBulk(_Cross):
    """Long TCP flows that send as fast as their congestion control lets them."""

    kind: Literal["bulk"]
    flows: int = Field(default=1, ge=1, le=64)
    cc: CongestionControl = "cubic"


class CrossOnOff(_Cross):
    """One TCP connection sending at ``mbps`` for ``on_s`` seconds, then nothing for ``off_s``."""

    kind: Literal["onoff"]
    mbps: CrossMbps
    on_s: Seconds
    off_s: Seconds


class CrossWeb(_Cross):
    """Short TCP flows arriving at random (Poisson) with heavy-tailed (Pareto) sizes, averaging
    ``mbps``."""

    kind: Literal["web"]
    mbps: CrossMbps


Cross = Annotated[CrossBulk | CrossOnOff | CrossWeb, Field(discriminator="kind")]
# strict, as the ISPs' rates: a number, never a string that lax parsing would turn into one
StepKbps = Annotated[float, Field(gt=0, le=MAX_KBPS, allow_inf_nan=False, strict=True)]
StepTime = Annotated[float, Field(ge=0, allow_inf_nan=False, strict=True)]


class ScheduleSpec(BaseModel):
    """The link's capacity over time: ``[t_s, up_kbps, down_kbps]`` from ``t_s`` on within each
    period of ``period_s`` seconds, counted from the moment the testbed came up."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    period_s: float = Field(ge=1, le=MAX_PERIOD_S, allow_inf_nan=False)
    steps: list[tuple[StepTime, StepKbps, StepKbps]] = Field(min_length=1, max_length=MAX_STEPS)

    @field_validator("steps")
    @classmethod
    def _ordered(cls, steps: list[tuple[float, float, float]], info) -> list:
        if steps[0][0] != 0:
            raise ValueError(f"the first step must start at 0 s, not {steps[0][0]:g}")
        for prev, cur in itertools.pairwise(steps):
            if cur[0] <= prev[0]:
                raise ValueError(f"step times must increase: {cur[0]:g} s after {prev[0]:g} s")
        period = info.data.get("period_s")
        if period is not None and steps[-1][0] >= period:
            raise ValueError(f"step at {steps[-1][0]:g} s is not inside the period "
                             f"({period:g} s)")
        return steps


def cross_list(value: object) -> object:
    """``cross`` may be one entry or a list of entries; always a list inside."""
    if value is None or isinstance(value, list):
        return value
    return [value]


def gilbert_elliott(loss_pct: float, burst: float) -> tuple[float, float]:
    """(P good->bad, P bad->good) per packet for a two-state chain that drops every packet in
    the bad state: bursts of mean length ``burst`` and a long-run loss rate ``loss_pct``."""
    loss = loss_pct / 100.0
    leave_bad = 1.0 / burst
    return leave_bad * loss / (1.0 - loss), leave_bad


def check_loss_burst(where: str, loss_pct: float, burst: float | None) -> None:
    """A burst length the loss rate can have: the good state's exit probability must be <= 1."""
    if burst is None or loss_pct == 0:
        return
    enter, _ = gilbert_elliott(loss_pct, burst)
    if enter > 1.0:
        raise ValueError(f"{where}loss_burst: {burst:g} packets is too short for "
                         f"loss_pct {loss_pct:g} (at least {loss_pct / (100 - loss_pct):.3g})")

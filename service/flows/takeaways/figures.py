"""The figures the dashboard and the report both draw, defined once: their axes (label, scale)
and the data each plots. Pure data -- no matplotlib here, so the dashboard (Chart.js in the
browser) imports it as cheaply as the report (matplotlib) does; each stack maps `Axis.scale`
onto its own ("log" is Chart.js's "logarithmic", "symlog" is drawn as an inverse-hyperbolic
transform there, matplotlib's symlog in the report).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

SCALES = ("linear", "log", "symlog")

#: Ω beyond this magnitude is drawn on a symmetric log axis (the paper's run from -40 to 0.6)
OMEGA_SYMLOG_ABOVE = 2.0
#: the symlog axis is linear within +-this
OMEGA_LINTHRESH = 1.0


@dataclass(frozen=True)
class Axis:
    label: str
    scale: str = "linear"
    linthresh: float | None = None  # symlog only: linear within +-linthresh

    def __post_init__(self) -> None:
        if self.scale not in SCALES:
            raise ValueError(f"unknown axis scale {self.scale!r}")

    def as_json(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class FigureSpec:
    name: str
    x: Axis
    y: Axis

    def as_json(self) -> dict:
        return {"name": self.name, "x": self.x.as_json(), "y": self.y.as_json()}


# --- Figure 5 / report page 4: measured points and fitted curves per path manager --------------
FITS = FigureSpec(
    "fits",
    x=Axis("buffer (MiB, log scale)", "log"),
    y=Axis("goodput (Mbit/s)"),
)


def fit_curve_xs(lo: float, hi: float, points: int) -> list[float]:
    """Where a fitted curve is evaluated: evenly on the log buffer axis, `points` + 1 of them."""
    if not (lo > 0 and hi > lo):
        return [lo, hi] if hi != lo else [lo]
    return [lo * (hi / lo) ** (k / points) for k in range(points + 1)]


# --- Table 2 / report page 2: Ω per subflow and CC with its interval -----------------------------
_OMEGA_LINEAR = Axis("Ω = 1 - TP_i / TP_0")
_OMEGA_SYMLOG = Axis("Ω = 1 - TP_i / TP_0 (linear within ±1, log beyond)", "symlog",
                     OMEGA_LINTHRESH)
OMEGA_X = Axis("subflow (local ISP - remote ISP)")


def omega_figure(values: list[float]) -> FigureSpec:
    """Ω's axes: linear, or symlog once any |Ω| passes OMEGA_SYMLOG_ABOVE."""
    big = any(math.isfinite(v) and abs(v) > OMEGA_SYMLOG_ABOVE for v in values)
    return FigureSpec("omega", x=OMEGA_X, y=_OMEGA_SYMLOG if big else _OMEGA_LINEAR)


@dataclass(frozen=True)
class OmegaBar:
    cc: str
    subflow: str
    omega: float
    low: float | None
    high: float | None
    in_subset: bool  # SP* members are filled, the others hollow


def omega_bars(
    omegas: dict[str, dict[str, tuple[float, float | None, float | None, bool]]],
    subflows: list[str],
) -> list[OmegaBar]:
    """One bar per (CC, subflow) with a stored Ω, CCs in their order, subflows in the topology's
    (then any since removed). `omegas`: cc -> subflow -> (Ω, low, high, in SP*)."""
    order = list(subflows) + sorted({sf for per in omegas.values() for sf in per} - set(subflows))
    return [
        OmegaBar(cc, sf, *omegas[cc][sf])
        for cc in omegas
        for sf in order
        if sf in omegas[cc]
    ]


# --- one probe: goodput over time, bytes per subflow, the tool's per-interval TCP state ---------
PROBE_GOODPUT = FigureSpec("probe-goodput", x=Axis("time (s)"), y=Axis("goodput (Mbit/s)"))
PROBE_SUBFLOW_BYTES = FigureSpec("probe-subflow-bytes", x=Axis("subflow"), y=Axis("MiB sent"))
PROBE_RTT = FigureSpec("probe-rtt", x=Axis("time (s)"), y=Axis("RTT (ms)"))
PROBE_CWND = FigureSpec("probe-cwnd", x=Axis("time (s)"), y=Axis("cwnd (KiB)"))
PROBE_RETRANSMITS = FigureSpec("probe-retransmits", x=Axis("time (s)"),
                               y=Axis("retransmits per interval"))

#: every figure with fixed axes (the tests check both stacks draw these)
SPECS = {s.name: s for s in (FITS, PROBE_GOODPUT, PROBE_SUBFLOW_BYTES, PROBE_RTT, PROBE_CWND,
                             PROBE_RETRANSMITS)}

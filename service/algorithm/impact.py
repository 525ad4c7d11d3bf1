"""f3 (Eq. 5) impact factors and f4 (Eq. 6) the PCDC subflow subset."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass


def _check_series(name: str, series: Sequence[float]) -> None:
    if len(series) == 0:
        raise ValueError(f"{name}: empty throughput series")
    for k, v in enumerate(series):
        if not math.isfinite(v) or v < 0:
            raise ValueError(f"{name}[{k}]: throughput must be finite and >= 0, got {v!r}")


def impact_factor(tp0: Sequence[float], tpi: Sequence[float]) -> float:
    """Omega_i = 1 - sum_{T+1..2T} TP_i(t) / sum_{0..T} TP_0(t).

    tp0 is the total goodput with every subflow carrying data (window 0..T), tpi the total goodput
    while subflow i carries none (window T+1..2T). The two windows have the same length T in the
    paper; when a real measurement gives one sample more or less, the means are compared, which is
    the same ratio for equal lengths.
    """
    _check_series("tp0", tp0)
    _check_series("tpi", tpi)
    base = sum(tp0) / len(tp0)
    if base <= 0:
        raise ValueError("tp0: no throughput with all subflows, impact factors are undefined")
    return 1.0 - (sum(tpi) / len(tpi)) / base


def is_harmful(omega: float) -> bool:
    """The one sign rule (Eq. 6): a subflow harms the connection when Omega < 0; Omega = 0 is
    harmless and stays in SP*. Events, tables and the dashboard all use this."""
    return omega < 0


def sign_flipped(before: float, after: float) -> bool:
    """An impact factor changed sign: Eq. 6's verdict (harmful or not) differs."""
    return is_harmful(before) != is_harmful(after)


def sign_changes(series: list[float | None]) -> list[bool]:
    """Per value of a series (one per campaign, None where not measured): whether it flipped
    sign against the previous known value."""
    changes, previous = [], None
    for value in series:
        changes.append(value is not None and previous is not None
                       and sign_flipped(previous, value))
        if value is not None:
            previous = value
    return changes


def pcdc_subset(omegas: Mapping[str, float]) -> list[str]:
    """Eq. 6: SP* = SP minus every subflow with Omega < 0, in SP's order; never empty.

    If every Omega is negative the single subflow with the largest Omega is kept (spec step 4).
    """
    if not omegas:
        raise ValueError("omegas: no subflows")
    for name, value in omegas.items():
        if not math.isfinite(value):
            raise ValueError(f"omegas.{name}: must be finite, got {value!r}")
    kept = [name for name, value in omegas.items() if not is_harmful(value)]
    if not kept:
        kept = [max(omegas, key=lambda n: omegas[n])]
    return kept


@dataclass(frozen=True)
class ImpactResult:
    """Per congestion control: Omega per subflow, SP*, and the standby order for failover."""

    cc: str
    omegas: dict[str, float]
    subset: list[str]
    # Every subflow of the topology (SP of Eq. 3). None only for legacy callers: then the measured
    # Omegas are taken to cover SP, which is wrong when a subflow's runs failed.
    subflows: list[str] | None = None

    @property
    def unmeasured(self) -> list[str]:
        """Topology subflows without an Omega: never in SP*, so PCDC differs from FullMesh."""
        return [n for n in (self.subflows or []) if n not in self.omegas]

    @property
    def standby(self) -> list[str]:
        """Established but unused subflows, best Omega first: the next to take over (Section 3)."""
        unused = [n for n in self.omegas if n not in self.subset]
        return sorted(unused, key=lambda n: self.omegas[n], reverse=True)

    @property
    def same_as_fullmesh(self) -> bool:
        """SP* == SP: PCDC then runs exactly FullMesh's subflows (compared with the topology's)."""
        everything = self.omegas if self.subflows is None else self.subflows
        return set(self.subset) == set(everything)


def _check_subflows(omegas: Mapping[str, float], subflows: Sequence[str] | None) -> None:
    if subflows is None:
        return
    stray = [n for n in omegas if n not in set(subflows)]
    if stray:
        raise ValueError(f"omegas.{stray[0]}: not a subflow of the topology")


def impact_from_omegas(
    cc: str, omegas: Mapping[str, float], subflows: Sequence[str] | None = None
) -> ImpactResult:
    """Eq. 6 for one CC. `subflows` is SP, the topology's subflows (Topology.subflow_names())."""
    _check_subflows(omegas, subflows)
    return ImpactResult(
        cc=cc,
        omegas=dict(omegas),
        subset=pcdc_subset(omegas),
        subflows=None if subflows is None else list(subflows),
    )


def impact_from_series(
    cc: str,
    tp0: Sequence[float],
    excluded: Mapping[str, Sequence[float]],
    subflows: Sequence[str] | None = None,
) -> ImpactResult:
    """TP_0 and one TP_i series per subflow i into Omegas (Eq. 5) and SP* (Eq. 6)."""
    omegas = {name: impact_factor(tp0, tpi) for name, tpi in excluded.items()}
    return impact_from_omegas(cc, omegas, subflows)

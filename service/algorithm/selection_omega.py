"""Where the paper's leave-one-out Ω and the measured selection disagree on SP*.

Ω keeps a subflow unless removing it alone raises goodput (Eq. 6); the selection keeps a subflow
only when adding it measurably raised goodput. They disagree where harm is shared (SRL-HU: Ω
keeps all eight, the selection U-C alone) or where a subflow only helps beside others. The
answer names both sides, and, when Ω's SP* was itself measured as a subset (Ω keeping every
subflow is the all-subflows probe), how much more the selection's SP* delivered.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from .selection import SelectionResult, SelectionState, subset_label
from .selection_types import OmegaView
from .subset_stats import Gain, estimate, gain, pooled_spread


@dataclass(frozen=True)
class OmegaComparison:
    selection: tuple[str, ...]
    omega: tuple[str, ...]
    kept_by_selection_only: tuple[str, ...]  # Ω drops them (Ω < 0), the selection keeps them
    kept_by_omega_only: tuple[str, ...]  # Ω keeps them, the selection does not
    measured_gain: Gain | None  # the selection's SP* over Ω's, when both were measured

    @property
    def agree(self) -> bool:
        return not (self.kept_by_selection_only or self.kept_by_omega_only)

    def view(self, subflows: Sequence[str]) -> OmegaView:
        """What the answer keeps of it: Ω's subset, whether they agree, the sentence."""
        return OmegaView(subset=self.omega, agree=self.agree, statement=self.statement(subflows))

    def statement(self, subflows: Sequence[str]) -> str:
        """One line for the answer: `Ω keeps all subflows; the measured selection keeps U-C
        alone (drops K-C, ...), measured x18.1 [x0.01, x3.04e+04] against Ω's subset.`"""
        if self.agree:
            return f"Ω and the measured selection agree: {subset_label(self.selection, subflows)}."
        parts = [f"Ω keeps {subset_label(self.omega, subflows)}; the measured selection keeps "
                 f"{subset_label(self.selection, subflows)}"]
        changes = []
        if self.kept_by_omega_only:
            changes.append("drops " + ", ".join(self.kept_by_omega_only))
        if self.kept_by_selection_only:
            changes.append("adds " + ", ".join(self.kept_by_selection_only))
        parts[0] += f" ({'; '.join(changes)})"
        if self.measured_gain is not None:
            g = self.measured_gain
            parts.append(f"measured {_change(g.fraction)} [{_change(g.low)}, {_change(g.high)}] "
                         "against Ω's subset")
        return ", ".join(parts) + "."


def _change(fraction: float) -> str:
    """+12 %, −30 %; as a factor beyond 2x either way (x18.1, x0.01), where percent misleads."""
    ratio = 1 + fraction
    if ratio >= 2 or ratio <= 0.5:
        return f"x{ratio:.3g}"
    return f"{100 * fraction:+.0f} %".replace("-", "−")


def compare_with_omega(
    selected: SelectionResult, omega_subset: Collection[str], state: SelectionState | None = None
) -> OmegaComparison:
    """Ω's SP* (`ImpactResult.subset` or `ConfidentImpact.subset`, same CC) beside the
    selection's. Pass the selection's `state` to get the measured gain when Ω's subset has runs
    in it."""
    names = selected.subflows
    omega = frozenset(omega_subset)
    stray = sorted(omega - set(names))
    if stray:
        raise ValueError(f"omega_subset: {stray[0]} is not one of the subflows")
    if not omega:
        raise ValueError("omega_subset: empty")
    chosen = frozenset(selected.subset)
    measured = None
    if state is not None and omega != chosen:
        samples = state.samples
        if samples.get(omega) and samples.get(chosen):
            spread = pooled_spread(samples)
            measured = gain(estimate(omega, samples[omega], spread, state.confidence),
                            estimate(chosen, samples[chosen], spread, state.confidence))
    return OmegaComparison(
        selection=selected.subset,
        omega=tuple(n for n in names if n in omega),
        kept_by_selection_only=tuple(n for n in names if n in chosen and n not in omega),
        kept_by_omega_only=tuple(n for n in names if n in omega and n not in chosen),
        measured_gain=measured,
    )

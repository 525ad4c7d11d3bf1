"""What a phase is: asked with the campaign's context, it answers a probe to run, done (the next
phase's turn), failed (it failed the campaign), or enough (the campaign needs nothing more).

A phase does every piece of its work that needs no probe before it answers and is idempotent: a
step is done when a measurement with its key exists. The context reads the campaign's
measurements once per pass over the phases (`Context.measurements`): only the executor stores a
run, between turns, so nothing a phase does in a pass changes them.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Protocol

from sqlalchemy.orm import Session

from models import Campaign, Measurement

from ....algorithm.topology import TopologySpec
from ....settings import Settings
from ....state import CampaignState
from ....state.selected import selected_subsets
from ....store import campaigns as campaign_store
from ....store import inventory, measurements, results
from ....store.measurements import MeasurementKey
from ..plan import ProbeStep
from ..probing import Prober


@dataclass(frozen=True)
class PhaseVerdict:
    """A probe to run (`step`); or `failed` (the phase failed the campaign); or `enough` (nothing
    more to measure: later phases are skipped and the campaign finishes, `calibration.FINISH`);
    or none: done. `state`: the campaign's new state, as the phase decided it (None: unchanged);
    `calibration.next_step` saves it before it acts on the rest of the verdict. `committed`: the
    step finishes a unit of probes the budget covered in full when its first probe ran, so it
    runs without a budget check of its own (the expected cost may have risen since)."""

    step: ProbeStep | None = None
    failed: bool = False
    enough: bool = False
    state: CampaignState | None = None
    committed: bool = False


DONE = PhaseVerdict()
FAILED = PhaseVerdict(failed=True)
# not `FINISH`: that is what `calibration.next_step` then answers the executor (a `NextStep`)
ENOUGH = PhaseVerdict(enough=True)


def probe(step: ProbeStep, state: CampaignState | None = None, *,
          committed: bool = False) -> PhaseVerdict:
    return PhaseVerdict(step=step, state=state, committed=committed)


@dataclass
class Context:
    """One pass over the phases: the campaign row and what the phases share."""

    session: Session
    campaign: Campaign
    settings: Settings
    prober: Prober

    @cached_property
    def subflows(self) -> list[str]:
        return [sf.name for sf in self.campaign.topology.subflows]

    @cached_property
    def spec(self) -> TopologySpec:
        """The topology as the algorithm's validated spec, converted once for the pass."""
        return inventory.topology_spec(self.campaign.topology)

    @cached_property
    def measurements(self) -> list[Measurement]:
        """Every stored run of the campaign (ok or failed), oldest first, read once per pass."""
        return measurements.all_runs(self.session, campaign_id=self.campaign.id)

    def runs(self, *phases: str) -> list[Measurement]:
        """The stored runs (ok or failed) of `phases`, oldest first."""
        return [m for m in self.measurements if m.phase in phases]

    def ok_runs(self, phase: str) -> list[Measurement]:
        """The successful runs of `phase`, oldest first."""
        return [m for m in self.measurements if m.phase == phase and m.status == "ok"]

    @cached_property
    def _done(self) -> frozenset[MeasurementKey]:
        return frozenset(MeasurementKey.of(m) for m in self.measurements)

    def done(self) -> frozenset[MeasurementKey]:
        """The keys of every stored run: those steps are done (`ProbeStep.key`)."""
        return self._done

    def subsets(self) -> dict[str, list[str]]:
        """SP* per CC: the measured selection's where it ran (adaptive mode), else Ω's."""
        omega = {
            r.cc: r.subset
            for r in results.impact_results(self.session, campaign_id=self.campaign.id)
        }
        selected = selected_subsets(self.campaign)
        chosen = {**omega, **selected}
        # A CC left with neither (its selection measured nothing usable, and adaptive mode
        # measures Ω under the reference CC only) takes the reference's SP* (the selection's
        # first CC), else Ω's, rather than failing or running every subflow unexamined.
        fallback = next(iter(selected.values()), None) or next(iter(omega.values()), None)
        if fallback is not None:
            for cc in self.campaign.measured_ccs:
                chosen.setdefault(cc, list(fallback))
        return chosen

    def fail(self, why: str) -> PhaseVerdict:
        campaign_store.set_state(self.session, campaign_id=self.campaign.id, state="failed",
                                 error=why)
        return FAILED


class Phase(Protocol):
    name: str

    def advance(self, ctx: Context) -> PhaseVerdict: ...

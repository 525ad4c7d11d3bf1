"""Subflow selection by measured value (adaptive mode): SP* is the subset that measurably
delivers most, beside the paper's leave-one-out Ω.

Per CC, `algorithm.selection` asks for the subsets to probe (each subflow alone, then forward
selection, repeats only where they decide); this phase turns each into a probe (autotuned
buffers, like the impact phase) and feeds back every measured subset: the selection's own runs,
the impact phase's TP_0 (all subflows) and TP_i (all but one). The CC with the best TP_0 is the
reference; every other CC checks the reference's decisions on its own runs and shares its SP*
where they hold. The result (SP*, the path, standbys, Ω's disagreement) is kept in the
campaign's state (`CampaignState.selection`, a typed `Selection`), and `Context.subsets` gives
SP* to the sweep from then on.
A stream objective's selection runs the same rules on paced probes, weighing p99 frame delay
(`selection_stream`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from statistics import fmean

from models import NO_EXCLUSION, Campaign
from probes.vocabulary import FULLMESH, PCDC

from ....algorithm.capacity import LinkCapacity
from ....algorithm.objective import objective_of
from ....algorithm.selection import (
    Budget,
    SelectionResult,
    SelectionState,
    next_probes,
    result,
)
from ....algorithm.selection_omega import compare_with_omega
from ....algorithm.selection_stream import delay_view
from ....algorithm.subset_stats import Subset
from ....state import CampaignState, Selection, state_of
from ....state.selected import measured_selection, subset_key, subset_of_key
from ....store import results
from .. import budget
from ..plan import IMPACT_BS_MIB, ProbeStep
from . import fixed_buffer_check as check
from . import selection_stream as stream
from .base import DONE, Context, PhaseVerdict, probe

name = "selection"


def advance(ctx: Context) -> PhaseVerdict:
    campaign = ctx.campaign
    if measured_selection(campaign) is not None or len(ctx.subflows) < 2:
        return DONE  # decided already, or nothing to choose between
    objective = objective_of(campaign.objective)
    # the reference is the CC whose bulk TP_0 gave most, for a stream too: from its impact
    # probes only, since a paced all-subflows selection probe's goodput is the stream's rate (it
    # took the reference away from the CC being measured, and every CC ran its selection twice)
    bulk_runs = _runs(ctx, ("impact",) if objective.is_stream else ("impact", "selection"))
    order = _reference_first(campaign.active_ccs, bulk_runs, len(ctx.subflows))
    runs = stream.stream_runs(ctx) if objective.is_stream else bulk_runs
    done: dict[str, SelectionResult] = {}
    states: dict[str, SelectionState] = {}
    reference: SelectionResult | None = None
    # the stated rates leave out probes they decide; half of delta is what the additions they
    # leave out may cost together, and what an addition must bring: a subflow that adds less
    # costs buffer (its data waits for the others') for no answer-worthy gain (shared.yaml:
    # both subflows 1-5 % above one alone at autotuned buffers, and needing 6 x its buffer)
    rates = LinkCapacity.of(ctx.spec)
    rtts = {sf.name: sf.rtt_ms for sf in campaign.topology.subflows if sf.rtt_ms is not None}
    for cc in order:
        if objective.is_stream and reference is not None:
            done[cc] = stream.shared(reference, cc)  # no probes of its own (see `shared`)
            continue
        samples, failures = runs.get(cc, ({}, {}))
        settings = dict(cc=cc, reference=reference, budget=_budget(campaign),
                        negligible=campaign.delta / 2, min_gain=campaign.delta / 2, rtts_ms=rtts)
        if objective.is_stream:
            state = stream.state(ctx.subflows, samples, failures, objective, **settings)
        else:
            state = SelectionState(ctx.subflows, samples, failures, capacity=rates, **settings)
        wanted = next_probes(state)
        if wanted:
            return probe(_step(ctx, cc, wanted[0], samples, failures),
                         budget.asked(campaign, state_of(campaign), "selection", len(wanted)))
        done[cc] = result(state)
        states[cc] = state
        if reference is None and done[cc].estimate is not None:
            reference = done[cc]
    checked = {} if objective.is_stream else _fixed_buffer_checks(ctx, done)
    if isinstance(checked, PhaseVerdict):
        return checked
    return PhaseVerdict(state=replace(state_of(campaign), selection=_finished(
        ctx, done, states, checked)))


def _asked_one(ctx: Context) -> CampaignState:
    """The state with one more selection probe asked of the budget."""
    return budget.asked(ctx.campaign, state_of(ctx.campaign), "selection", 1)


def _fixed_buffer_checks(ctx: Context, done: dict[str, SelectionResult]):
    """A probe the fixed-buffer check still needs (`fixed_buffer_check`), or per CC the
    check's figures, SP* set back to its start in `done` where its additions did not pay."""
    bs = check.check_buffer(ctx.campaign.buffer_grid_mib)
    got = check.measured(ctx, bs)
    # who checks what, before any SP* falls back (a fallen-back reference shares nothing)
    plan = {cc: (pair, check.owner(cc, done)) for cc in done if (pair := check.pair(done[cc]))}
    min_gain = ctx.campaign.delta / 2
    for pair, by in plan.values():
        for subset in pair:
            if (by, tuple(sorted(subset))) not in got:
                return probe(check.step(ctx, by, subset, bs), _asked_one(ctx))
    for pair, by in plan.values():
        chosen, start = (got[(by, tuple(sorted(x)))] for x in pair)
        again = check.next_run(chosen, start, min_gain)
        if again is not None:
            subset, runs = (pair[0], chosen) if again == "subset" else (pair[1], start)
            return probe(check.step(ctx, by, subset, bs, run=len(runs) + 1), _asked_one(ctx))
    notes = {}
    for cc, (pair, by) in plan.items():
        chosen, start = (got[(by, tuple(sorted(x)))] for x in pair)
        pays = check.verdict(check.mean(chosen), check.mean(start), min_gain)
        notes[cc] = check.note(bs, by, chosen, start, "subset" if pays else "start")
        if not pays:
            done[cc] = check.fall_back(done[cc])
    return notes


def _reference_first(ccs: Sequence[str], runs, n_subflows: int) -> list[str]:
    """The CC whose all-subflows probe (TP_0) gave most first: the likely answer's CC is the one
    whose selection runs in full; the others check it."""
    def tp0(cc: str) -> float:
        samples = runs.get(cc, ({}, {}))[0]
        values = [v for subset, vs in samples.items() if len(subset) == n_subflows for v in vs]
        return fmean(values) if values else -1.0

    return sorted(ccs, key=lambda cc: (-tp0(cc), list(ccs).index(cc)))


def _runs(ctx: Context, phases: tuple[str, ...] = ("impact", "selection")
          ) -> dict[str, tuple[dict[Subset, list[float]], dict[Subset, int]]]:
    """Per CC the measured goodput per subset (selection runs, TP_0, TP_i, of `phases`) and the
    failed selection probes per subset."""
    names = ctx.subflows
    out: dict[str, tuple[dict[Subset, list[float]], dict[Subset, int]]] = {}
    rows = ctx.runs(*phases)
    for m in rows:
        if m.bs_mib != IMPACT_BS_MIB:
            continue  # the fixed-buffer check's probes (`fixed_buffer_check`): not autotuned
        samples, failures = out.setdefault(m.cc, ({}, {}))
        if m.phase == "selection":
            subset = frozenset(subset_of_key(m.excluded_subflow))
        elif m.excluded_subflow == NO_EXCLUSION:
            subset = frozenset(names)
        else:
            subset = frozenset(n for n in names if n != m.excluded_subflow)
        if not subset or not subset <= set(names):
            continue
        if m.status == "ok" and m.mean_goodput_mbps is not None:
            samples.setdefault(subset, []).append(m.mean_goodput_mbps)
        elif m.phase == "selection":
            failures[subset] = failures.get(subset, 0) + 1
    return out


def _budget(campaign: Campaign) -> Budget:
    """The probe-seconds the selection may still spend: what is left of the campaign's budget
    less the sweep's share (its estimate), or no limit without a budget."""
    left = budget.left_s(campaign)
    if left is None:
        return Budget()
    cost = budget.probe_cost_s(campaign)
    return Budget(probe_seconds=max(0.0, left - budget.sweep_reserve_s(campaign)),
                  seconds_per_probe=cost)


def _step(ctx: Context, cc: str, subset: Subset, samples, failures) -> ProbeStep:
    ordered = tuple(n for n in ctx.subflows if n in subset)
    run = len(samples.get(subset, ())) + failures.get(subset, 0) + 1
    everything = len(ordered) == len(ctx.subflows)
    return ProbeStep(
        "selection", FULLMESH if everything else PCDC, cc, IMPACT_BS_MIB, run,
        subset_key(ordered), None if everything else ordered,
    )


def _finished(ctx: Context, done: dict[str, SelectionResult], states, checks) -> Selection:
    """The finished selection as the state keeps it: per CC its result, with its fixed-buffer
    check and how it compares with Omega's subset (a stream's read as frame delay)."""
    impacts = {r.cc: r.subset for r in results.impact_results(ctx.session,
                                                                campaign_id=ctx.campaign.id)}
    objective = objective_of(ctx.campaign.objective)
    per_cc = {}
    for cc, res in done.items():
        omega = None
        if cc in impacts and res.estimate is not None:
            # a stream's runs are delay scores: Ω's subset against them is not a goodput gain
            omega = compare_with_omega(res, impacts[cc],
                                       None if objective.is_stream else states.get(cc)
                                       ).view(res.subflows)
        res = replace(res, buffer_check=checks.get(cc), omega=omega)
        per_cc[cc] = delay_view(res, objective.rate_mbps) if objective.is_stream else res
    return Selection(done=True, ccs=per_cc)

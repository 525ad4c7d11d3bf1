"""The buffer sweep of adaptive mode: the next probe from `algorithm.adaptive.decide` over what
was measured, the grid extended upwards while the best arm still climbs at its top; when the
decision is settled or the budget (or the grid plan's probe count) is spent: the fit. The settled
decision stored here is the campaign's answer at finish (`flows.answers.decided`)."""

from __future__ import annotations

import math
from dataclasses import replace

from models import NO_EXCLUSION, MeasurementPhase
from probes.vocabulary import FULLMESH, PCDC, PathManager

from ....algorithm import adaptive
from ....algorithm.alternative import Alternative
from ....algorithm.capacity import PAYLOAD_SHARE, LinkCapacity
from ....algorithm.sweep import plateau_extension
from ....algorithm.window_spread import combined_half_width, window_spread
from ....state import STOP_BUDGET, STOP_SETTLED, BulkSweepOutcome, DecidedPromise, state_of
from ....state.confidence_summary import confidence_statement
from ....state.selected import measured_selection, merged_into_fullmesh, sweep_arms
from .. import budget
from ..plan import ProbeStep
from ..timing import observed_rtts, step_timing
from . import autotune_sweep
from .answer_spread import spread_probe, variation_at, widened
from .base import Context, PhaseVerdict, probe
from .fitting import MAX_GRID_EXTENSIONS, buffer_samples, fit, grid_extensions, grow_grid

name = budget.SWEEP  # the phase is the budget's "sweep"; its probes MeasurementPhase.SWEEP
# The promise is never narrower than this share of OTP either way. Runs at a link's rate agree
# to 0.01 Mbit/s (harmful.yaml: PCDC on F-U read 18.80-18.83), and a promise drawn from them
# alone was +-0.01 wide, while fresh probes of the same configuration right after the campaign,
# 6 s long instead of 5, read up to 0.045 (0.24 %) off (unis-hin.yaml: 18.755 against 18.80).
PROMISE_FLOOR = 0.005


def advance(ctx: Context) -> PhaseVerdict:
    campaign = ctx.campaign
    arms = sweep_arms(campaign)
    runs = buffer_samples(ctx)
    samples, tried = runs.samples, runs.tried
    cap = budget.adaptive_sweep_cap(campaign)
    reserve_s = budget.autotune_reserve_s(campaign) if autotune_sweep.measured_here(ctx) else 0.0
    decision = None
    links = _links_ceiling(ctx, FULLMESH, campaign.ccs[0]) if campaign.ccs else None
    while True:
        spent = (state_of(campaign).budget.exhausted or sum(tried.values()) >= cap
                 or (reserve_s > 0 and not budget.affords(campaign, reserve_s=reserve_s)))
        # Where a measured point already carries (1 - delta) of every link's rate, a larger
        # buffer cannot show a T* it is not within delta of: the grid grows only if the answer
        # on this grid is not such a point (harmful.yaml: PCDC on F-U read 18.8 of the links'
        # 19.7 Mbit/s from 0.1 MiB, and the grid grew to 4.39 MiB for FullMesh's 15 s probes).
        # Growth can only raise T*, so it never makes OBS smaller: deferring it costs nothing.
        deferred = adaptive.within_links(samples, links, campaign.delta, runs.spread_samples)
        if not spent and not deferred and _climb(ctx, arms, samples):
            continue  # the grid grew: the new top first
        decision = adaptive.decide(arms, campaign.buffer_grid_mib, samples, campaign.delta,
                                   noise_samples=runs.spread_samples,
                                   extended=grid_extensions(ctx))
        if (decision.settled and not spent and deferred
                and not _answer_within_links(decision, links, campaign.delta)
                and _climb(ctx, arms, samples)):
            continue
        # not settled from one phase of a path that moves: the answer's runs spread in time
        held = None if spent else spread_probe(runs, decision, campaign.delta)
        if held is not None:
            return probe(_step(ctx, held, tried),
                         budget.asked(campaign, state_of(campaign), budget.SWEEP, 1))
        if decision.settled or spent:
            break
        return probe(_cheapest(ctx, [_step(ctx, wanted, tried) for wanted in decision.probes]),
                     budget.asked(campaign, state_of(campaign), budget.SWEEP,
                                  len(decision.probes) + 1))
    stop = STOP_SETTLED if decision is not None and decision.settled else STOP_BUDGET
    # The answer is read off the measured means; the fit only draws the curves, so an arm with
    # fewer than three measured buffers leaves the campaign answerable. First, as the fit
    # records its unfitted arms in the campaign's state, which the state returned carries.
    fit(ctx, required=False)
    state = replace(state_of(campaign), sweep_decision=BulkSweepOutcome(
        decision=adaptive.BulkDecision() if decision is None else decision, stop=stop,
        **({} if decision is None else _promised(ctx, decision, runs)),
        # PCDC on every subflow is FullMesh's probe: measured once, as FullMesh (`sweep_arms`)
        pcdc_as_fullmesh=tuple(sorted(merged_into_fullmesh(campaign))),
    ))
    return PhaseVerdict(state=budget.settled(campaign, state))


def _step(ctx: Context, wanted: adaptive.WantedProbe, tried) -> ProbeStep:
    """The buffer probe of `wanted`: PCDC on the CC's selected subflows, its next run."""
    subsets = ctx.subsets()
    allowed = None
    if wanted.pm == PCDC and set(subsets[wanted.cc]) != set(ctx.subflows):
        allowed = tuple(subsets[wanted.cc])
    run = tried.get((wanted.pm, wanted.cc, wanted.bs_mib), 0) + 1
    return ProbeStep(MeasurementPhase.SWEEP, wanted.pm, wanted.cc, wanted.bs_mib, run,
                     NO_EXCLUSION, allowed)


def _cheapest(ctx: Context, steps: list[ProbeStep]) -> ProbeStep:
    """The shortest of the probes the decision wants (by the timing rule; the first of equals):
    every one is asked again after each probe, and an arm settled on short paths bounds how
    far the others are searched (`adaptive.decide`)."""
    observed = observed_rtts(ctx.session, ctx.campaign)  # one query for every candidate
    return min(steps, key=lambda step: step_timing(ctx.session, ctx.campaign, step,
                                                   observed).duration_s)


def _climb(ctx: Context, arms, samples) -> bool:
    """The grid extended (True) when the leader at the top still climbs there by more than
    delta (`sweep.plateau_extension`), up to `MAX_GRID_EXTENSIONS` points."""
    campaign = ctx.campaign
    extended = grid_extensions(ctx)
    means = adaptive.top_pair_means(arms, campaign.buffer_grid_mib, samples, campaign.delta,
                                    extended)
    if means is None or len(extended) >= MAX_GRID_EXTENSIONS:
        return False
    (leader, at), = means.items()
    ceiling = _links_ceiling(ctx, *leader)
    if max(at.values()) >= (1 - campaign.delta / 2) * ceiling:
        # The leader reads its links' rate (stored means never exceed it: `capped_mean`), so
        # no larger buffer can raise T* by more than delta/2 (thin-sender.yaml: FullMesh/bbr
        # read 22.0 of 22.1 Mbit/s at 7.4 MiB, and the grid grew to 20.7 MiB for nothing).
        return False
    more = plateau_extension(campaign.buffer_grid_mib, means, campaign.delta)
    if more is None:
        return False
    grow_grid(ctx, more)
    budget.replan(campaign)
    return True


def _answer_within_links(decision: adaptive.BulkDecision, links: float | None,
                         delta: float) -> bool:
    """The settled answer's lower bound reaches (1 - delta) of every link's rate together."""
    if links is None or decision.otp_mbps is None:
        return False
    low = decision.otp_mbps - (decision.otp_half_width_mbps or 0.0)
    return low >= (1 - delta) * links


def _links_ceiling(ctx: Context, pm: PathManager | None, cc: str | None) -> float | None:
    """The most a stored mean of an arm can read: what its subflows' access links carry, as
    goodput (None without an arm: before a decision)."""
    if pm is None or cc is None:
        return None
    rates = LinkCapacity.of(ctx.spec)
    subset = ctx.subsets().get(cc) if pm == PCDC else None
    return rates.max_mbps(subset or rates.ends) * PAYLOAD_SHARE


def _promised(ctx: Context, decision: adaptive.BulkDecision, runs) -> dict:
    """What the settled decision promises for the answer (`BulkSweepOutcome`'s own fields):
    the interval fresh probes should land in, what is settled of the subset, the one sentence a
    user reads first, the path's variation and the spread inside the probes at OBS. `runs`:
    the buffer runs (`fitting.BufferRuns`), their series for the spread inside the probes at
    OBS; where the campaign's runs show the path moving over time (`variation`), the interval
    covers one fresh probe's range and the statement says by how much the path moves."""
    series = runs.series
    selection = measured_selection(ctx.campaign)
    subset = (None if selection is None or decision.opm != PCDC
              else selection.ccs.get(decision.occ or ""))
    subset_settled = None if subset is None else subset.settled
    reach = [Alternative(f"subflows {a.label}", a.relative or 0.0, ("subset",))
             for a in subset.within_reach] if subset is not None else []
    # The promise is where one fresh probe of the answer should land (the mean's own interval
    # is narrower than the spread of new runs); the mean's interval where no spread is known.
    spread = window_spread(series.get((decision.opm, decision.occ, decision.obs_mib), []))
    if spread is not None:
        spread = spread.at(decision.confidence)
    within = None if spread is None else spread.half_width_mbps
    run_to_run = decision.prediction_half_width(fresh_runs=1)
    predicted = combined_half_width(run_to_run, within) if run_to_run is not None else None
    interval = decision.otp_interval()
    if predicted is not None and math.isfinite(predicted) and decision.otp_mbps is not None:
        predicted = max(predicted, PROMISE_FLOOR * decision.otp_mbps)
        interval = (decision.otp_mbps - predicted, decision.otp_mbps + predicted)
    variation = variation_at(runs, decision.opm, decision.occ, decision.obs_mib,
                             ctx.campaign.delta)
    interval = widened(interval, variation, decision.otp_mbps, decision.otp_runs,
                       decision.confidence)
    ceiling = _links_ceiling(ctx, decision.opm, decision.occ)
    if interval is not None and ceiling is not None and decision.otp_mbps <= ceiling * (1 + 1e-9):
        # no probe's mean is stored above what the links carry (`capacity.capped_mean`): on
        # uit-haw.yaml a promise of 0.22-1.47 Mbit/s stood beside 0.845 for both uplinks
        interval = (interval[0], min(interval[1], ceiling))
    statement = None
    # A campaign stopped by its budget still states what it measured, and says it stopped.
    if interval is not None and all(map(math.isfinite, interval)):
        statement = confidence_statement(
            *interval, decision.confidence, pm_settled=decision.pm_settled,
            cc_settled=decision.cc_settled, subset_settled=subset_settled,
            alternatives=[*decision.alternatives, *reach], budget_spent=not decision.settled,
            variation=variation if variation.varies else None)
    return {
        "promise": None if interval is None else DecidedPromise(
            low_mbps=max(0.0, interval[0]), high_mbps=interval[1],
            of=("one fresh probe" if predicted is not None or variation.varies
                else "the mean"),
        ),
        "subset_settled": subset_settled,
        "statement": statement,
        "variation": variation,
        "spread_at_obs": spread,
    }

"""A calibrated answer: the campaign's answer with what a recommendation says beside OPM / OCC /
OBS / OTP -- the subflows it runs, Eq. 1 over them, per-arm details, the provenance and the
quality flags. The answer is the adaptive sweep's decision where the question is the one it
decided (`decided`), else the campaign's solution (`solve_campaign`: grid mode, what-ifs)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy.orm import Session

from models import Campaign, MeasurementPhase
from probes.vocabulary import FULLMESH, PathManager

from ...algorithm import autotune_ceiling
from ...algorithm.selection import SelectionResult
from ...algorithm.solver import SolverAnswer
from ...state import state_of
from ...state.selected import measured_selection
from ...store import campaigns as campaign_store
from ...store import measurements, results
from .answer import ArmLine, Eq1, Outputs, SubsetChoice, TStar
from .campaign_answer import solve_campaign
from .decided import (
    DECIDED,
    SOLVED,
    decided_question,
    decided_solution,
    differs_from_solve,
    promise_if_same,
    promise_of,
)
from .eq1 import traditional_eq1
from .snapshot import TopologySnapshot


@dataclass(frozen=True)
class CalibratedAnswer:
    """A calibrated answer without what depends on the clock (data age, stale flag)."""

    error: str | None = None
    solution: SolverAnswer | None = None
    outputs: Outputs = field(default_factory=Outputs)
    eq1: Eq1 | None = None
    provenance: dict = field(default_factory=dict)
    flags_before_stale: tuple[str, ...] = ()
    flags_after_stale: tuple[str, ...] = ()
    newest_at: datetime | None = None
    bs_min_mib: float | None = None  # the bounds it was solved on (within the measured range)
    bs_max_mib: float | None = None


def calibrated_answer(
    session: Session,
    snap: TopologySnapshot,
    campaign: Campaign,
    delta: float,
    bs_min: float | None,
    bs_max: float | None,
) -> CalibratedAnswer:
    solved = solve_campaign(session, campaign, delta, bs_min, bs_max)
    if solved.solution is None:
        return CalibratedAnswer(
            error=f"calibration_unusable: campaign {campaign.id}: {solved.error}",
            flags_after_stale=tuple(campaign_store.flags(campaign)),
        )
    solution, fits = solved.solution, solved.fits
    flags = [*solved.flags, *solution.flags]
    decision = decided_question(campaign, delta, bs_min, bs_max)
    origin: dict = {"answer_from": SOLVED}
    if decision is not None:
        # The sweep decided this question: its decision is the answer (the solve above only
        # reads the per-arm table off the measured means).
        origin = {"answer_from": DECIDED}
        otherwise = differs_from_solve(solution, decision)
        if otherwise is not None:  # kept for the record, never the answer
            origin["solve_reads"] = otherwise
        solution = decided_solution(solution, decision)
    impacts = {r.cc: r for r in results.impact_results(session, campaign_id=campaign.id)}
    selection = _selection_of(campaign, solution.occ)
    used, standby = answer_subflows(session, snap, campaign, solution.opm, solution.occ, flags)
    unsettled = (state_of(campaign).unsettled_omegas or {}).get(solution.occ, [])
    # Omega decides SP* only in the paper's procedure: there its doubts are the answer's.
    if unsettled and campaign.mode != "adaptive":
        flags.append("omega_unsettled:" + ",".join(unsettled))
    if selection is not None and solution.opm != FULLMESH and not selection.settled:
        flags.append(f"selection_unsettled:{solution.occ}")
    summary = measurements.summarize(session, campaign_id=campaign.id)
    eq1 = traditional_eq1(snap, used, summary, solution.obs_mib)
    if not eq1.available:
        flags.append("eq1_rtt_unknown")
    # An adaptive answer is read off measured buffers: the regression's gate does not decide it.
    after_stale = [] if campaign.mode == "adaptive" else [
        f"quality_gate_failed:{rec.pm}" for rec in fits if not rec.gate_passed]
    # What the campaign could not measure (failed probes, dropped CCs, ...) goes with every answer.
    after_stale.extend(campaign_store.flags(campaign))
    outputs = _outputs(solution, used, standby, _model_reasons(fits))
    outputs.unsettled_omegas = list(unsettled)
    outputs.promise = (promise_of(decision) if decision is not None
                       else promise_if_same(campaign, solution))
    outputs.subset_choice = _subset_choice(solution, selection, impacts)
    _with_autotune(outputs, session, campaign, solution.opm, solution.occ, delta)
    return CalibratedAnswer(
        solution=solution,
        outputs=outputs,
        eq1=eq1,
        provenance={**_provenance(campaign, fits, summary), **origin},
        flags_before_stale=tuple(flags),
        flags_after_stale=tuple(after_stale),
        newest_at=summary.newest_at or campaign.finished_at,
        bs_min_mib=solved.lo,
        bs_max_mib=solved.hi,
    )


def answer_subflows(session: Session, snap: TopologySnapshot, campaign: Campaign, opm: PathManager,
                    occ: str, flags: list[str]) -> tuple[list[str], list[str]]:
    """The subflows an answer of `campaign` for (OPM, OCC) states -- the ones carrying data and,
    for PCDC, the standbys -- which is what `mpcoa apply` installs. Every answer of a campaign
    (bulk or stream) states them through here, so they are the subflows its PCDC arm was probed
    on: the measured selection's SP* where it ran, else Ω's (`phases.base.Context.subsets`).
    FullMesh runs every subflow; a PCDC answer with no SP* known runs every subflow, flagged."""
    names = snap.spec.subflow_names()
    if opm == FULLMESH:
        return names, []
    selection = _selection_of(campaign, occ)
    if selection is not None and selection.usable:
        # standbys best alone first, as the selection ordered them
        return ([n for n in selection.subset if n in names],
                [n for n in selection.standby_subflows if n in names])
    impact = next((r for r in results.impact_results(session, campaign_id=campaign.id)
                   if r.cc == occ), None)
    if impact is None:
        flags.append("pcdc_subset_unknown")
        return names, []
    # standbys best Ω first
    return [n for n in impact.subset if n in names], list(impact.standby)


def _selection_of(campaign: Campaign, occ: str | None) -> SelectionResult | None:
    selection = measured_selection(campaign)
    return None if selection is None else selection.of(occ)


def _subset_choice(solution: SolverAnswer, selection: SelectionResult | None,
                   impacts) -> SubsetChoice | None:
    if solution.opm == FULLMESH or solution.occ is None:
        return None
    impact = impacts.get(solution.occ)
    omega = None if impact is None else list(impact.subset)
    if selection is None:
        return None if omega is None else SubsetChoice(method="omega", subset=omega,
                                                         omega_subset=omega, omega_agrees=True)
    view = selection.omega
    return SubsetChoice(
        method="measured selection", subset=list(selection.subset),
        settled=selection.settled, shared_from=selection.shared_from,
        path=selection.path_dicts(), omega_subset=omega if view is None else list(view.subset),
        omega_agrees=None if view is None else view.agree,
        omega_statement=None if view is None else view.statement,
    )


def stream_subset_choice(campaign: Campaign, opm: PathManager, occ: str) -> SubsetChoice | None:
    """How a stream answer's PCDC subflows were chosen: the selection by p99 frame delay
    (`phases.selection_stream`), its path with each step's p99; None for FullMesh or without
    a selection (then Ω's SP*, which `answer_subflows` states)."""
    selection = _selection_of(campaign, occ)
    if opm == FULLMESH or selection is None or not selection.usable:
        return None
    view = selection.omega
    return SubsetChoice(
        method="measured selection by p99 frame delay", subset=list(selection.subset),
        settled=selection.settled, shared_from=selection.shared_from,
        path=selection.path_dicts(), omega_subset=None if view is None else list(view.subset),
        omega_agrees=None if view is None else view.agree,
        omega_statement=None if view is None else view.statement, why=selection.why,
    )


def _model_reasons(fits) -> dict[tuple[str, str], str]:
    """(PM, CC) -> which model the arm's curve is and why (from the stored per-arm fits)."""
    return {
        (rec.pm, arm["cc"]): f"{arm.get('model')}: {arm.get('reason')}"
        for rec in fits
        for arm in (rec.arms or [])
    }


def _outputs(solution: SolverAnswer, used: list[str], standby: list[str], reasons) -> Outputs:
    return Outputs(
        t_star=TStar(
            tp_mbps=solution.tp_max_mbps,
            bs_mib=solution.tp_max_bs_mib,
            pm=solution.tp_max_pm,
            cc=solution.tp_max_cc,
        ),
        target_mbps=solution.target_mbps,
        arms=[
            ArmLine(
                pm=a.pm,
                cc=a.cc,
                peak_bs_mib=a.peak_bs_mib,
                peak_tp_mbps=a.peak_tp_mbps,
                obs_mib=a.obs_mib,
                tp_at_obs_mbps=a.tp_at_obs_mbps,
                same_as_fullmesh=a.same_as_fullmesh,
                kind=a.kind,
                model_reason=reasons.get((a.pm, a.cc)),
                measured_obs_mib=a.measured_obs_mib,
                measured_max_mbps=a.measured_max_mbps,
            )
            for a in solution.arms
        ],
        subflows_used=used,
        standby_subflows=standby,
        otp_fitted_mbps=solution.otp_fitted_mbps,
        measured_obs_mib=solution.measured_obs_mib,
    )


def _with_autotune(outputs: Outputs, session: Session, campaign: Campaign, opm: str,
                   occ: str | None, delta: float) -> None:
    """The autotuning ceiling off the campaign's autotune probes of the answer's arm (each
    probe's bs_mib is the ceiling it ran under), when it ran any."""
    runs: dict[float, list[float]] = {}
    for m in measurements.ok_measurements(session, campaign_id=campaign.id,
                                          phase=MeasurementPhase.AUTOTUNE):
        if m.pm == opm and (occ is None or m.cc == occ) and m.mean_goodput_mbps is not None:
            runs.setdefault(float(m.bs_mib), []).append(float(m.mean_goodput_mbps))
    got = autotune_ceiling.decide(runs, delta) if runs else None
    if got is None:
        return
    outputs.autotune_max_mib = got.autotune_max_mib
    outputs.autotune_otp_mbps = got.otp_mbps
    outputs.autotune_interval_mbps = list(got.interval_mbps)
    outputs.notes.append(f"autotune: {got.autotune_max_mib:g} MiB ceiling, "
                         f"{got.otp_mbps:.3g} Mbit/s against the best autotuned "
                         f"{got.best_mbps:.3g} at {got.best_ceiling_mib:g} MiB")


def _provenance(campaign: Campaign, fits, summary: measurements.MeasurementSummary) -> dict:
    return {
        "source": "calibrated",
        "campaign_id": campaign.id,
        "campaign_finished_at": _iso(campaign.finished_at),
        "model_kind": campaign.model_kind,
        "fit_ids": [rec.id for rec in fits],
        "fits": [
            {
                "id": rec.id,
                "pm": rec.pm,
                "n": rec.n,
                "r2": rec.r2,
                "adj_r2": rec.adj_r2,
                "buffer_p_value": rec.buffer_p_value,
                "gate_passed": rec.gate_passed,
            }
            for rec in fits
        ],
        "measurement_count": summary.measurement_count,
        "buffer_measurement_count": summary.buffer_measurement_count,
        "run_count": summary.run_count,
        "oldest_measurement_at": _iso(summary.oldest_at),
        "newest_measurement_at": _iso(summary.newest_at),
        "data_age_s": None,
        "warnings": [f"{rec.pm}: {w}" for rec in fits for w in rec.warnings],
        # What the campaign decided and met on the way (dropped CCs, failed probes, ...).
        "campaign_notes": campaign_store.report(campaign),
    }


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None

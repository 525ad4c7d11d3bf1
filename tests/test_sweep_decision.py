"""The sweep's outcome in a campaign's state (service/state/sweep_outcome.py): every form ever
stored reads as the algorithm's own decision inside the typed outcome (the run-state column, the
notes of the layout before it, bundle versions 1 and 2, a stream sweep's), the answer and the
flags read it by attribute, and it is written back exactly as it was read."""

from __future__ import annotations

import dataclasses
import json

import pytest

from models import Campaign
from service.algorithm.adaptive import BulkDecision
from service.algorithm.adaptive.variation import Variation
from service.algorithm.alternative import Alternative
from service.algorithm.stream_choice import StreamDecision
from service.algorithm.window_spread import WindowSpread
from service.flows.answers.decided import decided_stream, promise_of, sweep_decision
from service.flows.takeaways import bundle_schema_v1, bundle_schema_v2
from service.state import (
    BulkSweepOutcome,
    CampaignState,
    StreamSweepOutcome,
    read_sweep_decision,
    state_of,
)
from service.store.campaign_report import flags

# what `phases.adaptive_sweep` stored in a database before the decision was typed
BULK = {
    "stop": "settled", "opm": "PCDC", "occ": "cubic", "obs_mib": 0.2, "otp_mbps": 9.9,
    "otp_half_width_mbps": 0.05, "t_star_mbps": 10.05, "target_mbps": 9.35,
    "survivors": ["PCDC/cubic", "FullMesh/cubic"], "eliminated": ["FullMesh/reno"],
    "otp_runs": 3, "t_star_half_width_mbps": 0.04, "t_star_runs": 4, "t_star_held": True,
    "pm_settled": False, "cc_settled": True,
    "promise": {"low_mbps": 9.8, "high_mbps": 10.0, "of": "one fresh probe"},
    "alternatives": [{"label": "FullMesh/cubic", "relative": -0.01, "differs_in": ["pm"]}],
    "subset_settled": True, "statement": "Expect 9.8-10.0 Mbit/s ...",
    "variation": {"varies": True, "runs": 3, "span_s": 61.2, "p10_mbps": 9.1, "p90_mbps": 10.4,
                  "spread_mbps": 1.3, "run_low_mbps": 9.7, "run_high_mbps": 10.1,
                  "between_rel_sd": 0.02, "between_dof": 2, "expected_rel_sd": 0.01},
    "spread_at_obs": {"interval_sd_mbps": 0.2, "intervals_per_run": 5.0, "runs": 3,
                      "unsteady_runs": 1, "half_width_mbps": 0.1},
    "pcdc_as_fullmesh": [], "confidence": 0.9,
}
# an early sweep's: no variation, spread, confidence or PCDC note yet
EARLY = {"stop": "settled", "opm": "FullMesh", "occ": "reno", "obs_mib": 0.4, "otp_mbps": 8.0,
         "promise": {"low_mbps": 7.5, "high_mbps": 8.5, "of": "the mean"}}
# what `phases.stream_sweep` stored
STREAM = {
    "objective": "stream", "stop": "budget", "settled": False, "opm": "FullMesh", "occ": "reno",
    "obs_mib": 0.06, "p99_ms": 30.6, "p99_half_width_ms": None, "goodput_mbps": 4.0,
    "lost_fraction": 0.0, "best_p99_ms": 29.0, "best_bs_mib": 0.1, "limit_p99_ms": 31.9,
    "skipped_edge_mib": 0.04, "carrying": ["FullMesh/reno"],
    "not_carrying": {"FullMesh/cubic": "stalled"},
    "alternatives": [{"label": "FullMesh/cubic", "relative": 0.02, "differs_in": ["cc"]}],
    "pm_settled": True, "cc_settled": False, "confidence": 0.9, "pcdc_as_fullmesh": ["reno"],
}


def _stored(value):
    return json.loads(json.dumps(value))


def _campaign(decision, mode: str = "adaptive") -> Campaign:
    return Campaign(mode=mode, delta=0.07, buffer_grid_mib=[0.1, 0.2, 0.4],
                    run_state_json={"sweep_decision": _stored(decision)})


def test_a_stored_bulk_decision_reads_typed_and_writes_back_unchanged():
    c = _campaign(BULK)
    outcome = state_of(c).sweep_decision
    assert isinstance(outcome, BulkSweepOutcome)
    decision = outcome.decision  # the algorithm's own result, read back
    assert isinstance(decision, BulkDecision) and decision.settled
    assert (decision.opm, decision.occ, decision.obs_mib, decision.t_star_runs) == (
        "PCDC", "cubic", 0.2, 4)
    assert isinstance(decision.alternatives[0], Alternative)
    assert outcome.promise.of == "one fresh probe" and decision.alternatives[0].differs_in == (
        "pm",)
    assert isinstance(outcome.variation, Variation)
    assert outcome.variation.spread_mbps == pytest.approx(1.3)
    assert isinstance(outcome.spread_at_obs, WindowSpread)
    assert outcome.spread_at_obs.half_width_mbps == 0.1
    assert sweep_decision(c) is outcome
    promise = promise_of(outcome)
    assert (promise.low_mbps, promise.high_mbps, promise.confidence) == (9.8, 10.0, 0.9)
    assert promise.variation == BULK["variation"]
    assert {"adaptive:settled", "unsteady_rate_at_obs", "path_varies"} <= set(flags(c))
    assert outcome.to_dict() == BULK
    assert list(outcome.to_dict()) == list(BULK)  # the stored form's key order too
    assert state_of(c).to_dict()["sweep_decision"] == BULK
    assert CampaignState.from_dict(_stored(state_of(c).to_dict())) == state_of(c)


def test_an_early_form_reads_with_defaults_and_writes_back_without_them():
    c = _campaign(EARLY)
    outcome = state_of(c).sweep_decision
    assert outcome.variation is None and outcome.spread_at_obs is None
    # a key the form lacks takes the algorithm's default (every sweep decided at 90 %)
    assert outcome.decision.confidence == 0.9 and outcome.pcdc_as_fullmesh == ()
    assert outcome.decision.t_star_runs == 0 and outcome.decision.survivors == ()
    assert sweep_decision(c) is outcome and promise_of(outcome).of == "the mean"
    got = flags(c)
    assert "adaptive:settled" in got
    assert "path_varies" not in got and "unsteady_rate_at_obs" not in got
    assert outcome.to_dict() == EARLY


def test_the_notes_before_the_state_read_the_decision_and_show_it_as_it_was():
    notes = {"adaptive": _stored(BULK), "grid_extended": [0.8]}
    state = CampaignState.from_legacy({"probes_total": 5}, notes)
    assert isinstance(state.sweep_decision, BulkSweepOutcome)
    assert state.sweep_decision.decision.t_star_held is True
    assert state.legacy_notes()["adaptive"] == BULK


def test_bundle_versions_1_and_2_read_their_decisions():
    # version 1: the decision is the notes' "adaptive", checked by `AdaptiveNote` (only "stop"
    # is required; other keys pass as free-form JSON)
    v1 = bundle_schema_v1.Notes.model_validate({"adaptive": {**EARLY, "later_key": [1]}})
    state = CampaignState.from_legacy({}, v1.model_dump(exclude_unset=True))
    assert state.sweep_decision.decision.opm == "FullMesh"
    assert state.sweep_decision.decision.other == {"later_key": [1]}
    assert state.legacy_notes()["adaptive"] == {**EARLY, "later_key": [1]}
    # version 2: the run state's "sweep_decision", a bulk or a stream sweep's
    for form in (BULK, STREAM, {"stop": "budget"}):
        v2 = bundle_schema_v2.RunState.model_validate({"sweep_decision": _stored(form)})
        read = CampaignState.from_dict(v2.model_dump(exclude_unset=True)).sweep_decision
        assert read.to_dict() == form


def test_a_stream_decision_reads_as_the_stream_answer():
    c = _campaign(STREAM)
    stored = state_of(c).sweep_decision
    assert isinstance(stored, StreamSweepOutcome) and stored.stop == "budget"
    assert sweep_decision(c) is None  # not a bulk answer
    decision = decided_stream(c)
    assert isinstance(decision, StreamDecision) and decision is stored.decision
    assert (decision.opm, decision.occ, decision.obs_mib, decision.p99_ms) == (
        "FullMesh", "reno", 0.06, 30.6)
    assert decision.not_carrying == {"FullMesh/cubic": "stalled"}
    assert decision.alternatives[0].differs_in == ("cc",) and not decision.settled
    assert flags(c) == ["adaptive:budget"]
    assert stored.to_dict() == STREAM


def test_odd_values_never_fail_a_read_and_are_kept_as_they_were():
    odd = {"stop": "settled", "opm": "PCDC", "obs_mib": "big", "variation": [1],
           "spread_at_obs": {"unsteady_runs": "many"}, "alternatives": 3,
           "promise": {"low_mbps": 1.0, "high_mbps": 2.0, "of": "the mean"}}
    c = _campaign(odd)
    outcome = state_of(c).sweep_decision
    assert outcome.decision.obs_mib is None and outcome.variation is None
    assert outcome.decision.alternatives == () and not outcome.unsteady_at_obs
    assert sweep_decision(c) is None  # no buffer decided: no answer from it
    assert flags(c) == ["adaptive:settled"]
    assert outcome.to_dict() == odd
    assert read_sweep_decision(None) is None


def test_the_stored_results_are_the_algorithms_own_and_frozen():
    outcome = state_of(_campaign(BULK)).sweep_decision
    for value in (outcome, outcome.decision, outcome.decision.alternatives[0],
                  outcome.variation, outcome.spread_at_obs):
        with pytest.raises(dataclasses.FrozenInstanceError):
            value.other = {}  # type: ignore[misc]
    stream = state_of(_campaign(STREAM)).sweep_decision.decision
    assert isinstance(stream.carrying, tuple) and isinstance(stream.alternatives, tuple)
    with pytest.raises(dataclasses.FrozenInstanceError):
        stream.settled = True  # type: ignore[misc]


def test_a_budget_stop_without_a_configuration_is_no_answer():
    c = _campaign({"stop": "budget", "opm": None})
    assert sweep_decision(c) is None and flags(c) == ["adaptive:budget"]
    assert sweep_decision(_campaign(BULK, mode="grid")) is None

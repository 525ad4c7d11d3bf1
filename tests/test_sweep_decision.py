"""The sweep's decision in a campaign's state (models/sweep_decision.py): every form ever stored
reads as the typed decision (the run-state column, the notes of the layout before it, bundle
versions 1 and 2, a stream sweep's), the answer and the flags read it by attribute, and it is
written back exactly as it was read."""

from __future__ import annotations

import json

from models import (
    BulkSweepDecision,
    Campaign,
    CampaignState,
    StreamSweepDecision,
    read_sweep_decision,
)
from service.flows.answers.decided import decided_stream, promise_of, sweep_decision
from service.flows.takeaways import bundle_schema_v1, bundle_schema_v2
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
                    run_state=CampaignState.from_dict({"sweep_decision": _stored(decision)}))


def test_a_stored_bulk_decision_reads_typed_and_writes_back_unchanged():
    c = _campaign(BULK)
    decision = c.run_state.sweep_decision
    assert isinstance(decision, BulkSweepDecision)
    assert (decision.opm, decision.occ, decision.obs_mib, decision.t_star_runs) == (
        "PCDC", "cubic", 0.2, 4)
    assert decision.promise.of == "one fresh probe" and decision.alternatives[0].differs_in == (
        "pm",)
    assert sweep_decision(c) is decision
    promise = promise_of(decision)
    assert (promise.low_mbps, promise.high_mbps, promise.confidence) == (9.8, 10.0, 0.9)
    assert promise.variation == BULK["variation"]
    assert {"adaptive:settled", "unsteady_rate_at_obs", "path_varies"} <= set(flags(c))
    assert decision.to_dict() == BULK
    assert c.run_state.to_dict()["sweep_decision"] == BULK
    assert CampaignState.from_dict(_stored(c.run_state.to_dict())) == c.run_state


def test_an_early_form_reads_with_defaults_and_writes_back_without_them():
    c = _campaign(EARLY)
    decision = c.run_state.sweep_decision
    assert decision.variation is None and decision.spread_at_obs is None
    assert decision.confidence is None and decision.pcdc_as_fullmesh == ()
    assert sweep_decision(c) is decision and promise_of(decision).of == "the mean"
    got = flags(c)
    assert "adaptive:settled" in got
    assert "path_varies" not in got and "unsteady_rate_at_obs" not in got
    assert decision.to_dict() == EARLY


def test_the_notes_before_the_state_read_the_decision_and_show_it_as_it_was():
    notes = {"adaptive": _stored(BULK), "grid_extended": [0.8]}
    state = CampaignState.from_legacy({"probes_total": 5}, notes)
    assert isinstance(state.sweep_decision, BulkSweepDecision)
    assert state.sweep_decision.t_star_held is True
    assert state.legacy_notes()["adaptive"] == BULK


def test_bundle_versions_1_and_2_read_their_decisions():
    # version 1: the decision is the notes' "adaptive", checked by `AdaptiveNote` (only "stop"
    # is required; other keys pass as free-form JSON)
    v1 = bundle_schema_v1.Notes.model_validate({"adaptive": {**EARLY, "later_key": [1]}})
    state = CampaignState.from_legacy({}, v1.model_dump(exclude_unset=True))
    assert state.sweep_decision.opm == "FullMesh"
    assert state.sweep_decision.other == {"later_key": [1]}
    assert state.legacy_notes()["adaptive"] == {**EARLY, "later_key": [1]}
    # version 2: the run state's "sweep_decision", a bulk or a stream sweep's
    for form in (BULK, STREAM, {"stop": "budget"}):
        v2 = bundle_schema_v2.RunState.model_validate({"sweep_decision": _stored(form)})
        read = CampaignState.from_dict(v2.model_dump(exclude_unset=True)).sweep_decision
        assert read.to_dict() == form


def test_a_stream_decision_reads_as_the_stream_answer():
    c = _campaign(STREAM)
    stored = c.run_state.sweep_decision
    assert isinstance(stored, StreamSweepDecision) and stored.stop == "budget"
    assert sweep_decision(c) is None  # not a bulk answer
    decision = decided_stream(c)
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
    decision = c.run_state.sweep_decision
    assert decision.obs_mib is None and decision.variation is None
    assert decision.alternatives == () and not decision.unsteady_at_obs
    assert sweep_decision(c) is None  # no buffer decided: no answer from it
    assert flags(c) == ["adaptive:settled"]
    assert decision.to_dict() == odd
    assert read_sweep_decision(None) is None


def test_a_budget_stop_without_a_configuration_is_no_answer():
    c = _campaign({"stop": "budget", "opm": None})
    assert sweep_decision(c) is None and flags(c) == ["adaptive:budget"]
    assert sweep_decision(_campaign(BULK, mode="grid")) is None

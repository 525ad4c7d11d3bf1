"""The typed parts of a campaign's state (service/state/): the measured selection, kept as the
algorithm's own `SelectionResult` per CC, Ω's CCs and an import's origin: typed attributes, and
every stored form (old ones with fewer keys, a stream's with the delay view, keys a later version
adds, odd values an imported bundle may hold) written back exactly as it was read."""

from __future__ import annotations

import dataclasses
import json

import pytest

from service.algorithm.selection import SelectionResult, Step, next_probes, result
from service.algorithm.selection_stream import delay_view
from service.algorithm.selection_types import SelectionState
from service.algorithm.subset_stats import Gain, SubsetEstimate
from service.state import (
    CampaignState,
    ImportOrigin,
    OmegaCCs,
    Selection,
    Warm,
    WarmCheck,
)

STEP = {"decision": "add", "subset": ["A-X", "B-Y"], "label": "A-X+B-Y", "subflow": "B-Y",
        "rival": ["A-X"], "estimate": {"subset": ["A-X", "B-Y"], "runs": 2, "mean_mbps": 9.0,
                                       "low_mbps": 8.0, "high_mbps": 10.0},
        "gain": {"fraction": 0.3, "low": 0.1, "high": 0.5, "settled": True}, "settled": True}
ENTRY = {"subset": ["A-X", "B-Y"], "label": "A-X+B-Y", "usable": True, "complete": True,
         "settled": True, "reason": None, "shared_from": None, "estimate": STEP["estimate"],
         "path": [STEP], "standby_subflows": ["C-Z"],
         "within_reach": [{"label": "A-X", "relative": 0.9}], "contradicted": [],
         "bounded": [], "not_alone": ["C-Z"],
         "omega": {"subset": ["A-X"], "agree": False, "statement": "they differ"}}


def _stored(value):
    return json.loads(json.dumps(value))


def test_a_selection_reads_as_attributes_and_writes_back_what_it_read():
    stored = {"done": True, "ccs": {"cubic": ENTRY}}
    selection = Selection.from_dict(_stored(stored))
    entry = selection.ccs["cubic"]
    assert isinstance(entry, SelectionResult)  # the algorithm's own result, read back
    assert isinstance(entry.path[0], Step) and isinstance(entry.estimate, SubsetEstimate)
    assert entry.subset == ("A-X", "B-Y") and entry.usable and entry.omega.agree is False
    assert entry.path[0].estimate.mean_mbps == 9.0 and entry.path[0].gain.settled
    assert entry.buffer_check is None and entry.metric is None
    assert selection.usable("cubic") is entry and selection.of("reno") is None
    assert selection.to_dict() == stored
    assert entry.path_dicts() == [STEP]


def test_old_and_newer_forms_write_back_unchanged():
    old = {"done": True, "ccs": {"cubic": {"subset": ["A-X"], "usable": True}}}
    assert Selection.from_dict(_stored(old)).to_dict() == old
    later = {"done": True, "later": 1,
             "ccs": {"cubic": {**ENTRY, "new_key": [1], "path": [{**STEP, "x": 2}]}}}
    assert Selection.from_dict(_stored(later)).to_dict() == later
    state = CampaignState(selection=old)  # a seed's dict is read as the typed value
    assert isinstance(state.selection, Selection) and state.selection.ccs["cubic"].usable
    assert CampaignState.from_dict(_stored(state.to_dict())) == state


def test_a_stream_selection_keeps_its_delay_view():
    estimate = {**STEP["estimate"], "carries": True, "p99_ms": 60.0, "p99_low_ms": 55.0,
                "p99_high_ms": 70.0}
    step = {**STEP, "estimate": estimate, "gain": {**STEP["gain"], "p99_change": None}}
    stored = {**ENTRY, "estimate": estimate, "path": [step], "metric": "p99_frame_delay",
              "why": "paced probes"}
    entry = SelectionResult.from_dict(_stored(stored))
    assert entry.path[0].estimate.p99_ms == 60.0 and entry.path[0].gain.p99_change is None
    assert entry.to_dict() == stored
    # built anew (not read): the delay keys go with a stream's result only (`delay_view`)
    step = Step(decision="add", subset=("A-X",),
                estimate=SubsetEstimate(subset=frozenset({"A-X"}), runs=1, mean_mbps=3.0,
                                        low_mbps=0.0),
                gain=Gain(fraction=0.2, low=-1.0, high=None))
    bulk = SelectionResult(subflows=("A-X", "B-Y"), subset=("A-X",), path=(step,))
    fresh = delay_view(bulk, rate_mbps=4.0)
    assert "p99_change" in fresh.path_dicts()[0]["gain"]
    assert "p99_ms" in fresh.to_dict()["path"][0]["estimate"]
    assert fresh.to_dict()["metric"] == "p99_frame_delay"
    assert "p99_change" not in bulk.path_dicts()[0]["gain"]
    assert "metric" not in bulk.to_dict() and "buffer_check" not in bulk.to_dict()
    assert bulk.to_dict()["label"] == "A-X alone" and bulk.path_dicts()[0]["label"] == "A-X alone"


def test_a_result_the_algorithm_makes_is_stored_as_it_is_and_reads_back_the_same():
    runs = {frozenset({"A-X"}): [9.0, 9.2], frozenset({"B-Y"}): [4.0, 4.1],
            frozenset({"A-X", "B-Y"}): [12.0, 12.3]}
    state = SelectionState(("A-X", "B-Y"), runs)
    assert next_probes(state) == []
    made = result(state)
    stored = _stored(made.to_dict())
    back = SelectionResult.from_dict(stored)
    assert (back.subset, back.label, back.usable, back.settled, back.standby_subflows) == (
        made.subset, made.label, made.usable, made.settled, made.standby_subflows)
    assert back.to_dict() == stored
    assert [s.decision for s in back.path] == [s.decision for s in made.path]
    assert back.estimate.mean_mbps == round(made.estimate.mean_mbps, 6)


def test_the_selection_is_frozen():
    selection = Selection.from_dict({"done": True, "ccs": {"cubic": ENTRY}})
    with pytest.raises(dataclasses.FrozenInstanceError):
        selection.ccs["cubic"].subset = ("B-Y",)  # type: ignore[misc]


def test_omega_ccs_and_an_import_origin_read_as_attributes_and_write_back_unchanged():
    stored = {"omega_ccs": {"ccs": ["reno"], "why": "adaptive"},
              "imported": {"from": {"campaign_id": 3, "bundle_version": 1},
                           "capabilities": {"SRL": {"report": {}}}, "software": {"v": "1"}}}
    state = CampaignState.from_dict(_stored(stored))
    assert state.omega_ccs == OmegaCCs(ccs=("reno",), why="adaptive")
    assert state.imported.source["campaign_id"] == 3 and not state.imported.answered
    written = state.to_dict()
    assert {k: written[k] for k in stored} == stored
    answered = dataclasses.replace(state.imported, answered=True, answer={"opm": "PCDC"},
                                   answer_differs=[], no_answer=None)
    again = ImportOrigin.from_dict(_stored(answered.to_dict()))
    assert again == answered and again.to_dict()["no_answer"] is None
    # a seed's dicts are read as the types; the notes of old show them as they were
    seeded = CampaignState(omega_ccs={"ccs": ["reno"], "why": "w"}, imported={"from": {}})
    assert seeded.omega_ccs.ccs == ("reno",) and isinstance(seeded.imported, ImportOrigin)
    assert seeded.legacy_notes()["omega_ccs"] == {"ccs": ["reno"], "why": "w"}


def test_an_imported_bundles_odd_values_never_fail_a_read():
    odd = {"done": True, "ccs": {"cubic": {
        "subset": ["A-X"], "usable": True, "estimate": 5, "path": [3, {"rival": 7, "estimate": []}],
        "within_reach": "x", "contradicted": {}, "buffer_check": [1], "omega": "no",
        "standby_subflows": 9}, "reno": "nothing"}}
    selection = Selection.from_dict(odd)
    entry = selection.ccs["cubic"]
    assert entry.subset == ("A-X",) and entry.usable and entry.estimate is None
    assert entry.path == ()  # a list with other than objects: kept as it was, read as none
    fine = SelectionResult.from_dict({"path": [{"rival": 7, "estimate": []}]})
    assert fine.path[0].rival is None and fine.path[0].estimate is None
    assert entry.omega is None and entry.buffer_check is None and not entry.standby_subflows
    assert "reno" not in selection.ccs
    assert entry.to_dict() == odd["ccs"]["cubic"]  # written back as it was
    assert Selection.from_dict(selection.to_dict()) == selection
    assert CampaignState.from_dict({"omega_ccs": {"ccs": 4}}).omega_ccs.ccs == ()


def test_a_warm_checks_report_reads_typed_in_both_stored_forms():

    judged = {"check": "obs", "arm": "PCDC/cubic", "bs_mib": 0.2, "promised_mbps": 9.9,
              "measured_mbps": 9.7, "runs": 2, "tolerance_mbps": 0.69, "drifted": False}
    failed = {"check": "t_star", "arm": "FullMesh/reno", "bs_mib": 0.8, "promised_mbps": 10.1,
              "measured_mbps": None}  # every probe failed: no runs, tolerance or verdict
    stored = {"from_campaign": 3, "from_recommendation": 4, "probes": 4,
              "verdict": "warm_drifted", "checks": [judged, failed, {"drifted": "odd"}]}
    warm = Warm.from_dict(_stored(stored))
    assert all(isinstance(c, WarmCheck) for c in warm.checks)
    assert warm.checks[0].drifted is False and warm.checks[0].runs == 2
    assert warm.checks[1].measured_mbps is None and warm.checks[1].drifted is None
    assert warm.checks[2].drifted is None  # not a verdict: kept as stored, read as none
    assert warm.to_dict() == stored
    state = CampaignState.from_dict(_stored({"warm": stored}))
    assert state.legacy_notes()["warm"] == stored

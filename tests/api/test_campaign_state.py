"""Typed campaign state: migration 0003 moving the old JSON notes into columns and back (the probe
lease: tests/workers/test_probe_lease.py)."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import text

from service import db
from service.state import STATE_VERSION, CampaignState, Warm


@pytest.mark.slow
def test_migration_0003_moves_notes_into_columns_and_back(tmp_path):
    url = f"sqlite:///{tmp_path / 'm.sqlite3'}"
    db.upgrade(url, "0002")
    engine = db.make_engine(url)
    notes = {
        "ccs": ["cubic"], "offered_ccs": ["bbr", "cubic", "reno"],
        "dropped_ccs": {"olia": "not offered"}, "impact_runs": 2, "extra_rounds": 1,
        "budget_exhausted": True, "recommendation_id": 7, "failed_probes": [],
        "lease": {"id": "x", "key": [], "until": 0},
    }
    now = "2026-11-01 00:00:00"
    with engine.begin() as conn:
        _two_sites_and_a_topology(conn, now)
        conn.execute(text(
            "INSERT INTO campaigns (id, topology_id, state, reason, ccs, pms, buffer_grid_mib, "
            "runs, duration_s, delta, model_kind, probes_total, probes_done, probe_seconds_used,"
            " notes, created_at, updated_at) VALUES (1, 1, 'done', 'test', '[\"cubic\"]', "
            "'[\"PCDC\"]', '[1, 2, 3]', 2, 5, 0.07, 'paper', 10, 10, 50, :notes, :t, :t)"),
            {"notes": json.dumps(notes), "t": now})
    db.upgrade(url, "0003")
    with engine.connect() as conn:
        row = conn.execute(text("SELECT * FROM campaigns WHERE id = 1")).mappings().one()
    assert json.loads(row["active_ccs"]) == ["cubic"]
    assert json.loads(row["offered_ccs"]) == ["bbr", "cubic", "reno"]
    assert json.loads(row["dropped_ccs"]) == {"olia": "not offered"}
    assert (row["impact_runs"], row["extra_rounds"], row["recommendation_id"]) == (2, 1, 7)
    assert row["budget_exhausted"] and row["lease_id"] is None
    assert json.loads(row["notes"]) == {"failed_probes": []}
    db.downgrade(url, "0002")
    with engine.connect() as conn:
        back = json.loads(conn.execute(text("SELECT notes FROM campaigns WHERE id = 1")).scalar())
    engine.dispose()
    assert back == {k: v for k, v in notes.items() if k != "lease"}


def test_migration_0024_moves_notes_and_budget_columns_into_the_run_state_and_back(tmp_path):

    url = f"sqlite:///{tmp_path / 'm.sqlite3'}"
    db.upgrade(url, "0023")
    engine = db.make_engine(url)
    notes = {
        "failed_probes": [{"cc": "reno", "error": "x"}], "unfitted_arms": [],
        "grid_extended": [8.0], "adaptive": {"stop": "settled", "opm": "PCDC", "occ": "cubic"},
        "warm": {"from_campaign": 3, "from_recommendation": 4, "probes": 6,
                 "verdict": "warm_drifted", "checks": [{"check": "otp"}]},
        "selection": {"done": True, "ccs": {"cubic": {"subset": ["A-X"], "usable": True}}},
        "omega_ccs": {"ccs": ["cubic"], "why": "w"}, "unsettled_omegas": {},
        "probe_budget": {"spent": {"impact": {"probes": 3, "probe_seconds": 15.0}},
                         "planned": {"impact": {"probes": 3, "probe_seconds": 15.0}},
                         "budget_s": 100.0, "asked": {"sweep": 4}, "settled": True},
        "something_else": {"kept": 1},
    }
    now = "2026-11-01 00:00:00"
    with engine.begin() as conn:
        _two_sites_and_a_topology(conn, now)
        conn.execute(text(
            "INSERT INTO campaigns (id, topology_id, state, reason, ccs, pms, buffer_grid_mib, "
            "runs, duration_s, delta, model_kind, probe_seconds_budget, probes_total, "
            "probes_done, probe_seconds_used, notes, dropped_ccs, extra_rounds, "
            "budget_exhausted, extra_impact_runs, seed, created_at, updated_at) VALUES (1, 1, "
            "'done', "
            "'test', '[\"cubic\"]', '[\"PCDC\"]', '[1, 2, 3]', 2, 5, 0.07, 'paper', 100, 10, 9,"
            " 50.5, :notes, '{}', 1, 1, '{\"cubic\": 2}', 0, :t, :t)"),
            {"notes": json.dumps(notes), "t": now})
    db.upgrade(url)
    with engine.connect() as conn:
        stored = conn.execute(text("SELECT run_state FROM campaigns WHERE id = 1")).scalar()
    state = CampaignState.from_dict(json.loads(stored))
    b = state.budget
    assert (b.cap_s, b.planned, b.done, b.used_s) == (100.0, 10, 9, 50.5)
    assert (b.extra_rounds, b.exhausted, dict(b.extra_impact_runs)) == (1, True, {"cubic": 2})
    assert b.settled and dict(b.asked) == {"sweep": 4} and b.spent_probes("impact") == 3
    assert state.warm.verdict == "warm_drifted" and state.warm.from_campaign == 3
    assert state.sweep_decision.stop == "settled" and state.grid_extended == (8.0,)
    assert state.unfitted_arms == () and state.unsettled_omegas == {}
    assert state.other == {"something_else": {"kept": 1}}
    assert state.legacy_notes() == notes  # what GET /campaigns shows is what it showed
    db.downgrade(url, "0023")
    with engine.connect() as conn:
        row = conn.execute(text("SELECT * FROM campaigns WHERE id = 1")).mappings().one()
    engine.dispose()
    assert json.loads(row["notes"]) == notes
    assert (row["probe_seconds_budget"], row["probes_total"], row["probes_done"],
            row["probe_seconds_used"], row["extra_rounds"]) == (100, 10, 9, 50.5, 1)
    assert row["budget_exhausted"] and json.loads(row["extra_impact_runs"]) == {"cubic": 2}


def test_the_state_round_trips_and_is_frozen():
    import dataclasses

    import pytest


    state = CampaignState(
        warm=Warm(from_campaign=1, from_recommendation=2, probes=4, verdict="warm_confirmed",
                  checks=({"check": "otp", "drifted": False},)),
        sweep_decision={"stop": "settled", "promise": {"low_mbps": 1.0, "high_mbps": 2.0}},
        grid_extended=(8.0, 16.0), failed_probes=(), unsettled_omegas={"reno": ["A-X"]},
    ).with_budget(cap_s=60.0, planned=12, done=3, used_s=15.0, spent={"impact": {
        "probes": 3, "probe_seconds": 15.0}}, extra_impact_runs={"reno": 1})
    stored = json.loads(json.dumps(state.to_dict()))  # what the JSON column keeps
    assert stored["version"] == STATE_VERSION
    assert CampaignState.from_dict(stored) == state
    assert CampaignState.from_dict({}) == CampaignState() == CampaignState.from_dict(None)
    with pytest.raises(dataclasses.FrozenInstanceError):
        state.budget = state.budget  # type: ignore[misc]
    with pytest.raises(ValueError, match="campaign state version"):
        CampaignState.from_dict({**stored, "version": STATE_VERSION + 1})
    assert state.budget.left_s() == 45.0 and state.budget.progress() == 0.25
    # the layout before the state, and back
    back = CampaignState.from_legacy(state.legacy_columns(), state.legacy_notes())
    assert back == state


def test_celery_is_an_executor_registered_like_the_in_process_one():
    from service.flows.campaign import dispatch
    from service.settings import Settings

    assert dispatch._executors["celery"] is dispatch.send_to_celery
    settings = Settings(_env_file=None, broker_url=None)
    assert settings.executor == "inprocess"
    before = dispatch._executors.pop("inprocess", None)
    seen = []
    try:
        assert not dispatch.hand_over(7, "SRL", settings)  # none registered: stays owed
        dispatch.register_executor("inprocess", lambda cid, site, _s, how: seen.append(
            (cid, site, how.countdown_s)))
        assert dispatch.hand_over(7, "SRL", settings, countdown_s=2.0)
        assert seen == [(7, "SRL", 2.0)]
    finally:
        dispatch._executors.pop("inprocess", None)
        if before is not None:
            dispatch._executors["inprocess"] = before


def _two_sites_and_a_topology(conn, now: str) -> None:
    """Sites A and B and topology 1 between them, written as the old schema's rows."""
    for k, name in enumerate(("A", "B"), start=1):
        conn.execute(text("INSERT INTO sites (id, name, description, created_at, updated_at) "
                          "VALUES (:id, :n, '', :t, :t)"), {"id": k, "n": name, "t": now})
    conn.execute(text("INSERT INTO topologies (id, local_site_id, remote_site_id, created_at,"
                      " updated_at) VALUES (1, 1, 2, :t, :t)"), {"t": now})

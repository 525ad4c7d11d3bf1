"""Typed campaign state: migration 0003 moving the old JSON notes into columns and back (the probe
lease: tests/workers/test_probe_lease.py)."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import text

from service import db


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
        for k, name in enumerate(("A", "B"), start=1):
            conn.execute(text("INSERT INTO sites (id, name, description, created_at, updated_at) "
                              "VALUES (:id, :n, '', :t, :t)"), {"id": k, "n": name, "t": now})
        conn.execute(text("INSERT INTO topologies (id, local_site_id, remote_site_id, created_at,"
                          " updated_at) VALUES (1, 1, 2, :t, :t)"), {"t": now})
        conn.execute(text(
            "INSERT INTO campaigns (id, topology_id, state, reason, ccs, pms, buffer_grid_mib, "
            "runs, duration_s, delta, model_kind, probes_total, probes_done, probe_seconds_used,"
            " notes, created_at, updated_at) VALUES (1, 1, 'done', 'test', '[\"cubic\"]', "
            "'[\"PCDC\"]', '[1, 2, 3]', 2, 5, 0.07, 'paper', 10, 10, 50, :notes, :t, :t)"),
            {"notes": json.dumps(notes), "t": now})
    db.upgrade(url)
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

"""Issue 14, item 11: the same question answered again returns the stored answer (same id, no
INSERT); another question, or the same one in another process, is still right."""

from __future__ import annotations

import pytest
from sqlalchemy import event, func, select

from models import Recommendation
from service.flows import recommend as flow

from .calibration import seed_srl_hu
from .conftest import HU, SRL
from .test_recommendations import _topology

pytestmark = pytest.mark.postgres


def _count(db_session) -> int:
    return db_session.scalar(select(func.count(Recommendation.id)))


def test_a_repeated_calibrated_question_reuses_the_stored_answer(client, auth, db_session,
                                                                  pg_connection):
    topo = _topology(client, auth, SRL, HU)
    seed_srl_hu(db_session, topo["id"])
    question = {"topology_id": topo["id"], "delta": 0.07}
    first = client.post("/recommendations", json=question, headers=auth)
    assert first.status_code == 200, first.text
    before = _count(db_session)
    inserts = []

    def watch(_conn, _cursor, statement, *_args):
        if statement.lstrip().upper().startswith("INSERT"):
            inserts.append(statement)

    event.listen(pg_connection, "before_cursor_execute", watch)
    try:
        again = [client.post("/recommendations", json=question, headers=auth) for _ in range(3)]
    finally:
        event.remove(pg_connection, "before_cursor_execute", watch)
    assert inserts == []
    assert {r.json()["id"] for r in again} == {first.json()["id"]}
    assert [r.json() for r in again] == [first.json()] * 3
    assert _count(db_session) == before
    # Another process (an empty cache) finds the stored row instead of adding one.
    flow._stored_ids._data.clear()
    other = client.post("/recommendations", json=question, headers=auth)
    assert other.json()["id"] == first.json()["id"] and _count(db_session) == before
    # Another question is another answer.
    narrower = client.post("/recommendations", json={**question, "delta": 0.05}, headers=auth)
    assert narrower.status_code == 200 and narrower.json()["id"] != first.json()["id"]
    assert _count(db_session) == before + 1


def test_a_changed_topology_is_a_new_question(client, auth, db_session):
    topo = _topology(client, auth, SRL, HU)
    seed_srl_hu(db_session, topo["id"])
    question = {"topology_id": topo["id"], "delta": 0.07}
    first = client.post("/recommendations", json=question, headers=auth).json()
    r = client.patch(f"/topologies/{topo['id']}", json={"rtts_ms": {"K-C": 123.0}}, headers=auth)
    assert r.status_code == 200, r.text
    second = client.post("/recommendations", json=question, headers=auth).json()
    assert second["id"] != first["id"]


def test_opt_in_answer_memory_serves_a_repeat_without_the_database(
        pg_database_url, session_factory, pg_connection, db_session, tmp_path):
    from fastapi.testclient import TestClient

    from api.app import create_app
    from service.settings import Settings
    from service.store import tokens

    token = tokens.create_token(db_session, name="memory")
    db_session.commit()
    auth = {"Authorization": f"Bearer {token}"}
    settings = Settings(database_url=pg_database_url, data_dir=tmp_path, run_campaigns=False,
                        answer_cache_s=30, _env_file=None)
    with TestClient(create_app(settings, session_factory=session_factory)) as client:
        topo = _topology(client, auth, SRL, HU)
        seed_srl_hu(db_session, topo["id"])
        question = {"topology_id": topo["id"], "delta": 0.07}
        first = client.post("/recommendations", json=question, headers=auth)
        statements = []

        def watch(_conn, _cursor, statement, *_args):
            statements.append(statement)

        event.listen(pg_connection, "before_cursor_execute", watch)
        try:
            again = client.post("/recommendations", json=question, headers=auth)
        finally:
            event.remove(pg_connection, "before_cursor_execute", watch)
        assert statements == []
        assert again.status_code == 200 and again.json() == first.json()
        # Another token, or no token, is never served from memory.
        assert client.post("/recommendations", json=question).status_code == 401

"""The same question answered again returns the stored answer (same id, no INSERT) from the
answer cache; another question, or the same one in another process, is still right."""

from __future__ import annotations

import pytest
from sqlalchemy import event, func, select

from models import Recommendation
from service.flows.answers.answer_cache import answers

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
    answers.clear()
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


def test_a_repeat_is_served_from_the_cache_with_one_primary_key_read(
        client, auth, db_session, pg_connection):
    """On by default: the cached answer costs one read of the answer generation, no INSERT, no
    token query, no solve; another token, or none, is never served from the cache."""
    topo = _topology(client, auth, SRL, HU)
    seed_srl_hu(db_session, topo["id"])
    question = {"topology_id": topo["id"], "delta": 0.07}
    first = client.post("/recommendations", json=question, headers=auth)
    assert first.status_code == 200, first.text
    client.post("/recommendations", json=question, headers=auth)  # the token is now known
    statements = []

    def watch(_conn, _cursor, statement, *_args):
        statements.append(statement)

    event.listen(pg_connection, "before_cursor_execute", watch)
    try:
        again = client.post("/recommendations", json=question, headers=auth)
    finally:
        event.remove(pg_connection, "before_cursor_execute", watch)
    assert again.status_code == 200 and again.json() == first.json()
    reads = [s for s in statements if "answer_generation" in s]
    assert len(reads) == 1 and all(
        s.lstrip().upper().startswith(("SELECT", "SAVEPOINT", "RELEASE", "ROLLBACK"))
        for s in statements
    ), statements
    assert client.post("/recommendations", json=question).status_code == 401
    other = {"Authorization": "Bearer mpcoa_not-a-token"}
    assert client.post("/recommendations", json=question, headers=other).status_code == 401

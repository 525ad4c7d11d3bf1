"""The same question answered again returns the stored answer (same id, no INSERT) from the
answer cache; another question, or the same one in another process, is still right."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select

from models import Recommendation
from service.flows.answers.answer_cache import answers
from tests.builders import post_topology
from tests.support import answers_from, statements

from .calibration import seed_srl_hu
from .conftest import HU, SRL

pytestmark = pytest.mark.postgres


def _count(db_session) -> int:
    return db_session.scalar(select(func.count(Recommendation.id)))


def _inserts(seen: list[str]) -> list[str]:
    return [s for s in seen if s.lstrip().upper().startswith("INSERT")]


def test_a_repeated_calibrated_question_reuses_the_stored_answer(client, auth, db_session,
                                                                  pg_connection):
    topo = post_topology(client, auth, SRL, HU)
    seed_srl_hu(db_session, topo["id"])
    question = {"topology_id": topo["id"], "delta": 0.07}
    first = client.post("/recommendations", json=question, headers=auth)
    assert first.status_code == 200, first.text
    assert "stale_data" not in first.json()["quality_flags"]
    before = _count(db_session)
    hits = answers_from("cache")
    with statements(pg_connection) as seen:
        again = [client.post("/recommendations", json=question, headers=auth) for _ in range(3)]
    assert _inserts(seen) == []
    # All three come from the cache (the first after a token check: not yet known live).
    assert answers_from("cache") == hits + 3
    assert [r.content for r in again] == [first.content] * 3
    assert _count(db_session) == before
    # Another process (an empty cache) finds the stored row instead of adding one: no cache
    # hit, no INSERT, the same answer.
    answers.clear()
    solved = answers_from("solved")
    with statements(pg_connection) as seen:
        other = client.post("/recommendations", json=question, headers=auth)
    assert answers_from("cache") == hits + 3 and answers_from("solved") == solved + 1
    assert _inserts(seen) == [] and other.content == first.content
    assert _count(db_session) == before
    # Another question is another answer.
    narrower = client.post("/recommendations", json={**question, "delta": 0.05}, headers=auth)
    assert narrower.status_code == 200 and narrower.json()["id"] != first.json()["id"]
    assert _count(db_session) == before + 1


def test_a_changed_topology_is_a_new_question(client, auth, db_session):
    topo = post_topology(client, auth, SRL, HU)
    seed_srl_hu(db_session, topo["id"])
    question = {"topology_id": topo["id"], "delta": 0.07}
    first = client.post("/recommendations", json=question, headers=auth).json()
    r = client.patch(f"/topologies/{topo['id']}", json={"rtts_ms": {"K-C": 123.0}}, headers=auth)
    assert r.status_code == 200, r.text
    second = client.post("/recommendations", json=question, headers=auth).json()
    assert second["id"] != first["id"]


def test_a_repeat_is_served_from_the_cache_with_one_primary_key_read(
        client, auth, db_session, pg_connection):
    """On by default: the cached answer is a cache hit that costs one read of the answer
    generation and no other statement (no INSERT, no token query, no solve); another token,
    or none, is never served from the cache."""
    topo = post_topology(client, auth, SRL, HU)
    seed_srl_hu(db_session, topo["id"])
    question = {"topology_id": topo["id"], "delta": 0.07}
    first = client.post("/recommendations", json=question, headers=auth)
    assert first.status_code == 200, first.text
    client.post("/recommendations", json=question, headers=auth)  # the token is now known
    hits = answers_from("cache")
    with statements(pg_connection) as seen:
        again = client.post("/recommendations", json=question, headers=auth)
    assert again.status_code == 200 and again.content == first.content
    assert answers_from("cache") == hits + 1
    work = [s for s in seen if not s.lstrip().upper().startswith(
        ("SAVEPOINT", "RELEASE", "ROLLBACK"))]
    assert len(work) == 1 and "answer_generation" in work[0], seen
    assert client.post("/recommendations", json=question).status_code == 401
    other = {"Authorization": "Bearer mpcoa_not-a-token"}
    assert client.post("/recommendations", json=question, headers=other).status_code == 401
    assert answers_from("cache") == hits + 1

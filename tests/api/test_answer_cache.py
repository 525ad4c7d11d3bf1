"""The answer cache is on by default and never stale: each change that can change an answer
invalidates it -- a new calibration, a PATCHed topology or site, a revoked or expired token --
whether this API process or another writer made it (the changes below that are made on the
database directly stand for another process)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import Engine, event

from models import Recommendation
from service.flows.answers.answer_cache import answers
from service.store import tokens
from tests.builders import post_topology
from tests.support import answers_from

from .calibration import seed_srl_hu
from .conftest import HU, SRL

pytestmark = pytest.mark.postgres
QUESTION = {"delta": 0.07}


def _cached_answer(client, auth, topology_id: int) -> dict:
    """The calibrated answer, asked until the cache serves it (the second ask is a hit)."""
    first = client.post("/recommendations", json={**QUESTION, "topology_id": topology_id},
                        headers=auth)
    assert first.status_code == 200, first.text
    hits = answers_from("cache")
    again = client.post("/recommendations", json={**QUESTION, "topology_id": topology_id},
                        headers=auth)
    assert answers_from("cache") == hits + 1
    assert again.content == first.content
    return first.json()


def _inputs(db_session, answer: dict) -> dict:
    return db_session.get(Recommendation, answer["id"]).inputs


def _ask(client, auth, topology_id: int):
    return client.post("/recommendations", json={**QUESTION, "topology_id": topology_id},
                       headers=auth)


def test_a_new_calibration_is_answered_at_once(client, auth, db_session):
    topo = post_topology(client, auth, SRL, HU)
    old = seed_srl_hu(db_session, topo["id"], seed=1)["campaign"]
    before = _cached_answer(client, auth, topo["id"])
    assert before["campaign_id"] == old.id
    new = seed_srl_hu(db_session, topo["id"], seed=2)["campaign"]  # committed by another writer
    after = _ask(client, auth, topo["id"]).json()
    assert after["campaign_id"] == new.id and after["id"] != before["id"]


def test_a_patched_topology_is_answered_at_once(client, auth, db_session):
    topo = post_topology(client, auth, SRL, HU)
    seed_srl_hu(db_session, topo["id"])
    before = _cached_answer(client, auth, topo["id"])
    r = client.patch(f"/topologies/{topo['id']}", json={"rtts_ms": {"K-C": 123.0}},
                     headers=auth)
    assert r.status_code == 200, r.text
    after = _ask(client, auth, topo["id"]).json()
    assert after["id"] != before["id"]
    assert _inputs(db_session, after)["rtts_ms"]["K-C"] == 123.0


def test_a_changed_site_is_answered_at_once(client, auth, db_session):
    topo = post_topology(client, auth, SRL, HU)
    seed_srl_hu(db_session, topo["id"])
    before = _cached_answer(client, auth, topo["id"])
    renamed = {**HU, "isps": [{**HU["isps"][0], "name": "CERNET2"}, HU["isps"][1]]}
    r = client.put(f"/sites/{topo['remote_site']['id']}", json=renamed, headers=auth)
    assert r.status_code == 200, r.text
    after = _ask(client, auth, topo["id"]).json()
    assert after["id"] != before["id"]
    assert _inputs(db_session, after)["topology"]["remote"]["isps"][0]["name"] == "CERNET2"


def test_a_revoked_token_is_refused_at_once(client, auth, db_session):
    topo = post_topology(client, auth, SRL, HU)
    seed_srl_hu(db_session, topo["id"])
    token = tokens.create_token(db_session, name="soon-revoked")
    db_session.commit()
    mine = {"Authorization": f"Bearer {token}"}
    _cached_answer(client, mine, topo["id"])
    tokens.revoke_token(db_session, name="soon-revoked")  # `mpcoa token revoke`, elsewhere
    db_session.commit()
    assert _ask(client, mine, topo["id"]).status_code == 401
    assert _ask(client, auth, topo["id"]).status_code == 200  # the others' answers stay


def test_an_expired_token_is_refused_at_once(client, auth, db_session, clock):
    topo = post_topology(client, auth, SRL, HU)
    seed_srl_hu(db_session, topo["id"])
    expires_at = clock.now() + timedelta(minutes=10)
    token = tokens.create_token(db_session, name="short-lived", expires_at=expires_at)
    db_session.commit()
    mine = {"Authorization": f"Bearer {token}"}
    _cached_answer(client, mine, topo["id"])
    # nothing in the database changes: only the clock the answers and the token check read
    clock.shift(timedelta(minutes=10, seconds=1))
    assert _ask(client, mine, topo["id"]).status_code == 401


def test_a_change_elsewhere_leaves_the_cached_answer_right(client, auth, db_session):
    """An unrelated topology's change raises the generation too: the answer is recomputed, and
    it is the same stored answer (no new row)."""
    topo = post_topology(client, auth, SRL, HU)
    seed_srl_hu(db_session, topo["id"])
    before = _cached_answer(client, auth, topo["id"])
    other = post_topology(client, auth, {**SRL, "name": "SRL2"}, {**HU, "name": "HU2"})
    r = client.patch(f"/topologies/{other['id']}", json={"rtts_ms": {"K-C": 50.0}},
                     headers=auth)
    assert r.status_code == 200, r.text
    assert _ask(client, auth, topo["id"]).json() == before


def test_a_request_reads_the_generation_once_and_looks_its_question_up_once(
        client, auth, db_session, monkeypatch):
    """A question missed by the cache (another topology changed since it was cached) costs one
    read of the answer generation and one cache lookup, however the request is answered."""
    topo = post_topology(client, auth, SRL, HU)
    seed_srl_hu(db_session, topo["id"])
    before = _cached_answer(client, auth, topo["id"])  # the token is cached too
    other = post_topology(client, auth, {**SRL, "name": "SRL2"}, {**HU, "name": "HU2"})
    r = client.patch(f"/topologies/{other['id']}", json={"rtts_ms": {"K-C": 50.0}},
                     headers=auth)
    assert r.status_code == 200, r.text
    reads: list[str] = []
    lookups: list[object] = []

    def count_reads(conn, cursor, statement, *args):
        if "answer_generation" in statement and statement.lstrip().upper().startswith("SELECT"):
            reads.append(statement)

    real_answer = answers.answer

    def counted_answer(question, generation):
        lookups.append(question)
        return real_answer(question, generation)

    monkeypatch.setattr(answers, "answer", counted_answer)
    event.listen(Engine, "before_cursor_execute", count_reads)
    try:
        assert _ask(client, auth, topo["id"]).json() == before
    finally:
        event.remove(Engine, "before_cursor_execute", count_reads)
    assert len(reads) == 1, reads
    assert len(lookups) == 1

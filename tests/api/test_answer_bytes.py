"""One answer, one serialisation: the same calibrated answer is the same bytes whichever path
produced it -- solved fresh, sent from the answer cache, read back from the database by a
process with an empty cache, or read by id or in a list -- on PostgreSQL (JSONB reorders an
object's keys) and on SQLite. An answer whose data is stale is still served from the cache,
flagged; `provenance.data_age_s` is the data's age when the answer was first given."""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import pytest

from service.flows.answers.answer_cache import STALE_AFTER_S, answers
from tests.builders import post_topology
from tests.support import ago, answers_from, statements

from .calibration import seed_srl_hu
from .conftest import HU, SRL

ENGINES = [pytest.param("postgres", marks=pytest.mark.postgres), "sqlite"]
QUESTION = {"delta": 0.07}


@pytest.fixture(params=ENGINES)
def engine(request):
    """Which database the test's app answers from (the `postgres` mark picks PostgreSQL)."""
    return request.param


def _ask(client, auth, topology_id: int):
    r = client.post("/recommendations", json={**QUESTION, "topology_id": topology_id},
                    headers=auth)
    assert r.status_code == 200, r.text
    return r


def _keys_sorted(value) -> bool:
    if isinstance(value, dict):
        return list(value) == sorted(value) and all(map(_keys_sorted, value.values()))
    if isinstance(value, list):
        return all(map(_keys_sorted, value))
    return True


def _at(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def test_the_same_answer_is_the_same_bytes_on_every_path(engine, client, auth, db_session,
                                                         clock):
    topo = post_topology(client, auth, SRL, HU)
    seed_srl_hu(db_session, topo["id"])
    solved = answers_from("solved")
    fresh = _ask(client, auth, topo["id"])
    assert answers_from("solved") == solved + 1
    body = fresh.json()
    assert _keys_sorted(body["provenance"])
    age = body["provenance"]["data_age_s"]
    newest = _at(body["provenance"]["newest_measurement_at"])
    assert age == pytest.approx((_at(body["created_at"]) - newest).total_seconds(), abs=1e-3)

    clock.shift(timedelta(hours=6))  # the figure is the age when answered: it does not grow
    hits = answers_from("cache")
    cached = _ask(client, auth, topo["id"])
    assert answers_from("cache") == hits + 1
    assert cached.content == fresh.content

    answers.clear()  # another process: the stored row read back, not solved into a new one
    with statements() as seen:
        read_back = _ask(client, auth, topo["id"])
    assert not [s for s in seen if s.lstrip().upper().startswith("INSERT")], seen
    assert answers_from("cache") == hits + 1
    assert read_back.content == fresh.content

    by_id = client.get(f"/recommendations/{body['id']}")
    assert by_id.status_code == 200 and by_id.content == fresh.content
    listed = client.get("/recommendations", params={"topology_id": topo["id"]})
    assert listed.status_code == 200 and fresh.content in listed.content


def test_a_stale_answer_is_served_from_the_cache_flagged(engine, client, auth, db_session):
    topo = post_topology(client, auth, SRL, HU)
    seed_srl_hu(db_session, topo["id"], t0=ago(days=40))
    first = _ask(client, auth, topo["id"])
    assert "stale_data" in first.json()["quality_flags"]
    assert first.json()["provenance"]["data_age_s"] > STALE_AFTER_S
    hits = answers_from("cache")
    again = _ask(client, auth, topo["id"])
    assert answers_from("cache") == hits + 1
    assert again.content == first.content


def test_an_answer_whose_data_turns_stale_is_answered_again_flagged(engine, client, auth,
                                                                   db_session, clock):
    """Cached while fresh, it is not sent once its data has turned stale: the answer given
    then is flagged, stored as a new row, and cached in its turn."""
    topo = post_topology(client, auth, SRL, HU)
    seed_srl_hu(db_session, topo["id"], t0=ago(days=29))
    fresh = _ask(client, auth, topo["id"]).json()
    assert "stale_data" not in fresh["quality_flags"]
    clock.shift(timedelta(days=2))
    hits = answers_from("cache")
    stale = _ask(client, auth, topo["id"])
    assert answers_from("cache") == hits
    body = stale.json()
    assert "stale_data" in body["quality_flags"] and body["id"] != fresh["id"]
    assert json.loads(stale.content)["provenance"]["data_age_s"] > STALE_AFTER_S
    again = _ask(client, auth, topo["id"])
    assert answers_from("cache") == hits + 1
    assert again.content == stale.content

"""The dispatch outbox on a real broker: a campaign queued while the broker is down answers 202
and is sent later by the sweeper, exactly once; the sweeper never floods the queue; a campaign
whose lease ran out, or whose turn nobody took, is handed on once."""

from __future__ import annotations

import json
import os
from datetime import timedelta

import pytest
import redis
from fastapi.testclient import TestClient

from api.app import create_app
from models import Campaign, utcnow
from service.db import get_engine, session_scope
from service.flows.campaign import dispatch
from service.messaging import site_queue
from service.settings import Settings
from service.store import probe_lease, tokens

from .conftest import REDIS_HOST, site_names, topology_body

pytestmark = [pytest.mark.postgres, pytest.mark.broker]
DEAD_BROKER = "redis://127.0.0.1:1/0"  # nothing listens on port 1: the broker is down


def _queue_length(broker_url: str, site: str) -> int:
    db = int(broker_url.rsplit("/", 1)[1])
    client = redis.Redis(host=REDIS_HOST, port=6379, db=db)
    try:
        return client.llen(site_queue(site))
    finally:
        client.close()


def _newest_message_headers(broker_url: str, site: str) -> dict:
    """The Celery headers of the message sent last to `site`'s queue (kombu pushes left)."""
    db = int(broker_url.rsplit("/", 1)[1])
    client = redis.Redis(host=REDIS_HOST, port=6379, db=db)
    try:
        return json.loads(client.lindex(site_queue(site), 0))["headers"]
    finally:
        client.close()


def _sweep(settings: Settings, now=None) -> tuple[list[int], list[int]]:
    """What the beat's resume_campaigns task does, in this process."""
    with session_scope(get_engine(settings)) as s:
        recovered = dispatch.recover_stalled(s, settings=settings, now=now)
    with session_scope(get_engine(settings)) as s:
        sent = dispatch.send_owed(s, settings=settings, now=now)
    return recovered, sent


def test_queued_while_the_broker_is_down_then_sent_once(committed_db, broker_url, tmp_path):
    local, remote = site_names()
    down = Settings(database_url=committed_db, broker_url=DEAD_BROKER, data_dir=tmp_path,
                    _env_file=None)
    up = down.model_copy(update={"broker_url": broker_url})
    with session_scope(get_engine(down)) as s:
        token = tokens.create_token(s, name=f"outbox{os.getpid()}")
    with TestClient(create_app(down), base_url="http://localhost") as api:
        api.headers["Authorization"] = f"Bearer {token}"
        body = topology_body(local, remote)
        r = api.post("/recommendations", json={"topology": body})
        # Before the outbox this was a 500 after the commit, and the campaign was never sent.
        assert r.status_code == 202, r.text
        cid = r.json()["campaign_id"]
    with session_scope(get_engine(up)) as s:
        assert s.get(Campaign, cid).dispatched_at is None  # owed
    assert _queue_length(broker_url, local) == 0
    # The broker is back: the sweeper sends the owed hand-over, once however often it runs.
    later = utcnow() + timedelta(seconds=up.redispatch_after_s + 1)
    assert _sweep(up, now=later) == ([], [cid])
    for _ in range(5):
        assert _sweep(up, now=later) == ([], [])
    assert _queue_length(broker_url, local) == 1
    with session_scope(get_engine(up)) as s:
        assert s.get(Campaign, cid).dispatched_at is not None

    # A worker took the campaign, claimed a probe and died: its lease runs out.
    with session_scope(get_engine(up)) as s:
        assert probe_lease.claim_lease(s, campaign_id=cid, step_key=["impact", 1], owner="w",
                                       lasts=timedelta(seconds=-1))
    assert _sweep(up) == ([cid], [])
    assert _sweep(up) == ([], [])  # handed on once, not on every tick
    assert _queue_length(broker_url, local) == 2
    with session_scope(get_engine(up)) as s:
        c = s.get(Campaign, cid)
        assert c.lease_id is None and c.dispatched_at is not None

    # A worker received the re-sent turn and died before it claimed a probe: no lease is left
    # to run out. Once the turn has gone untaken for the lease's time to live it is sent again,
    # once, and that message expires after the same time.
    assert _sweep(up) == ([], [])  # a turn just sent is not re-sent
    untaken = utcnow() + timedelta(seconds=up.lease_ttl_s + 1)
    assert _sweep(up, now=untaken) == ([cid], [])
    assert _sweep(up, now=untaken) == ([], [])
    assert _queue_length(broker_url, local) == 3
    headers = _newest_message_headers(broker_url, local)
    assert headers["task"] == dispatch.ADVANCE_TASK and headers["expires"] is not None

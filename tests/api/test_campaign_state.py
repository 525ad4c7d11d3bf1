"""Typed campaign state: the probe lease under a row lock, and migration 0003 moving the old JSON
notes into columns and back."""

from __future__ import annotations

import json
import threading
import time
from datetime import timedelta

import pytest
from sqlalchemy import text

from models import utcnow
from probes.vocabulary import ISP, Site
from service import db
from service.algorithm.topology import TopologySpec
from service.store import campaigns, inventory
from tests.conftest import migrated_database, new_campaign
from tests.support import wait_for

ONE = Site(name="LeaseA", isps=[ISP(name="Uninett", label="U", down_kbps=1e4, up_kbps=1e4)])
TWO = Site(name="LeaseB", isps=[ISP(name="DFN", label="D", down_kbps=1e4, up_kbps=1e4)])


@pytest.fixture(scope="module")
def lease_db():
    """A database of its own: the lease test needs two real concurrent transactions."""
    with migrated_database("mpcoa_lease") as url:
        engine = db.make_engine(url, pool_size=4)
        with db.session_scope(engine) as s:
            topology = inventory.ensure_topology(s, spec=TopologySpec(local=ONE, remote=TWO))
            campaign_id = new_campaign(s, topology.id, runs=1, duration_s=5).id
        yield engine, campaign_id
        engine.dispose()


@pytest.mark.postgres
def test_two_workers_never_hold_one_campaign(lease_db):
    engine, campaign_id = lease_db
    locked, got = threading.Event(), {}

    def first():
        with db.session_scope(engine) as s:
            got["a"] = campaigns.claim_lease(
                s, campaign_id=campaign_id, step_key=["buffer", 1], lasts=timedelta(minutes=5)
            )
            locked.set()
            time.sleep(0.6)  # the row stays locked until this transaction commits

    worker = threading.Thread(target=first)
    worker.start()
    assert locked.wait(10)
    start = time.monotonic()
    later = utcnow() + timedelta(hours=1)
    with db.session_scope(engine) as s:
        # The sweeper skips a row another transaction has locked (SKIP LOCKED).
        assert campaign_id not in campaigns.owed_dispatch_campaign_ids(s, before=later)
    with db.session_scope(engine) as s:
        got["b"] = campaigns.claim_lease(
            s, campaign_id=campaign_id, step_key=["buffer", 2], lasts=timedelta(minutes=5)
        )
    waited = time.monotonic() - start
    worker.join(10)
    assert got["a"] and got["b"] is None
    assert waited > 0.3, "the second claim must wait for the first one's row lock"
    with db.session_scope(engine) as s:
        # The same step asks again (a redelivered task): the same lease, not a second one.
        again = campaigns.claim_lease(
            s, campaign_id=campaign_id, step_key=["buffer", 1], lasts=timedelta(minutes=5)
        )
        assert again == got["a"]
        assert not campaigns.release_lease(s, campaign_id=campaign_id, lease_id="not-mine")
        assert campaigns.release_lease(s, campaign_id=campaign_id, lease_id=got["a"])
    with db.session_scope(engine) as s:
        assert campaign_id in campaigns.owed_dispatch_campaign_ids(s, before=later)


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


@pytest.mark.postgres
def test_the_heartbeat_keeps_a_lease_that_would_run_out(lease_db):
    from service.flows.leasing import lease_heartbeat
    from service.settings import Settings

    engine, campaign_id = lease_db
    settings = Settings(lease_ttl_s=2, lease_heartbeat_s=0.3, _env_file=None)
    with db.session_scope(engine) as s:
        lease = campaigns.claim_lease(s, campaign_id=campaign_id, step_key=["impact", 9],
                                      lasts=timedelta(seconds=settings.lease_ttl_s))
    assert lease
    claimed_until = utcnow() + timedelta(seconds=settings.lease_ttl_s)

    def lease_until():
        with db.session_scope(engine) as s:
            return campaigns.get_campaign(s, campaign_id=campaign_id).lease_until

    with lease_heartbeat(engine, campaign_id=campaign_id, lease_id=lease, settings=settings):
        # past the end the claim gave the lease, renewed by the beats all along
        wait_for(lambda: utcnow() > claimed_until + timedelta(seconds=0.5), 10,
                 "the claimed lease's end to pass")
        assert _aware(lease_until()) > utcnow()
        with db.session_scope(engine) as s:
            assert campaign_id not in campaigns.expired_lease_campaign_ids(s)

    def expired() -> bool:  # the holder is gone (no more beats): the lease runs out
        with db.session_scope(engine) as s:
            return campaign_id in campaigns.expired_lease_campaign_ids(s)

    wait_for(expired, settings.lease_ttl_s + 5, "the lease to run out without its beats")
    with db.session_scope(engine) as s:
        assert campaigns.release_lease(s, campaign_id=campaign_id, lease_id=lease)


def _aware(stamp):
    """SQLite hands back naive UTC stamps; PostgreSQL aware ones."""
    from datetime import UTC

    return stamp if stamp.tzinfo else stamp.replace(tzinfo=UTC)

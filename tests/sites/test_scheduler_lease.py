"""The scheduler lease (issue 12 item 3) on SQLite and PostgreSQL: one holder at a time, renewal,
expiry and takeover, release; concurrent takers in real transactions; and the embedded
scheduler's tick: one campaign per due schedule however many processes tick."""

from __future__ import annotations

import secrets
import threading
from collections.abc import Iterator
from datetime import timedelta

import pytest
from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from models import Campaign, utcnow
from service.algorithm.topology import TopologySpec
from service.db import make_engine, session_scope, upgrade
from service.flows.scheduling import embedded_scheduler
from service.settings import Settings
from service.store import schedules
from service.store.inventory import ensure_topology
from service.store.leases import lease_holder, release_lease, take_lease
from tests.conftest import migrated_database

LEASE = timedelta(seconds=30)


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def engine(request, tmp_path) -> Iterator[Engine]:
    """A migrated database of its own on each backend, committed to for real."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'lease.sqlite3'}"
        upgrade(url)
        eng = make_engine(url)
        yield eng
        eng.dispose()
    else:
        with migrated_database("mpcoa_lease") as url:
            eng = make_engine(url, pool_size=8)
            yield eng
            eng.dispose()


def _take(engine: Engine, holder: str, name="t", now=None, lasts=LEASE) -> bool:
    with session_scope(engine) as s:
        return take_lease(s, name=name, holder=holder, lasts=lasts, now=now)


def test_one_holder_renewal_expiry_takeover_release(engine):
    now = utcnow()
    with session_scope(engine) as s:
        assert lease_holder(s, name="t") is None  # never taken
    assert _take(engine, "a", now=now)
    assert not _take(engine, "b", now=now + timedelta(seconds=29))  # a's lease is live
    assert _take(engine, "a", now=now + timedelta(seconds=29))  # a renews: until now + 59 s
    assert not _take(engine, "b", now=now + timedelta(seconds=58))
    with session_scope(engine) as s:
        assert lease_holder(s, name="t", now=now + timedelta(seconds=58)) == "a"
        assert lease_holder(s, name="t", now=now + timedelta(seconds=59)) is None  # expired
    assert _take(engine, "b", now=now + timedelta(seconds=59))  # a stopped renewing: b takes over
    assert not _take(engine, "a", now=now + timedelta(seconds=60))  # and a cannot take it back
    with session_scope(engine) as s:
        assert not release_lease(s, name="t", holder="a")  # not a's to give back
        assert lease_holder(s, name="t", now=now + timedelta(seconds=60)) == "b"
        assert release_lease(s, name="t", holder="b")
        assert lease_holder(s, name="t", now=now + timedelta(seconds=60)) is None
    assert _take(engine, "a", now=now + timedelta(seconds=61))  # released: no wait for expiry
    assert _take(engine, "x", name="other")  # leases of other names are independent


def test_a_taker_waits_for_the_holders_transaction_then_is_refused(engine):
    first = Session(engine)
    try:
        assert take_lease(first, name="w", holder="a", lasts=LEASE)  # not yet committed
        outcome = {}

        def second():
            with session_scope(engine) as s:
                outcome["b"] = take_lease(s, name="w", holder="b", lasts=LEASE)

        t = threading.Thread(target=second)
        t.start()
        t.join(1.0)
        assert t.is_alive(), "the second taker must wait for the first's transaction"
        first.commit()
        t.join(10)
        assert outcome == {"b": False}
    finally:
        first.close()
    with session_scope(engine) as s:
        assert lease_holder(s, name="w") == "a"


def test_concurrent_takers_exactly_one_wins(engine):
    holders = [f"h{i}" for i in range(6)]
    start = threading.Barrier(len(holders))
    won: dict[str, bool] = {}

    def contend(holder: str) -> None:
        start.wait()
        won[holder] = _take(engine, holder, name="race")

    threads = [threading.Thread(target=contend, args=(h,)) for h in holders]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    winners = [h for h, ok in won.items() if ok]
    assert len(won) == len(holders) and len(winners) == 1
    with session_scope(engine) as s:
        assert lease_holder(s, name="race") == winners[0]


def test_ticks_of_two_processes_queue_one_campaign_per_due_time(engine):
    tag = secrets.token_hex(3)
    body = {
        "local": {"name": f"L{tag}", "isps": [{"name": "Fiber", "label": "F", "down_kbps": 1000,
                                                "up_kbps": 1000}]},
        "remote": {"name": f"R{tag}", "isps": [{"name": "Uni", "label": "U", "down_kbps": 1000,
                                                 "up_kbps": 1000}]},
    }
    with session_scope(engine) as s:
        topology_id = ensure_topology(s, spec=TopologySpec.model_validate(body)).id
        row = schedules.set_schedule(s, topology_id=topology_id, cron="*/5 * * * *",
                                     parameters={"runs": 1, "ccs": ["reno"]})
        due = schedules.next_run(row) + timedelta(seconds=1)
    settings = Settings(run_campaigns=False, beat_interval_s=60, _env_file=None)
    first = embedded_scheduler.tick(settings=settings, engine=engine, holder="p1", now=due)
    second = embedded_scheduler.tick(settings=settings, engine=engine, holder="p2", now=due)
    assert first.leader and len(first.queued) == 1
    assert second == embedded_scheduler.Tick(leader=False)
    # The first holder renews on its next beat; the second still does nothing.
    later = due + timedelta(seconds=60)
    assert embedded_scheduler.tick(settings=settings, engine=engine, holder="p1", now=later).leader
    assert not embedded_scheduler.tick(settings=settings, engine=engine, holder="p2",
                                       now=later).leader
    # p1 dies: after its lease (3 beats) p2 takes over and queues the next due time's campaign
    # once the first one is over.
    with session_scope(engine) as s:
        campaign = s.get(Campaign, first.queued[0])
        campaign.state, campaign.finished_at = "failed", later
    takeover = later + timedelta(seconds=settings.scheduler_lease_ttl_s + 1)
    nxt = takeover + timedelta(minutes=5)
    third = embedded_scheduler.tick(settings=settings, engine=engine, holder="p2", now=nxt)
    assert third.leader and len(third.queued) == 1
    with session_scope(engine) as s:
        reasons = s.scalars(select(Campaign.reason).where(Campaign.topology_id == topology_id))
        assert sorted(reasons) == ["scheduled", "scheduled"]

"""The probe lease on a real PostgreSQL: one claimant gets a live lease, one execution of a
probe's task takes it over (a redelivered copy does not measure), a probe whose lease was
taken over stores nothing, and a finished probe's result survives the database being away
when it is stored (a private server this test stops and starts; never the shared one).

The probe itself stands in as a function that returns a result after a while: what is under test
is what the executor does around it (the lease, the store), not the probe."""

from __future__ import annotations

import itertools
import threading
import time
from datetime import timedelta

import pytest
from sqlalchemy import func, select

from models import Campaign, Measurement, utcnow
from probes.base import MeasurementRequest, MeasurementResult, ReceiverAbsent
from probes.vocabulary import ISP, Site
from service import db
from service.algorithm.topology import TopologySpec
from service.flows.campaign import executor
from service.flows.campaign.leasing import lease_heartbeat
from service.flows.campaign.plan import ProbeStep
from service.settings import Settings
from service.store import dispatch_outbox, inventory, measurements, probe_lease
from tests.conftest import migrated_database, new_campaign
from tests.private_servers import PrivatePostgres
from tests.support import require, wait_for

pytestmark = pytest.mark.postgres

STEP = ProbeStep(phase="buffer", pm="FullMesh", cc="cubic", bs_mib=1.0, run=1)
MINUTES = timedelta(minutes=5)
_pairs = itertools.count()


def _settings(**over) -> Settings:
    return Settings(**{"_env_file": None, "run_campaigns": False, "probe_retries": 0, **over})


def _campaign(engine) -> int:
    """A queued campaign of a topology of its own (one active campaign per topology)."""
    pair = next(_pairs)
    one = Site(name=f"LeaseA{pair}",
               isps=[ISP(name="Uninett", label="U", down_kbps=1e4, up_kbps=1e4)])
    two = Site(name=f"LeaseB{pair}",
               isps=[ISP(name="DFN", label="D", down_kbps=1e4, up_kbps=1e4)])
    with db.session_scope(engine) as s:
        topology = inventory.ensure_topology(s, spec=TopologySpec(local=one, remote=two))
        return new_campaign(s, topology.id, runs=1, duration_s=5).id


@pytest.fixture(scope="module")
def lease_engine():
    """A database of its own: these tests need real concurrent transactions."""
    require("postgres", "PostgreSQL")
    with migrated_database("mpcoa_lease") as url:
        engine = db.make_engine(url, pool_size=6)
        yield engine
        engine.dispose()


def _result(request: MeasurementRequest) -> MeasurementResult:
    now = utcnow()
    series = [(float(k + 1), 9.0) for k in range(5)]
    return MeasurementResult(
        request=request, tool="iperf3", tool_version="3.12", goodput_series=series,
        mptcp_ok=True, goodput_mbps=9.0, warmup_s=2,
        started_at=now - timedelta(seconds=5), ended_at=now)


def _stored(engine, campaign_id: int) -> int:
    with db.session_scope(engine) as s:
        return s.scalar(select(func.count()).select_from(Measurement)
                        .where(Measurement.campaign_id == campaign_id))


def _claim(engine, campaign_id: int, owner: str, lasts=MINUTES) -> str | None:
    with db.session_scope(engine) as s:
        return probe_lease.claim_lease(s, campaign_id=campaign_id, step_key=list(STEP.key),
                                       owner=owner, lasts=lasts)


def test_two_claimants_of_one_lease_get_it_once(lease_engine):
    """Two turns (a task and its redelivered copy) claim the same step at the same time, in two
    transactions: one gets the lease, the other nothing, also once the first has committed."""
    campaign_id = _campaign(lease_engine)
    locked, got = threading.Event(), {}

    def first():
        with db.session_scope(lease_engine) as s:
            got["a"] = probe_lease.claim_lease(s, campaign_id=campaign_id,
                                               step_key=list(STEP.key), owner="a", lasts=MINUTES)
            locked.set()
            time.sleep(0.6)  # the row stays locked until this transaction commits

    worker = threading.Thread(target=first)
    worker.start()
    assert locked.wait(10)
    start = time.monotonic()
    later = utcnow() + timedelta(hours=1)
    with db.session_scope(lease_engine) as s:
        # The sweeper skips a row another transaction has locked (SKIP LOCKED).
        assert campaign_id not in dispatch_outbox.owed_dispatch_campaign_ids(s, before=later)
    got["b"] = _claim(lease_engine, campaign_id, "b")  # the same step, another claimant
    waited = time.monotonic() - start
    worker.join(10)
    assert got["a"] and got["b"] is None
    assert waited > 0.3, "the second claim must wait for the first one's row lock"
    assert _claim(lease_engine, campaign_id, "b") is None  # committed: still not b's
    assert _claim(lease_engine, campaign_id, "a") == got["a"]  # its owner asking again
    with db.session_scope(lease_engine) as s:
        assert not probe_lease.release_lease(s, campaign_id=campaign_id, lease_id=got["a"],
                                             owner="b")
        assert probe_lease.release_lease(s, campaign_id=campaign_id, lease_id=got["a"],
                                         owner="a")
    with db.session_scope(lease_engine) as s:
        assert campaign_id in dispatch_outbox.owed_dispatch_campaign_ids(s, before=later)


def test_a_redelivered_copy_of_a_probe_task_does_not_measure(lease_engine):
    """The broker hands a probe's task to a second worker while the first still measures (its
    visibility timeout passed): the copy carries the same lease and token, finds the lease taken
    over by the first execution and neither measures nor releases; the first stores once."""
    campaign_id = _campaign(lease_engine)
    settings = _settings()
    lease = _claim(lease_engine, campaign_id, "turn")
    measuring, finish, calls, out = threading.Event(), threading.Event(), [], {}

    def slow_probe(request):
        calls.append("first")
        measuring.set()
        assert finish.wait(30)
        return _result(request)

    def copy_probe(request):
        calls.append("copy")
        return _result(request)

    first = threading.Thread(target=lambda: out.setdefault("first", executor.run_step(
        lease_engine, campaign_id=campaign_id, step=STEP, lease=lease, owner="turn",
        measure=slow_probe, settings=settings)))
    first.start()
    try:
        assert measuring.wait(30)
        copy = executor.run_step(lease_engine, campaign_id=campaign_id, step=STEP, lease=lease,
                                 owner="turn", measure=copy_probe, settings=settings)
        assert copy.lost and not copy.stored
        # the copy's task would release next: the lease is not the copy's to give back
        assert not executor.release(lease_engine, campaign_id=campaign_id, lease=lease,
                                    owner=probe_lease.new_owner())
    finally:
        finish.set()
        first.join(30)
    assert out["first"].stored and calls == ["first"]
    assert _stored(lease_engine, campaign_id) == 1
    assert executor.release(lease_engine, campaign_id=campaign_id, lease=lease, owner="turn")


def test_a_probe_whose_lease_was_taken_over_stores_nothing(lease_engine):
    """The worker's heartbeat could not renew (a lease of 2 s, beats every 60 s: as if the
    worker had stalled), the lease ran out, the sweeper dropped it and another turn claimed the
    campaign while the probe still ran: the probe's result is not stored."""
    campaign_id = _campaign(lease_engine)
    settings = _settings(lease_ttl_s=2, lease_heartbeat_s=60)
    lease = _claim(lease_engine, campaign_id, "turn", lasts=timedelta(seconds=2))
    taken = {}

    def probe_outliving_its_lease(request):
        def expired() -> bool:
            with db.session_scope(lease_engine) as s:
                return campaign_id in probe_lease.expired_lease_campaign_ids(s)

        wait_for(expired, 15, "the lease to run out")
        with db.session_scope(lease_engine) as s:  # what dispatch.recover_stalled does
            probe_lease.drop_lease(s.get(Campaign, campaign_id))
        taken["lease"] = _claim(lease_engine, campaign_id, "another turn")
        return _result(request)

    outcome = executor.run_step(lease_engine, campaign_id=campaign_id, step=STEP, lease=lease,
                                owner="turn", measure=probe_outliving_its_lease,
                                settings=settings)
    assert taken["lease"] and taken["lease"] != lease
    assert outcome.lost and not outcome.stored
    assert _stored(lease_engine, campaign_id) == 0
    assert not executor.release(lease_engine, campaign_id=campaign_id, lease=lease, owner="turn")
    with db.session_scope(lease_engine) as s:  # the new holder's lease is untouched
        c = s.get(Campaign, campaign_id)
        assert c.lease_id == taken["lease"] and c.lease_owner == "another turn"


def test_a_step_whose_receiver_has_no_worker_is_not_used_up(lease_engine):
    """The receiver site's worker is away (killed, restarting) at the step's last attempt: the
    sites' fault, not the probe's. Nothing is stored, the step is still to do, and the lease is
    handed back to the turn that claimed it, which releases it; the next turn runs the step."""
    campaign_id = _campaign(lease_engine)
    settings = _settings(probe_retries=2)
    lease = _claim(lease_engine, campaign_id, "turn")

    def receiver_away(request):
        raise ReceiverAbsent("receiver site: no worker of the receiver site took the passive "
                             "side in 12 s")

    outcome = executor.run_step(lease_engine, campaign_id=campaign_id, step=STEP, lease=lease,
                                owner="turn", measure=receiver_away, settings=settings,
                                attempt=settings.probe_retries)
    assert outcome.receiver_absent and not outcome.stored and outcome.retry_in_s is None
    assert _stored(lease_engine, campaign_id) == 0
    with db.session_scope(lease_engine) as s:
        assert STEP.key not in measurements.done_keys(s, campaign_id=campaign_id)
    assert executor.release(lease_engine, campaign_id=campaign_id, lease=lease, owner="turn")
    again = _claim(lease_engine, campaign_id, "next turn")
    outcome = executor.run_step(lease_engine, campaign_id=campaign_id, step=STEP, lease=again,
                                owner="next turn", measure=_result, settings=settings)
    assert outcome.stored and _stored(lease_engine, campaign_id) == 1


def test_the_heartbeat_keeps_a_lease_that_would_run_out(lease_engine):
    campaign_id = _campaign(lease_engine)
    settings = Settings(lease_ttl_s=2, lease_heartbeat_s=0.3, _env_file=None)
    lease = _claim(lease_engine, campaign_id, "me", lasts=timedelta(seconds=settings.lease_ttl_s))
    assert lease
    claimed_until = utcnow() + timedelta(seconds=settings.lease_ttl_s)

    def lease_until():
        with db.session_scope(lease_engine) as s:
            return _aware(s.get(Campaign, campaign_id).lease_until)

    with lease_heartbeat(lease_engine, campaign_id=campaign_id, lease_id=lease, owner="me",
                         settings=settings):
        # past the end the claim gave the lease, renewed by the beats all along
        wait_for(lambda: utcnow() > claimed_until + timedelta(seconds=0.5), 10,
                 "the claimed lease's end to pass")
        assert lease_until() > utcnow()
        with db.session_scope(lease_engine) as s:
            assert campaign_id not in probe_lease.expired_lease_campaign_ids(s)

    def expired() -> bool:  # the holder is gone (no more beats): the lease runs out
        with db.session_scope(lease_engine) as s:
            return campaign_id in probe_lease.expired_lease_campaign_ids(s)

    wait_for(expired, settings.lease_ttl_s + 5, "the lease to run out without its beats")
    with db.session_scope(lease_engine) as s:
        assert probe_lease.release_lease(s, campaign_id=campaign_id, lease_id=lease, owner="me")


def test_a_result_is_stored_once_when_the_database_was_away(tmp_path):
    """The probe ends while the database is down (a private server, stopped during the probe and
    started again 3 s later): its result is stored when the server is back, once, and the
    probe is not run again."""
    require("postgres", "a private PostgreSQL")
    pg = PrivatePostgres()
    engine = None
    try:
        pg.start()
        db.upgrade(pg.url)
        engine = db.make_engine(pg.url, pool_size=2)
        campaign_id = _campaign(engine)
        settings = _settings(store_retry_s=60)
        lease = _claim(engine, campaign_id, "turn")
        calls = []
        restarted = threading.Thread(target=lambda: (time.sleep(3), pg.start()))

        def probe_during_an_outage(request):
            calls.append(request)
            pg.stop()  # a real outage: connections drop, new ones are refused
            restarted.start()
            return _result(request)

        started = time.monotonic()
        outcome = executor.run_step(engine, campaign_id=campaign_id, step=STEP, lease=lease,
                                    owner="turn", measure=probe_during_an_outage,
                                    settings=settings)
        waited = time.monotonic() - started
        restarted.join(30)
        assert outcome.stored and not outcome.lost
        assert len(calls) == 1  # measured once
        assert waited >= 3  # stored only once the server was back
        assert _stored(engine, campaign_id) == 1
        assert executor.release(engine, campaign_id=campaign_id, lease=lease, owner="turn")
    finally:
        if engine is not None:
            engine.dispose()
        pg.destroy()


def test_a_step_longer_than_the_broker_allows_fails_without_measuring(lease_engine):
    """A campaign planned before the broker's visibility timeout was lowered: its 5 s probes
    are longer than half the new 8 s. The step is recorded as failed with the reason, at once
    (no retry can shorten it), and nothing measures."""
    campaign_id = _campaign(lease_engine)
    settings = _settings(broker_url="redis://127.0.0.1:1/0", broker_visibility_timeout_s=8,
                         probe_retries=3)
    lease = _claim(lease_engine, campaign_id, "turn")
    calls = []
    outcome = executor.run_step(lease_engine, campaign_id=campaign_id, step=STEP, lease=lease,
                                owner="turn", measure=calls.append, settings=settings)
    assert outcome.stored and outcome.retry_in_s is None and calls == []
    with db.session_scope(lease_engine) as s:
        row = s.scalars(select(Measurement).where(Measurement.campaign_id == campaign_id)).one()
        assert row.status == "failed"
        assert "a probe of 5 s outlasts the 4 s the broker's redelivery allows" in row.error
    assert executor.release(lease_engine, campaign_id=campaign_id, lease=lease, owner="turn")


def _aware(stamp):
    """SQLite hands back naive UTC stamps; PostgreSQL aware ones."""
    from datetime import UTC

    return stamp if stamp.tzinfo else stamp.replace(tzinfo=UTC)

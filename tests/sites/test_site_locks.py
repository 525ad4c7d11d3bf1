"""Site locks on PostgreSQL with two real concurrent transactions (issue 11 item 5)."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from sqlalchemy import delete
from sqlalchemy.orm import Session

from models import SiteLock, utcnow
from service.store.sitelocks import acquire_sites, holders, release_sites, renew_sites

pytestmark = pytest.mark.postgres

LEASE = timedelta(minutes=5)


def _cleanup(engine, names):
    with Session(engine) as s:
        s.execute(delete(SiteLock).where(SiteLock.site.in_(names)))
        s.commit()


def test_overlapping_pairs_exclude_disjoint_pairs_share(pg_engine):
    names = ["lk-a", "lk-b", "lk-c", "lk-d"]
    try:
        first = Session(pg_engine)
        assert acquire_sites(first, sites=["lk-b", "lk-a"], holder="c1", lasts=LEASE)
        # first's transaction is still open and holds the row locks; a second claimer of an
        # overlapping pair blocks on FOR UPDATE, then sees c1's live hold once c1 commits
        outcome = {}

        def second():
            with Session(pg_engine) as s:
                outcome["b"] = acquire_sites(s, sites=["lk-b", "lk-c"], holder="c2", lasts=LEASE)
                s.commit()

        t = threading.Thread(target=second)
        t.start()
        t.join(1.0)
        assert t.is_alive(), "the second claimer must wait for the first's row locks"
        first.commit()
        t.join(10)
        assert outcome["b"] is False
        with Session(pg_engine) as s:  # a disjoint pair is free at the same time
            assert acquire_sites(s, sites=["lk-c", "lk-d"], holder="c3", lasts=LEASE)
            s.commit()
            got = holders(s)
        expected = {"lk-a": "c1", "lk-b": "c1", "lk-c": "c3", "lk-d": "c3"}
        assert {k: got[k] for k in names} == expected
        with Session(pg_engine) as s:
            assert release_sites(s, holder="c1") == 2
            assert acquire_sites(s, sites=["lk-b", "lk-a"], holder="c2", lasts=LEASE)
            s.commit()
        first.close()
    finally:
        _cleanup(pg_engine, names)


def test_expired_hold_is_taken_and_renew_extends(pg_engine):
    names = ["lx-a", "lx-b"]
    t0 = utcnow()
    try:
        with Session(pg_engine) as s:
            assert acquire_sites(s, sites=names, holder="dead", lasts=LEASE, now=t0)
            assert not acquire_sites(s, sites=names, holder="live", lasts=LEASE, now=t0 + LEASE / 2)
            assert renew_sites(s, holder="dead", lasts=LEASE, now=t0 + LEASE / 2) == 2
            assert not acquire_sites(s, sites=names, holder="live", lasts=LEASE, now=t0 + LEASE)
            assert acquire_sites(s, sites=names, holder="live", lasts=LEASE, now=t0 + 2 * LEASE)
            s.commit()
    finally:
        _cleanup(pg_engine, names)

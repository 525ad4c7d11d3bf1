"""Two site workers report into one apply at the same moment: both reports stay, and the apply
sees both sites applied (it once lost one, and nobody confirmed the apply)."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from sqlalchemy import text
from sqlalchemy.orm import Session

from service.algorithm.topology import TopologySpec
from service.db import make_engine, session_scope
from service.store import applied
from service.store.inventory import ensure_topology
from tests.conftest import migrated_database
from tests.support import wait_for
from tests.workers.conftest import site_names, topology_body

pytestmark = pytest.mark.postgres


@pytest.fixture(scope="module")
def engine() -> Iterator:
    """Committed rows in a database of its own: the two reports are two real transactions."""
    with migrated_database("mpcoa_race") as url:
        eng = make_engine(url, pool_size=3)
        try:
            yield eng
        finally:
            eng.dispose()


def _waiting_on_a_lock(engine) -> bool:
    with engine.connect() as conn:
        return bool(conn.scalar(text(
            "select count(*) from pg_stat_activity where datname = current_database() "
            "and wait_event_type = 'Lock'")))


def test_a_report_made_while_the_other_is_in_flight_keeps_both(engine):
    local, remote = site_names()
    with session_scope(engine) as s:
        tid = ensure_topology(s, spec=TopologySpec.model_validate(
            topology_body(local, remote))).id
        apply_id = applied.add_apply(s, topology_id=tid, recommendation_id=None,
                                     plan={"sites": [{"site": local}, {"site": remote}]}).id

    # the sender's worker is storing its report, not yet committed ...
    first = Session(engine)
    applied.report_site(first, apply_id=apply_id, site=local, report={"state": "applied"})
    # ... when the receiver's worker reports
    seen: dict = {}

    def second_worker() -> None:
        with session_scope(engine) as s:
            row = applied.report_site(s, apply_id=apply_id, site=remote,
                                      report={"state": "applied"})
            seen.update(row.sites)

    other = threading.Thread(target=second_worker)
    other.start()
    try:
        # it waits for the first report's transaction instead of starting from a stale copy
        wait_for(lambda: _waiting_on_a_lock(engine), 10, "the second report to wait")
        first.commit()
    finally:
        first.close()
        other.join(30)
    assert not other.is_alive()
    # the second worker saw both sites applied: it is the one that goes on to confirm
    assert set(seen) == {local, remote}
    with session_scope(engine) as s:
        sites = applied.get_apply(s, apply_id=apply_id).sites
    assert {k: v["state"] for k, v in sites.items()} == {local: "applied", remote: "applied"}

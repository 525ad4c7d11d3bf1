"""No apply stuck for ever, embedded (no broker): `mpcoa serve` killed in the middle of an
apply's journal steps resumes it when it starts again; a confirmation that raises, and a
revert after a missed confirmation that raises, settle the row with every site as it was.
Each time the sites are compared value by value with how they were, and the next apply or
rollback is accepted."""

from __future__ import annotations

import pytest

from probes.site import apply as siteapply
from service import db
from service.db import session_scope
from service.flows.applying import apply as flow
from service.settings import get_settings
from service.store import applied
from tests.apply import livebed
from tests.apply.sitestate import holds, site_state
from tests.support import SERVE_START_S, free_port, wait_for

pytestmark = pytest.mark.netns
PARTS = ("sysctls", "endpoints", "limits", "available_ccs")


def _values(bed) -> dict:
    return {n: {p: site_state(bed.ns(n))[p] for p in PARTS} for n in ("A", "B")}


def _as_planned(plan: dict) -> bool:
    return all(holds(site_state(e["namespace"]), e["target"]) for e in plan["sites"])

def test_a_server_killed_mid_apply_resumes_it_when_it_starts_again(bed, tmp_path):
    import httpx

    from tests.processes import kill_group

    before = _values(bed)
    tid, token, env = livebed.stored_answer(tmp_path, bed)
    env["MPCOA_BEAT_INTERVAL_S"] = "1"
    state = tmp_path / "apply"
    port = free_port()
    server = livebed.serve({**env, "MPCOA_APPLY_HOLD_AFTER_STEPS": "2"}, tmp_path, port)
    c = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30,
                     headers={"Authorization": f"Bearer {token}"})
    try:
        wait_for(lambda: livebed.up(port, server), SERVE_START_S, "mpcoa serve to answer")
        r = c.post(f"/topologies/{tid}/apply", json={"seconds": 5, "watch": False})
        assert r.status_code == 202, r.text
        apply_id = r.json()["id"]
        wait_for(lambda: (state / bed.ns("A") / "held").exists(), 60, "the apply held")
        kill_group(server)  # SIGKILL, between the sender's journal steps
        journal = siteapply.read_journal(state / bed.ns("A"))
        assert journal["phase"] == "applying"  # half applied
        assert [st["done"] for st in journal["steps"]][:3] == [True, True, False]

        server = livebed.serve(env, tmp_path, port)  # the same server again, without the hold
        wait_for(lambda: livebed.up(port, server), SERVE_START_S, "mpcoa serve to answer again")

        def latest() -> dict:
            return c.get(f"/topologies/{tid}/applied", params={"limit": 1}).json()[0]

        row = wait_for(lambda: (a := latest())["action"] is None and a, 120,
                       "the apply resumed and settled")
        assert row["id"] == apply_id and row["state"] in ("applied", "unconfirmed"), row
        journal = siteapply.read_journal(state / bed.ns("A"))
        assert journal["label"] == f"apply {apply_id}"
        if row["state"] == "applied":
            assert _as_planned(row["plan"]), row
            assert c.post(f"/topologies/{tid}/rollback").status_code == 202
            row = wait_for(lambda: (a := latest())["action"] is None and a, 60, "the rollback")
            assert row["state"] == "rolled_back", row
        assert _values(bed) == before
        assert c.post(f"/topologies/{tid}/apply", json={"confirm": False, "watch": False}) \
            .status_code == 202  # accepted again
        row = wait_for(lambda: (a := latest())["action"] is None and a, 60, "the next apply")
        assert row["state"] == "applied" and _as_planned(row["plan"])
    finally:
        c.close()
        kill_group(server)
        for name in ("A", "B"):
            siteapply.rollback(ns=bed.ns(name), root=state)
    assert _values(bed) == before


@pytest.fixture
def embedded(bed, tmp_path, monkeypatch):
    """The flows' default database: this test's SQLite file with the testbed's answer."""
    tid, _, env = livebed.stored_answer(tmp_path, bed)
    for key in ("MPCOA_DATABASE_URL", "MPCOA_DATA_DIR", "MPCOA_TESTBED"):
        monkeypatch.setenv(key, env[key])
    monkeypatch.setattr(siteapply, "STATE_ROOT", tmp_path / "apply")
    get_settings.cache_clear()
    before = _values(bed)
    try:
        yield tid, before
    finally:
        for name in ("A", "B"):
            siteapply.rollback(ns=bed.ns(name))
        for key in [k for k in db._engines if str(tmp_path) in k]:
            db._engines.pop(key).dispose()
        get_settings.cache_clear()


def _start(tid: int, **changes) -> int:
    """An apply stored as the API stores it; `changes` made to its plan's connection (the
    confirmation connects to an address no site has: it cannot run)."""
    with session_scope() as s:
        row = flow.start_apply(s, topology_id=tid, seconds=5, watch=False)
        row.plan = {**row.plan, "connect": {**row.plan["connect"], **changes}}
        return row.id


def _row(apply_id: int):
    with session_scope() as s:
        row = applied.get_apply(s, apply_id=apply_id)
        s.expunge(row)
        return row


def test_a_confirmation_that_raises_rolls_back_and_says_why(bed, embedded):
    tid, before = embedded
    apply_id = _start(tid, destination="192.0.2.1")  # TEST-NET-1: nobody's address
    flow.run_apply(apply_id, watch_here=False)
    row = _row(apply_id)
    assert row.state == "unconfirmed" and row.action is None
    assert row.confirmation["passed"] is False
    assert "the confirmation could not run: sender failed" in row.error, row.error
    assert _values(bed) == before
    with session_scope() as s:  # not stuck: a new apply is accepted
        assert flow.start_apply(s, topology_id=tid, confirm=False, watch=False).id > apply_id


def test_a_revert_that_raises_after_a_missed_confirmation_settles_from_the_journals(
        bed, embedded, monkeypatch):
    tid, before = embedded
    real = siteapply.revert
    calls = []

    def refused_once(**kwargs):
        # the one fault here not caused for real: a host refusing the first undo
        calls.append(kwargs["ns"])
        if len(calls) == 1:
            raise OSError("the site refused the revert")
        return real(**kwargs)

    monkeypatch.setattr(siteapply, "revert", refused_once)
    apply_id = _start(tid, destination="192.0.2.1")
    flow.run_apply(apply_id, watch_here=False)
    row = _row(apply_id)
    assert row.state == "unconfirmed" and row.action is None, (row.state, row.error)
    assert "the revert after a missed confirmation failed" in row.error
    assert "settled from the sites' journals" in row.error
    assert [e["kind"] for e in row.events] == ["settled"]
    assert _values(bed) == before
    with session_scope() as s:
        # nothing to roll back: the answer was reverted (the rollback says so, changes nothing)
        assert flow.start_rollback(s, topology_id=tid).state == "unconfirmed"
        assert flow.start_apply(s, topology_id=tid, confirm=False, watch=False).id > apply_id


def test_a_site_applied_by_a_late_runner_while_the_row_is_settled_is_reverted(
        bed, embedded, monkeypatch):
    """A runner resumed late (a killed worker's restart on a busy host) applies a site after
    the settler found it untouched, and reports before the settler writes the row: the row
    is `failed`, so the site must not stay as planned."""
    from service.flows.applying import apply_settle

    tid, before = embedded
    apply_id = _start(tid)
    real = apply_settle._apply_outcome

    def a_runner_in_between(row, aid):
        out = real(row, aid)  # the settler has looked at (and settled) every site ...
        assert flow.apply_site(aid, "A")["state"] == "applied"  # ... then a runner applies A
        return out

    monkeypatch.setattr(apply_settle, "_apply_outcome", a_runner_in_between)
    settled = apply_settle.settle(apply_id, reason="test: the deadline", deadline_s=40,
                                  force=True)
    assert settled == "failed"
    row = _row(apply_id)
    assert row.state == "failed" and row.action is None, (row.state, row.error)
    assert _values(bed) == before, row.sites
    with session_scope() as s:  # not stuck: a new apply is accepted
        assert flow.start_apply(s, topology_id=tid, confirm=False, watch=False).id > apply_id

"""The watcher's life as the apply's events, without a testbed: a site with nothing to watch
says so, and a watcher that dies on its own (here: its namespace does not exist) is a
`watch_failed` with its stderr, its pidfile gone. On SQLite: the embedded default's database."""

from __future__ import annotations

import secrets

import pytest

from service.algorithm.topology import TopologySpec
from service.db import session_scope
from service.flows.applying import failover_watch
from service.store import applied
from service.store.inventory import ensure_topology
from tests.support import wait_for
from tests.workers.conftest import site_names, topology_body


@pytest.fixture
def apply_id(embedded_default):
    """An applied row whose sender has a used endpoint (1) and a standby (2), its receiver
    nothing to promote; the flows' default engine on a SQLite file of this test's own."""
    local, remote = site_names()
    ns = f"mpcoa-absent-{secrets.token_hex(3)}"  # no such namespace
    plan = {"watch": {"wanted": True, "hold_s": 2.0}, "sites": [
        {"site": local, "namespace": ns, "standby_endpoints": [2], "endpoints": [
            {"id": 1, "flags": ["subflow", "fullmesh"]},
            {"id": 2, "flags": ["subflow", "fullmesh", "backup"]}]},
        {"site": remote, "namespace": ns + "r", "standby_endpoints": [], "endpoints": [
            {"id": 2, "flags": ["signal"]}]}]}
    with session_scope() as s:
        tid = ensure_topology(s, spec=TopologySpec.model_validate(
            topology_body(local, remote))).id
        row = applied.add_apply(s, topology_id=tid, recommendation_id=None, plan=plan)
        applied.finish(s, row, "applied")
    return row.id


def _events(apply_id: int) -> list[dict]:
    with session_scope() as s:
        return list(applied.get_apply(s, apply_id=apply_id).events)


@pytest.mark.slow  # the watcher is a process of its own
def test_nothing_to_watch_and_a_watcher_that_dies_are_said(apply_id):
    with session_scope() as s:
        plan = applied.get_apply(s, apply_id=apply_id).plan
    sender, receiver = (e["site"] for e in plan["sites"])
    assert failover_watch.watch_config(plan, sender) == {"used": [1], "standbys": [2],
                                                         "hold_s": 2.0}
    assert failover_watch.start(apply_id, receiver) is None
    assert _events(apply_id)[-1]["kind"] == "not_watching"
    assert _events(apply_id)[-1]["detail"]["reason"] == "no standby endpoint to promote"

    watcher = failover_watch.start(apply_id, sender)
    assert watcher is not None
    failed = wait_for(lambda: next((e for e in _events(apply_id)
                                    if e["kind"] == "watch_failed"), None),
                      30, "the watcher's failure")
    assert failed["site"] == sender and failed["detail"]["returncode"] != 0
    assert plan["sites"][0]["namespace"] in failed["detail"]["stderr"]
    watcher.thread.join(10)
    assert not failover_watch.pidfile_path(plan["sites"][0]["namespace"]).exists()
    assert failover_watch.running_here() == []
    # a later stop finds nothing to stop and records nothing more
    assert failover_watch.stop(plan["sites"][0]["namespace"], reason="rollback") is False
    assert [e["kind"] for e in _events(apply_id)].count("watch_stopped") == 0

"""The applies' outbox and sweeper without a testbed, on the embedded default's SQLite: an owed
hand-over is sent once, an action whose runner process died is run again, a row past its
deadline is settled from the sites' journals (files as the applier writes them) exactly once."""

from __future__ import annotations

import json
import secrets
import subprocess
from datetime import timedelta

import pytest

from models import utcnow
from probes import pidfile
from probes.site import apply as siteapply
from service.algorithm.topology import TopologySpec
from service.db import session_scope
from service.flows.applying import apply_outbox
from service.settings import Settings
from service.store import applied
from service.store import apply_outbox as store
from service.store.inventory import ensure_topology
from tests.support import wait_for
from tests.workers.conftest import site_names, topology_body


@pytest.fixture
def settings(embedded_default, tmp_path) -> Settings:
    return Settings(database_url=embedded_default, data_dir=tmp_path, redispatch_after_s=0,
                    apply_deadline_s=30, _env_file=None)


def _row(action: str = "apply", state: str = "applying") -> tuple[int, list[str]]:
    """An apply of two sites whose namespaces do not exist (nothing is changed on them)."""
    local, remote = site_names()
    ns = [f"mpcoa-absent-{secrets.token_hex(3)}" for _ in range(2)]
    plan = {"confirm": {"wanted": True, "seconds": 5},
            "sites": [{"site": local, "namespace": ns[0]}, {"site": remote, "namespace": ns[1]}]}
    with session_scope() as s:
        tid = ensure_topology(s, spec=TopologySpec.model_validate(
            topology_body(local, remote))).id
        row = applied.add_apply(s, topology_id=tid, recommendation_id=None, plan=plan)
        if state != "applying":
            applied.finish(s, row, state)
        store.owe(row, action, deadline_s=30)
        s.flush()
        return row.id, ns


def _get(apply_id: int):
    with session_scope() as s:
        row = applied.get_apply(s, apply_id=apply_id)
        s.expunge(row)
        return row


def _journal(ns: str, apply_id: int, phase: str) -> None:
    """A site's journal as `probes.site.apply` leaves it, with no steps to undo."""
    directory = siteapply.state_dir(ns)
    directory.mkdir(parents=True)
    (directory / "journal.json").write_text(json.dumps(
        {"version": 1, "namespace": ns, "label": f"apply {apply_id}", "phase": phase,
         "steps": [], "skipped": []}))


def test_an_owed_hand_over_is_sent_once_and_a_dead_runners_action_is_run_again(settings):
    ran = []
    runners = {"apply": ran.append, "rollback": ran.append}
    apply_id, _ = _row()
    assert _get(apply_id).dispatched_at is None
    first = apply_outbox.sweep(settings, runners=runners)
    assert first["sent"] == [apply_id]
    wait_for(lambda: ran, 10, "the runner's thread")
    assert ran == [apply_id]
    row = _get(apply_id)
    assert row.dispatched_at is not None and row.runner == store.this_process()
    # its runner (this process) is alive: nothing to do
    assert apply_outbox.sweep(settings, runners=runners) == {"sent": [], "resumed": [],
                                                             "settled": []}
    # the runner dies (a real process that ended): run again here
    gone = subprocess.Popen(["sleep", "0"])
    dead = {**store.this_process(), "pid": gone.pid, "start_time": pidfile.start_time(gone.pid)}
    gone.wait()
    assert store.runner_gone(dead) and not store.runner_gone(store.this_process())
    with session_scope() as s:
        applied.get_apply(s, apply_id=apply_id).runner = dead
    assert apply_outbox.sweep(settings, runners=runners)["resumed"] == [apply_id]
    assert _get(apply_id).runner == store.this_process()


def test_past_its_deadline_an_apply_is_settled_from_the_journals_once(settings):
    both, ns = _row()
    _journal(ns[0], both, "applied")
    _journal(ns[1], both, "applied")
    never, _ = _row()  # this apply never reached its sites
    now = utcnow()
    assert apply_outbox.sweep(settings, now=now)["settled"] == []  # not yet
    later = now + timedelta(seconds=31)
    assert apply_outbox.sweep(settings, now=later)["settled"] == [both, never]
    row = _get(both)
    assert (row.state, row.action, row.error) == ("applied", None, None)
    assert row.confirmation["ran"] is False  # the confirmation never ran to its end
    assert row.events[-1]["kind"] == "settled"
    row = _get(never)
    assert row.state == "failed" and row.action is None
    assert "settled from the sites' journals" in row.error and "as before" in row.error
    # settled once: the next sweeps leave them alone
    assert apply_outbox.sweep(settings, now=later + timedelta(seconds=60))["settled"] == []


def test_a_rollback_past_its_deadline_is_settled_rolled_back(settings):
    apply_id, ns = _row("rollback", state="applied")
    _journal(ns[0], apply_id, "rolled_back")
    assert apply_outbox.sweep(settings, now=utcnow() + timedelta(seconds=31))["settled"] == [
        apply_id]
    row = _get(apply_id)
    assert (row.state, row.action) == ("rolled_back", None)
    assert "rolled back" in row.events[-1]["detail"]["sites"]

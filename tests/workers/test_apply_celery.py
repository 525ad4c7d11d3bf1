"""`mpcoa apply --rollback` with site workers (Celery, one worker per site's queue): it returns
once every site has reported `rolled_back`, not as soon as the tasks are sent; with no worker
it gives up after its timeout and says which sites it waited for."""

from __future__ import annotations

import subprocess

import pytest

from service.algorithm.topology import TopologySpec
from service.db import make_engine, session_scope
from service.store import applied
from service.store.inventory import ensure_topology
from tests.support import parent_pid

from .conftest import BIN, site_names, topology_body, worker_env

pytestmark = [pytest.mark.postgres, pytest.mark.broker]



def _applied_row(database_url: str, local: str, remote: str) -> tuple[int, int]:
    """A topology and an apply in state `applied` whose sites are namespaces that were never
    changed (no journal): rolling them back touches nothing, and reports `rolled_back`."""
    engine = make_engine(database_url)
    with session_scope(engine) as s:
        tid = ensure_topology(s, spec=TopologySpec.model_validate(
            topology_body(local, remote))).id
        plan = {"sites": [{"site": local, "namespace": f"mpcoa-none-{local}"},
                          {"site": remote, "namespace": f"mpcoa-none-{remote}"}]}
        row = applied.add_apply(s, topology_id=tid, recommendation_id=None, plan=plan)
        for name in (local, remote):
            applied.set_site(s, row, name, {"state": "applied"})
        applied.finish(s, row, "applied")
        apply_id = row.id
    engine.dispose()
    return tid, apply_id


def _state(database_url: str, apply_id: int) -> str:
    engine = make_engine(database_url)
    try:
        with session_scope(engine) as s:
            return applied.get_apply(s, apply_id=apply_id).state
    finally:
        engine.dispose()


def _rollback(env: dict, tid: int, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "mpcoa"), "apply", str(tid), "--rollback", *extra],
                          env=env, capture_output=True, text=True, timeout=180, check=False)


def test_rollback_waits_for_the_site_workers(committed_db, broker_url, worker_launcher,
                                             tmp_path):
    local, remote = site_names()
    tid, apply_id = _applied_row(committed_db, local, remote)
    env = worker_env(committed_db, broker_url, tmp_path,
                     MPCOA_APPLY_STATE=str(tmp_path / "apply"))

    # no worker serves the sites' queues: the rollback cannot happen, and the CLI says so
    nobody = _rollback(env, tid, "--timeout", "2")
    assert nobody.returncode == 1, nobody.stdout + nobody.stderr
    assert "not rolled back after 2 s" in nobody.stderr
    assert f"mpcoa worker --site {local} --site {remote}" in nobody.stderr
    # asked, not done: no apply is accepted until it is
    assert _state(committed_db, apply_id) == "rolling_back"
    busy = subprocess.run([str(BIN / "mpcoa"), "apply", str(tid)], env=env,
                          capture_output=True, text=True, timeout=60, check=False)
    assert busy.returncode == 2 and f"apply {apply_id} is rolling back" in busy.stderr, \
        busy.stdout + busy.stderr

    # one worker per site: the rollback queued above and this one are theirs; the queued one
    # may have finished before this command starts ("already rolled back", exit 0 as well)
    for name in (local, remote):
        worker_launcher.start(name, env)
    done = _rollback(env, tid, "--timeout", "120")
    assert done.returncode == 0, done.stdout + done.stderr + worker_launcher.logs()
    # when the command returns, both sites have rolled back, not merely been asked to
    assert _state(committed_db, apply_id) == "rolled_back"
    assert f"apply {apply_id}" in done.stdout and "rolled_back" in done.stdout
    # and once more, after it: nothing to do, which is what was asked
    again = _rollback(env, tid, "--timeout", "120")
    assert again.returncode == 0, again.stdout + again.stderr
    assert f"apply {apply_id}: rolled_back; already rolled back" in again.stdout


# ---- the watchers: each site's worker starts its own, as its child ------------------------------
def _three_isp_testbed(name: str, local: str, remote: str):
    """A: U 8, K 4; B: C 20, D 8, E 8. An answer using U-C and U-D leaves each site a used
    endpoint and a standby (A: U, standby K; B: D announced, standby E), so both watch."""
    from probes.testbed.spec import parse_spec

    def isps(pairs):
        return [{"name": f"isp{lb}", "label": lb, "down_kbps": kb, "up_kbps": kb}
                for lb, kb in pairs]

    sites = {local: isps([("U", 8000), ("K", 4000)]),
             remote: isps([("C", 20000), ("D", 8000), ("E", 8000)])}
    spec = parse_spec({"name": name, "defaults": {"delay_ms": 5},
                       "sites": [{"name": n, "isps": i} for n, i in sites.items()]})
    topo = {"local": {"name": local, "isps": sites[local]},
            "remote": {"name": remote, "isps": sites[remote]}}
    return spec, topo


def _events(database_url: str, tid: int) -> tuple[int, list[dict]]:
    engine = make_engine(database_url)
    try:
        with session_scope(engine) as s:
            row = applied.latest_apply(s, topology_id=tid)
            return row.id, list(row.events or [])
    finally:
        engine.dispose()


@pytest.mark.netns
def test_each_site_worker_watches_its_own_site(committed_db, broker_url, worker_launcher,
                                               tmp_path):
    import os
    import secrets
    import signal

    from probes import pidfile
    from probes.site import apply as siteapply
    from probes.testbed import lifecycle as tbmod
    from tests.apply.measured import measured_answer
    from tests.apply.sitestate import site_state
    from tests.support import wait_for

    local, remote = site_names()
    name = f"wa{secrets.token_hex(3)}"
    spec, topo = _three_isp_testbed(name, local, remote)
    state = tmp_path / "apply"
    before: dict = {}
    try:
        bed = tbmod.up(spec)
        before = {n: site_state(bed.ns(n)) for n in (local, remote)}
        engine = make_engine(committed_db)
        with session_scope(engine) as s:
            tid = ensure_topology(s, spec=TopologySpec.model_validate(topo)).id
            measured_answer(s, tid, outputs={"subflows_used": ["U-C", "U-D"],
                                             "standby_subflows": ["U-E", "K-C", "K-D", "K-E"]})
        engine.dispose()
        env = worker_env(committed_db, broker_url, tmp_path, MPCOA_APPLY_STATE=str(state),
                         MPCOA_TESTBED=name)
        workers = {n: worker_launcher.start(n, env) for n in (local, remote)}

        def apply_now():
            out = subprocess.run(
                [str(BIN / "mpcoa"), "apply", str(tid), "--no-confirm", "--hold-s", "3",
                 "--timeout", "120"], env=env, capture_output=True, text=True, timeout=180,
                check=False)
            assert out.returncode == 0, out.stdout + out.stderr + worker_launcher.logs()

        def watching(apply_id=None):
            aid, events = _events(committed_db, tid)
            sites = {e["site"] for e in events if e["kind"] == "watching"}
            return (apply_id is None or aid != apply_id) and sites == {local, remote} and aid

        apply_now()
        first = wait_for(watching, 60, "both sites' watchers")
        for n, worker in workers.items():  # each watcher is its own site worker's child
            record = pidfile.read(state / bed.ns(n) / "watcher.json")
            assert pidfile.alive(record) and parent_pid(record["pid"]) == worker.pid, n

        back = subprocess.run([str(BIN / "mpcoa"), "apply", str(tid), "--rollback",
                               "--timeout", "120"], env=env, capture_output=True, text=True,
                              timeout=180, check=False)
        assert back.returncode == 0, back.stdout + back.stderr + worker_launcher.logs()
        _, events = _events(committed_db, tid)
        assert sorted((e["site"], e["detail"]["reason"]) for e in events
                      if e["kind"] == "watch_stopped") == [(local, "rollback"),
                                                           (remote, "rollback")]
        assert all(site_state(bed.ns(n)) == before[n] for n in (local, remote))

        apply_now()
        wait_for(lambda: watching(first), 60, "the second apply's watchers")
        records = {n: pidfile.read(state / bed.ns(n) / "watcher.json") for n in (local, remote)}
        # SIGTERM: the worker stops its watcher and says so
        os.kill(workers[local].pid, signal.SIGTERM)
        workers[local].wait(60)
        _, events = _events(committed_db, tid)
        assert [e["detail"]["reason"] for e in events if e["kind"] == "watch_stopped"] == [
            "the site worker is stopping"]
        assert not pidfile.alive(records[local])
        # SIGKILL: nobody can say so, but the kernel takes the watcher along (PDEATHSIG)
        worker_launcher.kill(workers[remote])
        wait_for(lambda: not pidfile.alive(records[remote]), 20,
                 "the killed worker's watcher to end")
    finally:
        for n in (local, remote):
            siteapply.rollback(ns=tbmod.ns_name(name, n), root=state)
        try:  # the sites as found, whatever happened
            assert all(site_state(tbmod.ns_name(name, n)) == was
                       for n, was in before.items())
        finally:
            tbmod.down(name)


# ---- a failed apply on site workers: the site that took it goes back to the previous one -------
@pytest.mark.netns
def test_a_site_that_refuses_an_apply_leaves_the_previous_in_force_on_both(
        committed_db, broker_url, worker_launcher, tmp_path):
    import secrets

    from probes.site import apply as siteapply
    from probes.testbed import lifecycle as tbmod
    from service.flows.applying.apply import APPLY_TASK
    from service.messaging import broker_client, site_queue
    from tests.apply.sitestate import site_state
    from tests.support import wait_for

    from .conftest import testbed_spec

    local, remote = site_names()
    name = f"wr{secrets.token_hex(3)}"
    state = tmp_path / "apply"
    before: dict = {}
    try:
        bed = tbmod.up(testbed_spec(name, local, remote))
        before = {n: site_state(bed.ns(n)) for n in (local, remote)}
        addr = {n: bed.site_links(n)[0].address for n in (local, remote)}

        def target(n, cc, endpoint):
            return {"endpoints": [{"id": 3, "address": addr[n], **endpoint}],
                    "sysctls": {"net.ipv4.tcp_congestion_control": cc}}

        def plan(targets):
            return {"sites": [{"site": n, "namespace": bed.ns(n), "target": targets[n]}
                              for n in (local, remote)],
                    "confirm": {"wanted": False}, "watch": {"wanted": False}, "answer": {}}

        good = {n: target(n, "reno", {"signal": True}) for n in (local, remote)}
        bad = {local: target(local, "bbr", {"subflow": True}),
               remote: target(remote, "bbr", {"subflow": True, "dev": "mpcoanodev0"})}
        engine = make_engine(committed_db)
        with session_scope(engine) as s:
            tid = ensure_topology(s, spec=TopologySpec.model_validate(
                topology_body(local, remote))).id
            p_row = applied.add_apply(s, topology_id=tid, recommendation_id=None,
                                      plan=plan(good))
            applied.finish(s, p_row, "applied")
            n_id = applied.add_apply(s, topology_id=tid, recommendation_id=None,
                                     plan=plan(bad)).id
            p_id = p_row.id
        engine.dispose()
        for n in (local, remote):
            siteapply.apply(good[n], ns=bed.ns(n), root=state, label=f"apply {p_id}")
        after_p = {n: site_state(bed.ns(n)) for n in (local, remote)}

        env = worker_env(committed_db, broker_url, tmp_path, MPCOA_APPLY_STATE=str(state),
                         MPCOA_TESTBED=name)
        for n in (local, remote):
            worker_launcher.start(n, env)
        client = broker_client(broker_url)
        for n in (local, remote):
            client.send_task(APPLY_TASK, args=[n_id, n, "apply"], queue=site_queue(n))

        def settled():
            engine = make_engine(committed_db)
            try:
                with session_scope(engine) as s:
                    row = applied.get_apply(s, apply_id=n_id)
                    sites = {k: v.get("state") for k, v in (row.sites or {}).items()}
                    return sites == {local: "reverted", remote: "failed"} and (
                        row.state, row.error)
            finally:
                engine.dispose()

        got = wait_for(settled, 120, "the refused apply settled on both sites")
        assert got[0] == "failed" and f"previous apply {p_id} still in force" in got[1], got
        assert {n: site_state(bed.ns(n)) for n in (local, remote)} == after_p
        assert _state(committed_db, p_id) == "applied"
        back = _rollback(env, tid, "--timeout", "120")
        assert back.returncode == 0, back.stdout + back.stderr + worker_launcher.logs()
        assert _state(committed_db, p_id) == "rolled_back"
        assert {n: site_state(bed.ns(n)) for n in (local, remote)} == before
    finally:
        worker_launcher.stop_all()
        for n in (local, remote):
            siteapply.rollback(ns=tbmod.ns_name(name, n), root=state)
        try:
            assert all(site_state(tbmod.ns_name(name, n)) == was
                       for n, was in before.items())
        finally:
            tbmod.down(name)

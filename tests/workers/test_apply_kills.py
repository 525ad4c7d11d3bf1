"""No apply stuck for ever, on real Celery site workers and the testbed's namespaces: a worker
SIGKILLed in the middle of an apply's journal steps, during the confirmation, during a
rollback; the broker down when the apply is committed. Each time the row is settled (the
worker's restart resumes it, or the deadline settles it from the sites' journals), every site
is as it was before (value by value) or as planned, the API says which, and the next apply or
rollback is accepted."""

from __future__ import annotations

import contextlib
import fcntl
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from probes.site import apply as siteapply
from service import db
from service.algorithm.topology import TopologySpec
from service.db import make_engine, session_scope
from service.flows.applying import apply_outbox
from service.settings import Settings, get_settings
from service.store import tokens
from service.store.inventory import ensure_topology
from tests.apply.measured import measured_answer
from tests.apply.sitestate import holds, site_state
from tests.support import wait_for

from .conftest import topology_body, worker_env

pytestmark = [pytest.mark.postgres, pytest.mark.broker, pytest.mark.netns]
DEAD_BROKER = "redis://127.0.0.1:1/0"  # nothing listens on port 1: the broker is down
DEADLINE_S = 40  # longer than an apply and its confirmation after a worker's restart



@pytest.fixture(scope="module")
def topology(committed_db, sites) -> int:
    """The testbed's topology with an answer that uses F-U, A-U standing by, and an OTP a
    plain MPTCP connection reaches (1 Mbit/s on a 12 Mbit/s path)."""
    engine = make_engine(committed_db)
    with session_scope(engine) as s:
        tid = ensure_topology(s, spec=TopologySpec.model_validate(topology_body(*sites))).id
        measured_answer(s, tid, otp_mbps=1.0, tp_max_mbps=1.5,
                        outputs={"subflows_used": ["F-U"], "standby_subflows": ["A-U"]})
    engine.dispose()
    return tid


@pytest.fixture
def api(committed_db, broker_url, testbed, tmp_path, monkeypatch):
    """The API in this process (the flows' default database is the test's), a write token,
    and the environment the workers run with; every site rolled back at the end."""
    from api.app import create_app

    state = tmp_path / "apply"
    for key, value in {"MPCOA_DATABASE_URL": committed_db, "MPCOA_BROKER_URL": broker_url,
                       "MPCOA_DATA_DIR": str(tmp_path), "MPCOA_TESTBED": testbed.name,
                       "MPCOA_APPLY_DEADLINE_S": str(DEADLINE_S)}.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setattr(siteapply, "STATE_ROOT", state)
    get_settings.cache_clear()
    env = worker_env(committed_db, broker_url, tmp_path, MPCOA_APPLY_STATE=str(state),
                     MPCOA_TESTBED=testbed.name, MPCOA_APPLY_DEADLINE_S=str(DEADLINE_S),
                     MPCOA_BEAT_INTERVAL_S="2", MPCOA_REDISPATCH_AFTER_S="1")
    with session_scope() as s:
        token = tokens.create_token(s, name=f"kill{tmp_path.name[-12:]}")
    try:
        with TestClient(create_app(get_settings()), base_url="http://localhost") as client:
            client.headers["Authorization"] = f"Bearer {token}"
            yield client, env, state
    finally:
        for ns in (p.name for p in state.iterdir()) if state.exists() else ():
            siteapply.rollback(ns=ns, root=state)
        for key in [k for k in db._engines if committed_db in k]:
            db._engines.pop(key).dispose()
        get_settings.cache_clear()


class Sites:
    """The two sites' values now, before the first apply, and as the plan wants them."""

    def __init__(self, testbed, names):
        self.testbed, self.names = testbed, names
        self.before = self.now()

    def now(self) -> dict:
        return {n: site_state(self.testbed.ns(n)) for n in self.names}

    def as_before(self) -> bool:
        return self.now() == self.before

    def as_planned(self, plan: dict) -> bool:
        now = self.now()
        return all(holds(now[e["site"]], e["target"]) for e in plan["sites"])

    def check(self, row: dict) -> str:
        """Every site as the row's state says: planned when applied, as before otherwise."""
        if row["state"] == "applied":
            assert self.as_planned(row["plan"]), (row, self.now())
            return "as planned"
        assert row["state"] in ("failed", "unconfirmed", "rolled_back"), row
        now = self.now()
        for n in self.names:  # value by value, so a failure names what differs
            for part in ("sysctls", "endpoints", "limits", "available_ccs"):
                assert now[n][part] == self.before[n][part], (n, part, row)
        return "as before"


def _latest(client, tid: int) -> dict:
    r = client.get(f"/topologies/{tid}/applied", params={"limit": 1})
    assert r.status_code == 200, r.text
    return r.json()[0]


def _settled(client, tid: int, apply_id: int, timeout: float, logs) -> dict:
    def done():
        row = _latest(client, tid)
        assert row["id"] == apply_id, row
        return row if row["action"] is None and row["state"] != "applying" else None

    try:
        return wait_for(done, timeout, f"apply {apply_id} settled")
    except AssertionError:
        raise AssertionError(f"{_latest(client, tid)}\n{logs()}") from None


def _post(client, tid: int, what: str, body: dict | None = None) -> dict:
    r = client.post(f"/topologies/{tid}/{what}", json=body)
    assert r.status_code == 202, r.text
    return r.json()


def _waiting_on_a_lock(pid: int) -> bool:
    """The process is blocked on a file lock (/proc/locks lists its waiters after `->`)."""
    return any("->" in line and f" {pid} " in line
               for line in Path("/proc/locks").read_text().splitlines())


@contextlib.contextmanager
def _site_lock(state: Path, ns: str):
    """Hold the site applier's own lock: a worker that starts on the site waits inside the
    apply or rollback, where the test kills it."""
    directory = siteapply.state_dir(ns, state)
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / "lock", "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def test_a_worker_killed_at_each_step_leaves_no_apply_stuck(api, topology, sites, testbed,
                                                            worker_launcher):
    client, env, state = api
    local, remote = sites
    ns = {n: testbed.ns(n) for n in sites}
    bed = Sites(testbed, sites)
    held = {**env, "MPCOA_APPLY_HOLD_AFTER_STEPS": "2"}
    logs = worker_launcher.logs
    worker_launcher.start_beat(env)
    workers = {local: worker_launcher.start(local, held), remote: worker_launcher.start(remote,
                                                                                         env)}
    seen = {}

    # 1. the sender's worker killed between two journal steps, and not restarted: at the
    # deadline the row is settled from the journals, the half-applied site rolled back
    first = _post(client, topology, "apply", {"seconds": 5, "watch": False})
    assert first["action"] == "apply" and first["dispatched_at"] is not None
    wait_for(lambda: (state / ns[local] / "held").exists(), 60, "the apply held after 2 steps")
    worker_launcher.kill(workers[local])
    assert siteapply.read_journal(state / ns[local])["phase"] == "applying"
    row = _settled(client, topology, first["id"], DEADLINE_S + 60, logs)
    seen["mid-apply, no restart"] = (row["state"], bed.check(row))
    assert row["state"] == "failed" and "settled from the sites' journals" in row["error"]
    assert [e["kind"] for e in row["events"]] == ["settled"]

    # 2. the same, then the worker comes back: it picks the apply up and finishes it
    (state / ns[local] / "held").unlink()
    workers[local] = worker_launcher.start(local, held)
    second = _post(client, topology, "apply", {"seconds": 5, "watch": False})
    wait_for(lambda: (state / ns[local] / "held").exists(), 60, "the apply held again")
    worker_launcher.kill(workers[local])
    workers[local] = worker_launcher.start(local, env)
    row = _settled(client, topology, second["id"], DEADLINE_S + 60, logs)
    seen["mid-apply, restarted"] = (row["state"], bed.check(row))
    assert row["state"] in ("applied", "unconfirmed"), row
    if row["state"] == "applied":  # confirmed, or (a very busy machine) settled unconfirmed
        assert row["confirmation"]["passed"] is True or row["confirmation"]["ran"] is False
        back = _post(client, topology, "rollback")
        assert back["action"] == "rollback"
        row = _settled(client, topology, second["id"], 90, logs)
        assert row["state"] == "rolled_back" and bed.check(row) == "as before"

    # 3. both workers killed while the confirmation runs; they come back, find it claimed by
    # the dead one: the deadline settles the row `applied`, saying the confirmation never ran
    third = _post(client, topology, "apply", {"seconds": 30, "watch": False})

    def confirming():
        row = _latest(client, topology)
        return (row["confirmation"] or {}).get("running")

    wait_for(confirming, 90, "the confirmation to run")
    for name in sites:
        worker_launcher.kill(workers[name])
        workers[name] = worker_launcher.start(name, env)
    row = _settled(client, topology, third["id"], DEADLINE_S + 60, logs)
    seen["confirmation"] = (row["state"], bed.check(row))
    assert row["state"] == "applied" and row["confirmation"]["ran"] is False, row

    # 4. a rollback whose second site's worker is killed inside it: the worker's restart
    # finishes it
    with _site_lock(state, ns[remote]):
        _post(client, topology, "rollback")
        wait_for(lambda: (_latest(client, topology)["sites"].get(local) or {}).get("state")
                 == "rolled_back", 60, f"{local} rolled back")
        wait_for(lambda: _waiting_on_a_lock(workers[remote].pid), 60, f"{remote} waiting")
        worker_launcher.kill(workers[remote])
    assert _latest(client, topology)["action"] == "rollback"
    workers[remote] = worker_launcher.start(remote, env)
    row = _settled(client, topology, third["id"], DEADLINE_S + 60, logs)
    seen["mid-rollback"] = (row["state"], bed.check(row))
    assert row["state"] == "rolled_back"

    # 5. a rollback killed inside on both sites, no worker back: the deadline's sweeper (beat,
    # on a control-queue worker of another site) rolls them back from their journals
    fourth = _post(client, topology, "apply", {"confirm": False, "watch": False})
    row = _settled(client, topology, fourth["id"], 90, logs)
    assert row["state"] == "applied" and bed.check(row) == "as planned"
    spare = worker_launcher.start(f"{local}x", env)  # consumes the control queue only
    with _site_lock(state, ns[local]), _site_lock(state, ns[remote]):
        _post(client, topology, "rollback")
        for name in sites:  # each site's task waits inside the rollback: killed there
            wait_for(lambda n=name: _waiting_on_a_lock(workers[n].pid), 60, f"{name} waiting")
            worker_launcher.kill(workers[name])
    row = _settled(client, topology, fourth["id"], DEADLINE_S + 60, logs)
    seen["rollback, no restart"] = (row["state"], bed.check(row))
    assert row["state"] == "rolled_back"
    worker_launcher.kill(spare)
    print("killed at each step:", seen)


def test_the_broker_down_at_commit_answers_202_and_the_apply_is_sent_later(
        api, topology, sites, testbed, worker_launcher):
    client, env, _ = api
    bed = Sites(testbed, sites)
    down = get_settings().model_copy(update={"broker_url": DEAD_BROKER})
    from api.app import create_app

    with TestClient(create_app(down), base_url="http://localhost") as dead:
        dead.headers.update(client.headers)
        r = dead.post(f"/topologies/{topology}/apply", json={"confirm": False, "watch": False})
        assert r.status_code == 202, r.text
        row = r.json()
        # the row says what is happening: an apply in flight, its hand-over still owed
        assert row["state"] == "applying" and row["action"] == "apply"
        assert row["dispatched_at"] is None and row["deadline_at"] is not None
        assert dead.post(f"/topologies/{topology}/apply").status_code == 409
    assert bed.as_before()
    up: Settings = get_settings()
    swept = wait_for(lambda: row["id"] in apply_outbox.sweep(up)["sent"], 20, "the sweep")
    assert swept
    assert _latest(client, topology)["dispatched_at"] is not None
    for name in sites:
        worker_launcher.start(name, env)
    done = _settled(client, topology, row["id"], 90, worker_launcher.logs)
    assert done["state"] == "applied" and bed.check(done) == "as planned"
    _post(client, topology, "rollback")
    done = _settled(client, topology, row["id"], 90, worker_launcher.logs)
    assert done["state"] == "rolled_back" and bed.check(done) == "as before"

"""Schedules fire in the embedded default (issue 12 item 3): `mpcoa serve` alone (SQLite, no
broker) runs due schedules itself, one process per database by the scheduler lease.

Real `mpcoa serve` processes on a SQLite file in a tmp dir (and `mpcoa serve --workers 2` on
PostgreSQL), a beat of 1 s and a lease of 4 s. The first test waits for a per-minute cron to come
due on the wall clock; the others use a yearly cron whose due time was a week ago (`_yearly`) and
move the schedule's last run back before it (`_come_due`), so a due time arrives at the next tick
and no other can arrive during the test, whatever the date.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import time
from datetime import datetime, timedelta
from pathlib import Path

import httpx
import pytest
from croniter import croniter

from models import utcnow
from service.algorithm.topology import TopologySpec
from service.db import make_engine, session_scope
from service.flows.scheduling import embedded_scheduler
from service.store import dispatch_outbox, schedules
from service.store.inventory import ensure_topology
from service.store.leases import lease_holder
from tests.builders import post_topology
from tests.conftest import migrated_database, new_campaign
from tests.processes import kill_group, stop_group, tail_logs
from tests.support import SERVE_START_S, ago, free_port, wait_for

from .conftest import BIN, topology_body

pytestmark = pytest.mark.slow  # starts server processes or subprocesses (docs/testing.md)

EVERY_MINUTE = "* * * * *"


def _yearly() -> str:
    """A yearly cron due a week ago (its next due time is a year away), from the test's clock:
    no date written here can come due inside a run (a fixed 1 January would, once a year)."""
    at = ago(days=7)
    return f"{at.minute} {at.hour} {min(at.day, 28)} {at.month} *"


def _env(tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MPCOA_")}
    env.update({"HOME": str(tmp), "MPCOA_DATA_DIR": str(tmp / "data"),
                "MPCOA_BEAT_INTERVAL_S": "1", "MPCOA_SCHEDULER_LEASE_S": "4",
                "MPCOA_PROBE_RETRY_BACKOFF_S": "0.2"})
    return env


class Serve:
    """`mpcoa serve` processes in their own process groups, stopped even when a test fails."""

    def __init__(self, tmp: Path) -> None:
        self.tmp, self.env = tmp, _env(tmp)
        self.procs: list[subprocess.Popen] = []
        self.token = subprocess.run(
            [str(BIN / "mpcoa"), "token", "create", "sched"], env=self.env, capture_output=True,
            text=True, timeout=120, check=True).stdout.strip()  # also migrates the database

    @property
    def db(self) -> Path:
        return self.tmp / "data" / "mpcoa.sqlite3"

    def start(self) -> tuple[subprocess.Popen, str]:
        port = free_port()
        log = open(self.tmp / f"serve-{len(self.procs)}.log", "w")  # noqa: SIM115
        proc = subprocess.Popen([str(BIN / "mpcoa"), "serve", "--port", str(port)],
                                env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
        self.procs.append(proc)
        base = f"http://127.0.0.1:{port}"

        def healthy() -> bool:
            assert proc.poll() is None, self.logs()
            try:
                return httpx.get(f"{base}/health", timeout=2).status_code == 200
            except httpx.TransportError:
                return False

        wait_for(healthy, SERVE_START_S, "mpcoa serve to answer", interval=0.2)
        return proc, base

    def client(self, base: str) -> httpx.Client:
        return httpx.Client(base_url=base, timeout=10,
                            headers={"Authorization": f"Bearer {self.token}"})

    def holder(self) -> tuple[str | None, str | None]:
        """(holder, expires_at) of the scheduler lease row, read from the file directly."""
        db = sqlite3.connect(self.db, timeout=10)
        try:
            row = db.execute("select holder, expires_at from scheduler_lease").fetchone()
        finally:
            db.close()
        return row if row is not None else (None, None)

    def stop_all(self) -> None:
        for proc in self.procs:
            stop_group(proc, grace_s=30)

    def logs(self) -> str:
        return tail_logs(self.tmp, "serve-*.log")


@pytest.fixture
def serve(tmp_path):
    s = Serve(tmp_path)
    try:
        yield s
    finally:
        s.stop_all()


def _come_due(engine, topology_id: int) -> None:
    """Make the schedule due now: its last run (or creation) goes back to just before the cron's
    latest due time, as if the process that ran it then had stopped since."""
    with session_scope(engine) as s:
        row = schedules.get_schedule(s, topology_id=topology_id)
        due = croniter(row.cron, utcnow()).get_prev(datetime)
        row.created_at = due - timedelta(seconds=1)
        row.last_run_at = row.last_run_at and row.created_at


def _ticks(read_expiry, n: int = 2) -> None:
    """Wait for `n` more ticks of the lease holder: each renews the lease, moving its expiry."""
    seen = {read_expiry()}
    wait_for(lambda: seen.add(read_expiry()) or len(seen) > n, 15, f"{n} more scheduler ticks")


def _pid_of(holder: str | None) -> int | None:
    return int(holder.split(":")[1]) if holder else None


def _scheduled(c: httpx.Client, topology_id: int) -> list[dict]:
    r = c.get("/campaigns", params={"topology_id": topology_id, "limit": 100})
    assert r.status_code == 200, r.text
    return sorted((x for x in r.json()["items"] if x["reason"] == "scheduled"),
                  key=lambda x: x["id"])


@pytest.mark.netns
def test_a_schedule_fires_in_mpcoa_serve_and_its_campaign_runs(serve, sites, testbed):
    """One `mpcoa serve`, a small real testbed: the due schedule's campaign runs to its answer
    in the in-process executor, like a campaign POSTed by a user."""
    proc, base = serve.start()
    body = topology_body(*sites)
    # The schedule is under test, not the calibration: the paper's small grid, 9 probes, and a
    # budget of those (no extra rounds).
    plan = {"ccs": ["reno"], "buffer_grid_mib": [0.03125, 0.125, 0.5], "runs": 1,
            "duration_s": 2, "mode": "grid", "probe_seconds_budget": 9 * 2}
    with serve.client(base) as c:
        topology_id = post_topology(c, None, body["local"], body["remote"])["id"]
        r = c.put(f"/topologies/{topology_id}/schedule",
                  json={"cron": EVERY_MINUTE, "parameters": plan})
        assert r.status_code == 200, r.text
        assert r.json()["last_campaign_id"] is None
        assert _pid_of(wait_for(lambda: serve.holder()[0], 10, "the lease")) == proc.pid
        (first, *_) = wait_for(lambda: _scheduled(c, topology_id), 75,
                               "the schedule to fire: " + serve.logs())
        assert first["executor"] == "inprocess"
        assert c.get(f"/topologies/{topology_id}/schedule").json()["last_campaign_id"] == (
            first["id"])
        done = wait_for(
            lambda: (x := c.get(f"/campaigns/{first['id']}").json())["state"]
            in ("done", "failed") and x, 240, "the scheduled campaign to finish")
        assert done["state"] == "done", (done, serve.logs())
        assert done["probes_done"] == done["probes_total"] > 0
        answer = c.get("/recommendations", params={"topology_id": topology_id}).json()
        calibrated = [x for x in answer["items"] if x.get("campaign_id") == first["id"]]
        assert calibrated and calibrated[0]["occ"] == "reno"
    # A clean stop gives the lease back: another process need not wait for it to expire.
    os.killpg(proc.pid, signal.SIGTERM)
    proc.wait(timeout=30)  # uvicorn re-raises the SIGTERM after its graceful shutdown
    assert "Application shutdown complete" in serve.logs()
    assert serve.holder() == (None, None)


def test_two_serves_one_scheduler_and_takeover_after_sigkill(serve):
    """Two `mpcoa serve` on one SQLite file: exactly one holds the lease and exactly one
    campaign is queued per due time; SIGKILL the holder and the other takes over."""
    tag = os.urandom(3).hex()
    # No testbed has these sites: each scheduled campaign fails at once, so every due time can
    # queue a new one (a live one would hold the next due times back).
    local = {"name": f"L{tag}", "isps": [{"name": "Uni", "label": "U", "down_kbps": 10000,
                                          "up_kbps": 10000}]}
    remote = {"name": f"R{tag}", "isps": [{"name": "Uni", "label": "U", "down_kbps": 10000,
                                           "up_kbps": 10000}]}
    # A campaign left queued by an earlier run: the first holder of the lease resumes it.
    engine = make_engine(f"sqlite:///{serve.db}")
    with session_scope(engine) as s:
        spec = TopologySpec.model_validate({"local": local, "remote": remote})
        topology_id = ensure_topology(s, spec=spec).id
        left = new_campaign(s, topology_id, reason="left queued", runs=1, ccs=["reno"]).id
        # handed to the executor of a process that died (so no sweeper resends it)
        dispatch_outbox.mark_dispatched(s, campaign_id=left)
    try:
        _two_serves(serve, engine, topology_id, left)
    finally:
        engine.dispose()


def _two_serves(serve, engine, topology_id: int, left: int) -> None:
    a, base_a = serve.start()
    b, base_b = serve.start()
    procs = {a.pid: a, b.pid: b}
    with serve.client(base_b) as c:
        wait_for(lambda: c.get(f"/campaigns/{left}").json()["state"] == "failed", 30,
                 "the campaign left queued to be resumed (and fail: no testbed)")
        r = c.put(f"/topologies/{topology_id}/schedule",
                  json={"cron": _yearly(), "parameters": {"runs": 1, "ccs": ["reno"]}})
        assert r.status_code == 200, r.text
        holder = wait_for(lambda: serve.holder()[0], 10, "the lease")
        assert _pid_of(holder) in procs
        # Both tick every second; the lease stays with one of them all along.
        seen = set()
        for _ in range(10):
            seen.add(serve.holder()[0])
            time.sleep(0.5)
        assert seen == {holder}
        assert _scheduled(c, topology_id) == []  # not due yet
        _come_due(engine, topology_id)
        first = wait_for(lambda: _scheduled(c, topology_id), 15, "the first due time")
        wait_for(lambda: c.get(f"/campaigns/{first[0]['id']}").json()["state"] == "failed",
                 30, "the first scheduled campaign to fail (no testbed)")
        _ticks(lambda: serve.holder()[1])  # more ticks after the due time: nothing more queued
        assert len(_scheduled(c, topology_id)) == 1
        assert serve.holder()[0] == holder

        # SIGKILL the holder: no clean stop, its lease must run out (4 s) and the other takes it.
        killed = procs.pop(_pid_of(holder))
        kill_group(killed)
        t0 = time.monotonic()
        survivor = next(iter(procs))
        new_holder = wait_for(lambda: (h := serve.holder()[0]) != holder and h, 15,
                              "the survivor to take the lease")
        took = time.monotonic() - t0
        assert _pid_of(new_holder) == survivor
        assert took < 4 + 1 + 2  # the lease, a beat, slack

    base_survivor = base_a if survivor == a.pid else base_b
    with serve.client(base_survivor) as c:
        _come_due(engine, topology_id)
        wait_for(lambda: len(_scheduled(c, topology_id)) >= 2, 15,
                 "the next due time, queued by the survivor")
        _ticks(lambda: serve.holder()[1])  # more ticks after it: still one campaign for it
        both = _scheduled(c, topology_id)
        assert len(both) == 2
        assert both[0]["created_at"] < both[1]["created_at"]  # one campaign per due time
        assert c.get(f"/topologies/{topology_id}/schedule").json()["last_campaign_id"] == (
            both[1]["id"])
    print(f"takeover after SIGKILL: {took:.1f} s")


def _parent_pid(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("PPid:"):
            return int(line.split()[1])
    raise AssertionError(f"no PPid for {pid}")


@pytest.mark.postgres
def test_serve_workers_on_postgresql_run_one_scheduler(tmp_path):
    """`mpcoa serve --workers 2` on PostgreSQL: each worker process has a scheduler thread, one
    of them holds the lease, and the due time queues exactly one campaign."""
    with migrated_database("mpcoa_sched") as url:
        env = _env(tmp_path)
        env["MPCOA_DATABASE_URL"] = url
        token = subprocess.run([str(BIN / "mpcoa"), "token", "create", "sched"], env=env,
                               capture_output=True, text=True, timeout=120,
                               check=True).stdout.strip()
        port = free_port()
        log_path = tmp_path / "serve-workers.log"
        with open(log_path, "w") as log:
            proc = subprocess.Popen(
                [str(BIN / "mpcoa"), "serve", "--port", str(port), "--workers", "2"], env=env,
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        engine = make_engine(url)
        try:
            base = f"http://127.0.0.1:{port}"

            last = ["no answer yet"]

            def healthy() -> bool:
                assert proc.poll() is None, log_path.read_text()
                try:
                    r = httpx.get(f"{base}/health", timeout=2)
                except httpx.TransportError as exc:
                    last[0] = repr(exc)
                    return False
                last[0] = f"{r.status_code} {r.text[:300]}"
                return r.status_code == 200

            wait_for(healthy, SERVE_START_S, "mpcoa serve --workers 2", interval=0.2,
                     detail=lambda: f"last /health: {last[0]}\n{log_path.read_text()[-4000:]}")

            def holder() -> str | None:
                with session_scope(engine) as s:
                    return lease_holder(s, name=embedded_scheduler.LEASE_NAME)

            tag = os.urandom(3).hex()
            local = {"name": f"L{tag}", "isps": [{"name": "Uni", "label": "U",
                                                  "down_kbps": 10000, "up_kbps": 10000}]}
            remote = {"name": f"R{tag}", "isps": [{"name": "Uni", "label": "U",
                                                   "down_kbps": 10000, "up_kbps": 10000}]}
            with httpx.Client(base_url=base, timeout=10,
                              headers={"Authorization": f"Bearer {token}"}) as c:
                topology_id = post_topology(c, None, local, remote)["id"]
                r = c.put(f"/topologies/{topology_id}/schedule",
                          json={"cron": _yearly(), "parameters": {"runs": 1, "ccs": ["reno"]}})
                assert r.status_code == 200, r.text
                first = wait_for(holder, 10, "the lease")
                assert _parent_pid(_pid_of(first)) == proc.pid  # one of the two workers
                _come_due(engine, topology_id)
                wait_for(lambda: _scheduled(c, topology_id), 15, "the due time")
                samples = set()
                for _ in range(8):  # both workers go on ticking: nothing more, no other holder
                    samples.add(holder())
                    time.sleep(0.5)
                assert samples == {first}
                assert len(_scheduled(c, topology_id)) == 1
        finally:
            engine.dispose()
            stop_group(proc, grace_s=30)

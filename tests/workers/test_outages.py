"""Database and broker restarts under load, against a private PostgreSQL and a private Redis that
this test starts itself (never the machine's shared ones): no acknowledged write lost or
duplicated, and the API and the worker recover without being restarted."""

from __future__ import annotations

import os
import subprocess
import threading
import time
from collections import Counter
from pathlib import Path

import httpx
import pytest

from service.algorithm.topology import TopologySpec
from service.db import make_engine, session_scope
from service.flows.campaign.dispatch import start_campaign
from service.flows.campaign.plan import CampaignParameters
from service.settings import Settings
from service.store import campaigns, inventory
from tests.builders import site
from tests.private_servers import PrivatePostgres, PrivateRedis
from tests.support import free_port, listening, wait_for

from .conftest import BIN, site_names, topology_body

pytestmark = [pytest.mark.postgres, pytest.mark.broker]


@pytest.fixture
def private_pg():
    pg = PrivatePostgres()
    try:
        pg.start()
        yield pg
    finally:
        pg.destroy()


@pytest.fixture
def private_redis():
    r = PrivateRedis()
    try:
        r.start()
        yield r
    finally:
        r.destroy()


def _serve(url: str, tmp: Path):
    """`mpcoa serve` against the private database, and a write token."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MPCOA_")}
    port = free_port()
    env.update({"MPCOA_DATABASE_URL": url, "MPCOA_DATA_DIR": str(tmp), "MPCOA_PORT": str(port),
                "MPCOA_RUN_CAMPAIGNS": "false"})
    token = subprocess.run([str(BIN / "mpcoa"), "token", "create", "outage"], env=env,
                           capture_output=True, text=True, timeout=120, check=True).stdout.strip()
    log = open(tmp / "serve.log", "w")  # noqa: SIM115
    proc = subprocess.Popen([str(BIN / "mpcoa"), "serve"], env=env, stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)
    wait_for(lambda: listening(port), 60, "the API to listen")
    return proc, f"http://127.0.0.1:{port}", token


def test_a_database_restart_under_load_loses_and_duplicates_nothing(private_pg, tmp_path):
    proc, base, token = _serve(private_pg.url, tmp_path)
    restarted = threading.Event()
    restart_times: dict[str, float] = {}

    def restart() -> None:  # while the load goes on
        time.sleep(4)
        private_pg.stop()
        time.sleep(3)
        private_pg.start()
        restart_times["up"] = time.monotonic()
        restarted.set()

    outage = threading.Thread(target=restart)
    try:
        outage.start()
        statuses, acknowledged, pending, stored = _load(base, token, restarted, restart_times)
    finally:
        outage.join(60)
        os.killpg(proc.pid, 15)
        proc.wait(timeout=30)
    names = Counter(s["name"] for s in stored)
    recovered = restart_times.get("first_ok", float("nan")) - restart_times["up"]
    print(f"requests by status: {dict(statuses)}; recovered {recovered:.2f} s after the "
          f"restart; {len(acknowledged)} acknowledged, {len(names)} stored")
    assert statuses[500] == 0  # a refused write is 503, never 500
    # the load ran on both sides of the restart (counts, not a rate: a busy machine is slower)
    assert restart_times["acked_before"] > 0 and restart_times["acked_after"] > 0, restart_times
    assert sum(v for k, v in statuses.items() if k not in (201, 409)) > 0  # the outage was hit
    assert recovered < 10
    assert all(names[n] == 1 for n in acknowledged)  # nothing acknowledged was lost
    assert max(names.values()) == 1  # nothing duplicated
    assert not pending  # every refused write went through once the database was back


def _load(base, token, restarted, restart_times):
    """POST /sites with new names for 16 s at about 20 requests/s; a refused write is sent
    again (a client's retry) once the database is back."""
    statuses: Counter = Counter()
    acknowledged: list[str] = []
    pending: list[str] = []
    with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {token}"},
                      timeout=10) as client:
        start, k = time.monotonic(), 0
        while time.monotonic() - start < 16 or (pending and time.monotonic() - start < 40):
            if pending and restarted.is_set():
                name = pending.pop(0)
            else:
                name, k = f"Out{k}", k + 1
            try:
                r = client.post("/sites", json=site(name, [("Uni", "U", 1e4, 1e4)]))
                statuses[r.status_code] += 1
                ok = r.status_code in (201, 409)  # 409: an earlier try of it was stored
            except httpx.HTTPError:
                statuses["no answer"] += 1
                ok = False
            if ok:
                acknowledged.append(name)
                after = restarted.is_set()
                key = "acked_after" if after else "acked_before"
                restart_times[key] = restart_times.get(key, 0) + 1
                if after:
                    restart_times.setdefault("first_ok", time.monotonic())
            else:
                pending.append(name)
            time.sleep(0.05)
        stored = client.get("/sites", params={"limit": 500}).json()["items"]
    return statuses, acknowledged, pending, stored


def test_a_broker_restart_needs_no_worker_restart(committed_db, private_redis, tmp_path):
    """The worker keeps its connection attempts going while Redis is down and consumes what is
    sent after it is back (here a campaign whose sites have no testbed: it fails, and says so)."""
    local, remote = site_names()
    env = {k: v for k, v in os.environ.items() if not k.startswith("MPCOA_")}
    env.update({"MPCOA_DATABASE_URL": committed_db, "MPCOA_BROKER_URL": private_redis.url,
                "MPCOA_DATA_DIR": str(tmp_path)})
    log = open(tmp_path / "worker.log", "w")  # noqa: SIM115
    worker = subprocess.Popen([str(BIN / "mpcoa"), "worker", "--site", local], env=env,
                              stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    settings = Settings(database_url=committed_db, broker_url=private_redis.url,
                        data_dir=tmp_path, _env_file=None)
    engine = make_engine(committed_db)
    try:
        # Celery logs "ready." once it consumes from the broker
        wait_for(lambda: " ready." in (tmp_path / "worker.log").read_text(), 60,
                 "the worker to log that it is ready")
        private_redis.stop()
        time.sleep(3)
        private_redis.start()
        restarted = time.monotonic()
        with session_scope(engine) as s:
            topo = inventory.ensure_topology(
                s, spec=TopologySpec.model_validate(topology_body(local, remote)))
            cid = start_campaign(s, topology_id=topo.id, params=CampaignParameters(runs=1),
                                 reason="outage-test", settings=settings).id

        def failed():
            with session_scope(engine) as s:
                c = campaigns.get_campaign(s, campaign_id=cid)
                return c if c.state == "failed" else None

        c = wait_for(failed, 90, "the worker to take the campaign after the broker restart")
        print(f"worker consumed the hand-over {time.monotonic() - restarted:.1f} s after the "
              "broker restart")
        assert "no running testbed" in c.error
    finally:
        os.killpg(worker.pid, 15)
        worker.wait(timeout=30)
        engine.dispose()

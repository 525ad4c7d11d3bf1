"""Fixtures for campaigns run for real: a committed PostgreSQL database, a Redis broker database,
an emulated testbed, and real Celery workers in their own process groups; all torn down even
when a test fails."""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from probes.netns import list_netns
from probes.testbed import lifecycle as tbmod
from probes.testbed.spec import parse_spec
from service.algorithm.topology import TopologySpec
from service.db import make_engine, session_scope, upgrade
from service.store.inventory import ensure_topology
from tests.conftest import REDIS_HOST, migrated_database, redis_database
from tests.processes import kill_group, stop_group, tail_logs

BIN = Path(sys.executable).parent


def site_names() -> tuple[str, str]:
    tag = secrets.token_hex(3)
    return f"Lo{tag}", f"Re{tag}"


def testbed_spec(name: str, local: str, remote: str):
    """2 x 1: a fast and a slow uplink to one receiver ISP; 2 subflows."""
    return parse_spec({
        "name": name,
        "sites": [
            {"name": local, "isps": [
                {"name": "Fiber", "label": "F", "down_kbps": 12000, "up_kbps": 12000},
                {"name": "Adsl", "label": "A", "down_kbps": 8000, "up_kbps": 3000}]},
            {"name": remote, "isps": [
                {"name": "Uni", "label": "U", "down_kbps": 20000, "up_kbps": 20000}]},
        ],
        "defaults": {"delay_ms": 10},
        "paths": {"A-U": {"delay_ms": 40}},
    })


def topology_body(local: str, remote: str) -> dict:
    return {
        "local": {"name": local, "isps": [
            {"name": "Fiber", "label": "F", "down_kbps": 12000, "up_kbps": 12000},
            {"name": "Adsl", "label": "A", "down_kbps": 8000, "up_kbps": 3000}]},
        "remote": {"name": remote, "isps": [
            {"name": "Uni", "label": "U", "down_kbps": 20000, "up_kbps": 20000}]},
    }


@pytest.fixture(scope="module")
def committed_db() -> Iterator[str]:
    """A database of its own whose rows are really committed (workers are other processes)."""
    with migrated_database("mpcoa_wk") as url:
        yield url


@pytest.fixture(scope="module")
def broker_url() -> Iterator[str]:
    """A Redis database number of its own, emptied afterwards."""
    with redis_database() as index:
        yield f"redis://{REDIS_HOST}:6379/{index}"


@pytest.fixture(scope="module")
def sites() -> tuple[str, str]:
    return site_names()


@pytest.fixture(scope="module")
def testbed(sites) -> Iterator[tbmod.Testbed]:
    name = f"w{secrets.token_hex(3)}"
    try:
        yield tbmod.up(testbed_spec(name, *sites))
    finally:
        tbmod.down(name)
        assert not [n for n in list_netns() if n.startswith(f"mpcoa-{name}-")]


def worker_env(database_url: str, broker: str, tmp: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MPCOA_")}
    env.update({
        "MPCOA_DATABASE_URL": database_url,
        "MPCOA_BROKER_URL": broker,
        "MPCOA_DATA_DIR": str(tmp),
        "MPCOA_BROKER_VISIBILITY_TIMEOUT_S": "8",
        "MPCOA_PROBE_RETRY_BACKOFF_S": "0.2",
        **extra,
    })
    return env


class Workers:
    """Real `mpcoa worker` processes, each in its own process group (killed as a whole)."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.procs: list[subprocess.Popen] = []

    def start(self, site: str, env: dict[str, str]) -> subprocess.Popen:
        log = open(self.tmp / f"worker-{len(self.procs)}.log", "w")  # noqa: SIM115
        proc = subprocess.Popen(
            [str(BIN / "mpcoa"), "worker", "--site", site], env=env, stdout=log,
            stderr=subprocess.STDOUT, start_new_session=True)
        self.procs.append(proc)
        return proc

    def start_control(self, env: dict[str, str]) -> subprocess.Popen:
        """The control host's worker: `mpcoa worker` with no --site."""
        log = open(self.tmp / f"worker-control-{len(self.procs)}.log", "w")  # noqa: SIM115
        proc = subprocess.Popen([str(BIN / "mpcoa"), "worker"], env=env, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
        self.procs.append(proc)
        return proc

    def start_beat(self, env: dict[str, str]) -> subprocess.Popen:
        log = open(self.tmp / f"worker-beat-{len(self.procs)}.log", "w")  # noqa: SIM115
        proc = subprocess.Popen([str(BIN / "mpcoa"), "beat"], env=env, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
        self.procs.append(proc)
        return proc

    def kill(self, proc: subprocess.Popen, sig: int = signal.SIGKILL) -> None:
        kill_group(proc, sig)

    def stop_all(self) -> None:
        for proc in self.procs:
            stop_group(proc)

    def logs(self) -> str:
        return tail_logs(self.tmp, "worker-*.log")


@pytest.fixture
def worker_launcher(tmp_path) -> Iterator[Workers]:
    w = Workers(tmp_path)
    try:
        yield w
    finally:
        w.stop_all()


def embedded_database(sites, tmp_path) -> tuple[int, dict[str, str]]:
    """A migrated SQLite file in tmp_path holding the sites' topology, and the environment the
    CLI runs with against it (no MPCOA_ setting of the caller's leaks in)."""
    url = f"sqlite:///{tmp_path / 'mpcoa.sqlite3'}"
    upgrade(url)
    engine = make_engine(url)
    with session_scope(engine) as s:
        topology_id = ensure_topology(s, spec=TopologySpec.model_validate(topology_body(*sites))).id
    engine.dispose()
    env = {k: v for k, v in os.environ.items() if not k.startswith("MPCOA_")}
    env.update({"MPCOA_DATABASE_URL": url, "MPCOA_DATA_DIR": str(tmp_path)})
    return topology_id, env

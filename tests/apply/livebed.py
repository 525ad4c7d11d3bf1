"""The apply tests' emulated 2 x 2 testbed and what they run against it: the sites' ISPs, an
embedded database holding an answer for it, and `mpcoa serve` on that database."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path

import httpx

from probes.testbed.spec import parse_spec
from service.algorithm.topology import TopologySpec
from tests.builders import site

SITES = {
    "A": [("U", 8000), ("K", 4000)],
    "B": [("C", 20000), ("D", 2000)],
}


def spec(name: str):
    """The testbed: sites A (U 8, K 4 Mbit/s) and B (C 20, D 2), 10 ms per path."""
    return parse_spec({"name": name, "sites": [site("A", SITES["A"]), site("B", SITES["B"])],
                       "defaults": {"delay_ms": 10}})


def topology() -> TopologySpec:
    return TopologySpec.model_validate(
        {"local": site("A", SITES["A"]), "remote": site("B", SITES["B"])})


def stored_answer(tmp_path: Path, bed) -> tuple[int, str, dict]:
    """A SQLite database with the testbed's topology and an answer that uses U (U-C, U-D)
    with K standing by, a write token, and the environment `mpcoa` runs with against it."""
    from service.db import make_engine, session_scope, upgrade
    from service.store import tokens
    from service.store.inventory import ensure_topology
    from tests.apply.measured import measured_answer

    url = f"sqlite:///{tmp_path / 'mpcoa.sqlite3'}"
    upgrade(url)
    engine = make_engine(url)
    with session_scope(engine) as s:
        tid = ensure_topology(s, spec=topology()).id
        measured_answer(s, tid, outputs={"subflows_used": ["U-C", "U-D"],
                                         "standby_subflows": ["K-C", "K-D"]})
        token = tokens.create_token(s, name=f"live{secrets.token_hex(3)}")
    engine.dispose()
    env = {k: v for k, v in os.environ.items() if not k.startswith("MPCOA_")}
    env.update({"MPCOA_DATABASE_URL": url, "MPCOA_DATA_DIR": str(tmp_path),
                "MPCOA_TESTBED": bed.name, "MPCOA_APPLY_STATE": str(tmp_path / "apply")})
    return tid, token, env


def serve(env: dict, tmp_path: Path, port: int) -> subprocess.Popen:
    """`mpcoa serve` on `port` in a process group of its own, its output in tmp_path."""
    log = open(tmp_path / f"serve-{port}.log", "w")  # noqa: SIM115 -- the server's, until it ends
    return subprocess.Popen([str(Path(sys.executable).parent / "mpcoa"), "serve", "--port",
                             str(port)], env=env, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)


def up(port: int, proc: subprocess.Popen) -> bool:
    """The server answers /health (it must not have exited meanwhile)."""
    assert proc.poll() is None, "mpcoa serve exited"
    try:
        return httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200
    except httpx.TransportError:
        return False

"""The embedded default: `mpcoa serve` with no configuration, on SQLite, no server needed.

The one SQLite smoke run of the API: a real uvicorn process, a token made by the CLI, a site,
a topology, a provisional recommendation and its queued campaign.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from alembic.script import ScriptDirectory

from service import db
from tests.support import SERVE_START_S, free_port, wait_for

from .conftest import HU as PAPER_HU
from .conftest import SRL as PAPER_SRL

pytestmark = pytest.mark.slow  # starts server processes or subprocesses (docs/testing.md)

# The paper's sites under names of this module's own: an SRL-HU testbed that happens to be up on
# the host (a benchmark's) must not be the one this campaign finds.
_TAG = os.urandom(2).hex()
SRL = {**PAPER_SRL, "name": f"SRL{_TAG}"}
HU = {**PAPER_HU, "name": f"HU{_TAG}"}

BIN = Path(sys.executable).parent


def _clean_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MPCOA_")}
    env.update({"HOME": str(home), "XDG_DATA_HOME": str(home / "data")})
    return env


def test_serve_with_no_configuration_uses_sqlite(tmp_path):
    env = _clean_env(tmp_path)
    token = subprocess.run([str(BIN / "mpcoa"), "token", "create", "smoke"], env=env, cwd=tmp_path,
                           capture_output=True, text=True, timeout=120, check=True).stdout.strip()
    assert token.startswith("mpcoa_")
    db_file = tmp_path / "data" / "mpcoa" / "mpcoa.sqlite3"
    assert db_file.exists()
    port = free_port()
    proc = subprocess.Popen([str(BIN / "mpcoa"), "serve", "--port", str(port)], env=env,
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        base = f"http://127.0.0.1:{port}"

        def health():
            try:
                return httpx.get(f"{base}/health", timeout=2)
            except httpx.TransportError:
                assert proc.poll() is None, proc.stdout.read().decode()
                return None

        health = wait_for(health, SERVE_START_S, "mpcoa serve to answer")
        assert health.json() == {"status": "ok", "database": "sqlite", "executor": "inprocess",
                                 "reads_need_token": False}
        auth = {"Authorization": f"Bearer {token}"}
        with httpx.Client(base_url=base, headers=auth, timeout=10) as c:
            assert c.post("/sites", json=SRL).status_code == 201
            r = c.post("/recommendations", json={"topology": {"local": SRL, "remote": HU}})
            assert r.status_code == 202, r.text
            rec = r.json()
            assert rec["opm"] == "PCDC" and rec["provisional"]
            campaign = c.get(rec["poll_url"]).json()
            assert campaign["executor"] == "inprocess"
            # The embedded executor takes it at once; with no testbed for SRL/HU it cannot run
            # and says so (tests/workers run campaigns on a real testbed).
            campaign = wait_for(
                lambda: (x := c.get(rec["poll_url"]).json())["state"] not in ("queued", "running")
                and x, 30, "the campaign to end")
            assert campaign["state"] == "failed"
            assert (f"no running testbed has the sites {SRL['name']!r} and {HU['name']!r}"
                    in campaign["error"])
            assert c.get("/recommendations").json()["total"] == 1
            assert c.get("/sites/999").status_code == 404
            assert c.post("/sites", json=SRL).status_code == 409
            bad = c.post("/sites", json={**SRL, "isps": [{"label": "x"}]})
            assert bad.status_code == 422
    finally:
        proc.terminate()
        proc.wait(timeout=20)
    # The schema can be taken down and up again through the CLI.
    for args in (["db", "downgrade", "base"], ["db", "upgrade"], ["db", "current"]):
        out = subprocess.run([str(BIN / "mpcoa"), *args], env=env, cwd=tmp_path,
                             capture_output=True, text=True, timeout=120, check=False)
        assert out.returncode == 0, out.stderr
    head = ScriptDirectory.from_config(db.alembic_config("sqlite://")).get_current_head()
    assert out.stdout.strip() == head

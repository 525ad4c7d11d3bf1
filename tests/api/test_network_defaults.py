"""Safe on the network by default: reads need a token whenever the server listens beyond loopback
(whatever the database), the API answers only the Host names it is known by (DNS rebinding),
and the image's own command serves nothing without a token."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from service.settings import Settings
from tests.support import SERVE_START_S, free_port, wait_for

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


@pytest.fixture
def no_env(monkeypatch):
    for key in [k for k in os.environ if k.startswith("MPCOA_")]:
        monkeypatch.delenv(key)


@pytest.mark.parametrize(("host", "need"), [
    ("127.0.0.1", False), ("localhost", False), ("::1", False), ("127.0.0.2", False),
    ("0.0.0.0", True), ("::", True), ("192.0.2.10", True), ("control.example.net", True),
])
def test_reads_need_a_token_whenever_the_server_listens_beyond_loopback(no_env, tmp_path,
                                                                        host, need):
    embedded = Settings(data_dir=tmp_path, host=host, _env_file=None)
    assert embedded.is_single_host  # a SQLite file, no broker: the embedded kind
    assert embedded.reads_need_token is need
    # an explicit setting still decides (mpcoa serve warns on a public address)
    assert Settings(data_dir=tmp_path, host=host, reads_need_token=False,
                    _env_file=None).reads_need_token is False


def test_the_allowed_hosts_setting_is_checked(no_env, tmp_path):
    s = Settings(data_dir=tmp_path, allowed_hosts=" mpcoa.example.org,*.lab.example, [2001:db8::1]",
                 _env_file=None)
    assert s.trusted_hosts[-3:] == ["mpcoa.example.org", "*.lab.example", "[2001:db8::1]"]
    assert Settings(data_dir=tmp_path, host="192.0.2.10", _env_file=None).trusted_hosts[-1] \
        == "192.0.2.10"
    for bad in ("evil.example/x", "a b", "*evil.example", "exa_mple.org"):
        with pytest.raises(ValueError, match="is not a host name"):
            Settings(data_dir=tmp_path, allowed_hosts=bad, _env_file=None)


@pytest.fixture
def loopback_api(no_env, database_url, tmp_path):
    """The embedded server on loopback, its reads open (the demo), one site stored."""
    def client(**settings) -> TestClient:
        app = create_app(Settings(database_url=database_url, data_dir=tmp_path,
                                  run_campaigns=False, _env_file=None, **settings))
        return TestClient(app, base_url="http://localhost", raise_server_exceptions=False)

    return client


def test_a_rebound_name_reads_nothing(loopback_api):
    """A web page the local user opens, whose name now resolves to 127.0.0.1, sends its own
    name as Host: 400 before any route runs (the sites, a campaign's bundle)."""
    with loopback_api() as c:
        assert c.get("/health").json()["reads_need_token"] is False
        for path in ("/sites", "/campaigns/1/bundle", "/dashboard/", "/openapi.json"):
            r = c.get(path, headers={"Host": "rebind.example.net"})
            assert r.status_code == 400 and r.text == "Invalid host header", path
            r = c.get(path, headers={"Host": "rebind.example.net:8000"})
            assert r.status_code == 400, path
        for host in ("localhost", "localhost:8000", "127.0.0.1:8000", "[::1]:8000"):
            assert c.get("/sites", headers={"Host": host}).status_code == 200, host


def test_a_configured_name_is_answered(loopback_api):
    with loopback_api(allowed_hosts="control.example.net") as c:
        assert c.get("/sites", headers={"Host": "control.example.net"}).status_code == 200
        assert c.get("/sites", headers={"Host": "other.example.net"}).status_code == 400


def _dockerfile_command() -> list[str]:
    """The image's CMD, as the Dockerfile gives it (a JSON list)."""
    line = next(x for x in (REPO / "Dockerfile").read_text().splitlines()
                if x.startswith("CMD "))
    return json.loads(line.removeprefix("CMD "))


@pytest.mark.slow
def test_the_images_command_serves_nothing_without_a_token(tmp_path):
    """`docker run -p 8000:8000 mpcoa`: the image's own command, with the image's settings (the
    embedded default: no database or broker set), listening on every address. It is started
    here on a port of its own, and asked over loopback only."""
    argv = _dockerfile_command()
    assert argv[:2] == ["mpcoa", "serve"] and argv[argv.index("--host") + 1] == "0.0.0.0"
    assert not re.search(r"MPCOA_READS_NEED_TOKEN", (REPO / "Dockerfile").read_text())
    port = free_port()
    argv = [str(BIN / "mpcoa"), *argv[1:]]
    argv[argv.index("--port") + 1] = str(port)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MPCOA_")}
    env.update({"HOME": str(tmp_path), "XDG_DATA_HOME": str(tmp_path / "data"),
                "MPCOA_RUN_CAMPAIGNS": "false"})
    token = subprocess.run([str(BIN / "mpcoa"), "token", "create", "reader", "--scope", "read"],
                           env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120,
                           check=True).stdout.strip()
    proc = subprocess.Popen(argv, env=env, cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        def health():
            try:
                return httpx.get(f"{base}/health", timeout=2)
            except httpx.TransportError:
                assert proc.poll() is None, proc.stdout.read()
                return None

        assert wait_for(health, SERVE_START_S, "the image's command to answer").json()[
            "reads_need_token"] is True
        for path in ("/sites", "/campaigns/1/bundle", "/openapi.json", "/measurements"):
            assert httpx.get(base + path, timeout=5).status_code == 401, path
        auth = {"Authorization": f"Bearer {token}"}
        assert httpx.get(f"{base}/sites", headers=auth, timeout=5).status_code == 200
        rebound = {**auth, "Host": "rebind.example.net"}
        assert httpx.get(f"{base}/sites", headers=rebound, timeout=5).status_code == 400
    finally:
        proc.terminate()
        proc.communicate(timeout=30)

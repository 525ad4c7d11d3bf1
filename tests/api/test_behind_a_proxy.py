"""The dashboard's login behind a TLS-terminating proxy, on a real `mpcoa serve`: the proxy
(here: connections from 127.0.0.2, named in MPCOA_FORWARDED_ALLOW_IPS) says https in
X-Forwarded-Proto, so the browser's https Origin is accepted and the cookie is Secure; the same
headers from an address not named are not believed. Logging out ends the session on the server:
a copy of the cookie no longer opens anything."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from pydantic import ValidationError

from service.settings import Settings
from tests.processes import stop_group
from tests.support import SERVE_START_S, free_port, wait_for

pytestmark = pytest.mark.slow  # starts server processes or subprocesses (docs/testing.md)

BIN = Path(sys.executable).parent
PROXY, STRANGER = "127.0.0.2", "127.0.0.1"


@pytest.fixture
def served(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("MPCOA_")}
    env.update({"HOME": str(tmp_path), "XDG_DATA_HOME": str(tmp_path / "data"),
                "MPCOA_READS_NEED_TOKEN": "true", "MPCOA_RUN_CAMPAIGNS": "false",
                "MPCOA_EMBEDDED_SCHEDULER": "false", "MPCOA_FORWARDED_ALLOW_IPS": PROXY,
                "MPCOA_ALLOWED_HOSTS": "mpcoa.example"})  # the name the proxy is reached by
    token = subprocess.run([str(BIN / "mpcoa"), "token", "create", "browser"], env=env,
                           cwd=tmp_path, capture_output=True, text=True, timeout=120,
                           check=True).stdout.strip()
    port = free_port()
    proc = subprocess.Popen([str(BIN / "mpcoa"), "serve", "--port", str(port)], env=env,
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)
    try:
        def up():
            try:
                return httpx.get(f"http://127.0.0.1:{port}/dashboard/login", timeout=2).is_success
            except httpx.TransportError:
                assert proc.poll() is None, proc.stdout.read().decode()
                return False

        wait_for(up, SERVE_START_S, "mpcoa serve to answer")
        yield port, token
    finally:
        stop_group(proc)


def _client(port: int, source: str) -> httpx.Client:
    """A client as the proxy (or a stranger) connects: from `source`, for the public https
    name the browser used."""
    return httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10,
                        transport=httpx.HTTPTransport(local_address=source),
                        headers={"Host": "mpcoa.example", "X-Forwarded-Proto": "https",
                                 "X-Forwarded-For": "198.51.100.7"})


def _login(c: httpx.Client, token: str) -> httpx.Response:
    return c.post("/dashboard/login", data={"token": token, "next": "/dashboard/"},
                  headers={"Origin": "https://mpcoa.example"})


def _with(cookie: str) -> dict[str, str]:
    """The cookie as the browser sends it back over https (httpx keeps a Secure cookie from
    this plain-http hop to the server, as it should)."""
    return {"Cookie": f"mpcoa_session={cookie}"}


def test_login_through_a_trusted_proxy_sets_a_secure_cookie(served):
    port, token = served
    with _client(port, PROXY) as proxy:
        r = _login(proxy, token)
        assert r.status_code == 303, r.text
        cookie = r.headers["set-cookie"]
        assert "; Secure" in cookie and "HttpOnly" in cookie, cookie
        assert proxy.get("/sites", headers=_with(r.cookies["mpcoa_session"])).status_code == 200
    # The same headers from an address that is not the proxy are not believed: plain http, so
    # the https Origin is another site's.
    with _client(port, STRANGER) as stranger:
        r = _login(stranger, token)
        assert r.status_code == 403 and "set-cookie" not in r.headers


def test_logout_ends_the_session_for_every_copy_of_the_cookie(served):
    port, token = served
    with _client(port, PROXY) as browser:
        r = _login(browser, token)
        assert r.status_code == 303
        copied = r.cookies["mpcoa_session"]
        assert browser.get("/sites", headers=_with(copied)).status_code == 200
        r = browser.post("/dashboard/logout",
                         headers={"Origin": "https://mpcoa.example", **_with(copied)})
        assert r.status_code == 303 and 'mpcoa_session=""' in r.headers["set-cookie"]
    with _client(port, PROXY) as thief:
        assert thief.get("/sites", headers=_with(copied)).status_code == 401
        assert thief.get("/dashboard/", headers=_with(copied)).status_code == 303  # to the login
        # a fresh login still works, with a session of its own
        r = _login(thief, token)
        assert r.status_code == 303 and r.cookies["mpcoa_session"] != copied
        assert thief.get("/sites", headers=_with(r.cookies["mpcoa_session"])).status_code == 200


def test_proxy_addresses_are_checked():
    ok = Settings(forwarded_allow_ips=" 10.1.2.3/8, 192.0.2.1 ,::1", _env_file=None)
    assert ok.forwarded_allow_ips == "10.0.0.0/8,192.0.2.1,::1"
    assert Settings(forwarded_allow_ips="*", _env_file=None).forwarded_allow_ips == "*"
    for bad in ("proxy.example", "10.0.0.300", "10.0.0.1/33", "127.0.0.1;rm"):
        with pytest.raises(ValidationError, match="not an IP address or network"):
            Settings(forwarded_allow_ips=bad, _env_file=None)

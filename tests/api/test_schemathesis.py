"""Property-based run of every operation in the published OpenAPI document against the real
server (`mpcoa serve` in a process of its own, the embedded default: a SQLite file, reads open
on loopback), once with a write token and once with none: no input may give a 5xx, and every
response (status, content type, body) must be one the document promises.

Bounded for CI: a few examples per operation (MAX_EXAMPLES), derandomized, so one run takes well
under two minutes on a busy machine. Campaigns are queued and never run (MPCOA_RUN_CAMPAIGNS
false): a run of one would probe for minutes, and tests/workers run them.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.support import SERVE_START_S, free_port, wait_for

pytestmark = pytest.mark.slow  # a server process

BIN = Path(sys.executable).parent
MAX_EXAMPLES = 12
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance,
          response_schema_conformance]


class Server:
    def __init__(self, base: str, token: str) -> None:
        self.base, self.token = base, token


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[Server]:
    home = tmp_path_factory.mktemp("schemathesis")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MPCOA_")}
    env.update({"HOME": str(home), "XDG_DATA_HOME": str(home / "data"),
                "MPCOA_RUN_CAMPAIGNS": "false", "MPCOA_ENV_FILE": os.devnull})
    token = subprocess.run([str(BIN / "mpcoa"), "token", "create", "fuzz"], env=env, cwd=home,
                           capture_output=True, text=True, timeout=120,
                           check=True).stdout.strip()
    port = free_port()
    log = open(home / "serve.log", "w")  # noqa: SIM115  (closed below)
    proc = subprocess.Popen([str(BIN / "mpcoa"), "serve", "--port", str(port),
                             "--no-access-log", "--log-level", "warning"], env=env, cwd=home,
                            stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        def up():
            assert proc.poll() is None, (home / "serve.log").read_text()
            try:
                return httpx.get(f"{base}/health", timeout=2).status_code == 200
            except httpx.TransportError:
                return False

        wait_for(up, SERVE_START_S, "mpcoa serve to answer")
        yield Server(base, token)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()
        tail = (home / "serve.log").read_text()
        assert "Traceback" not in tail, tail[-4000:]  # no request ended in an unhandled error


@pytest.fixture(scope="module")
def api_schema(server):
    return schemathesis.openapi.from_url(f"{server.base}/openapi.json")


schema = schemathesis.pytest.from_fixture("api_schema")
bounded = settings(max_examples=MAX_EXAMPLES, deadline=None, derandomize=True,
                   suppress_health_check=list(HealthCheck))


@schema.parametrize()
@bounded
def test_with_a_write_token(case, server):
    case.call_and_validate(headers={"Authorization": f"Bearer {server.token}"}, checks=CHECKS)


@schema.parametrize()
@bounded
def test_without_a_token(case):
    case.call_and_validate(checks=CHECKS)

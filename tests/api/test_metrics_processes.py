"""With PROMETHEUS_MULTIPROC_DIR, the answer-latency histogram of several API processes adds up
in any process's /metrics (prometheus_client's multiprocess mode); the row counts need nothing."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow  # starts server processes or subprocesses (docs/testing.md)

OBSERVE = """
from api.metrics import ANSWER_LATENCY
ANSWER_LATENCY.labels("cache").observe(0.004)
"""

SCRAPE = """
import sys
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families
from api.app import create_app
from service.db import upgrade
from service.settings import Settings

url = sys.argv[1]
upgrade(url)
app = create_app(Settings(database_url=url, run_campaigns=False, _env_file=None))
with TestClient(app, base_url="http://localhost") as c:
    text = c.get("/metrics").text
for f in text_string_to_metric_families(text):
    for s in f.samples:
        if s.name == "mpcoa_answer_latency_seconds_count" and s.labels == {"source": "cache"}:
            print("count", s.value)
        if s.name == "mpcoa_campaigns" and s.labels == {"state": "done"}:
            print("done", s.value)
"""


def test_the_latency_histogram_adds_up_over_processes(tmp_path):
    shared = tmp_path / "prom"
    shared.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("MPCOA_")}
    env.update({"PROMETHEUS_MULTIPROC_DIR": str(shared), "MPCOA_DATA_DIR": str(tmp_path)})
    for _ in range(3):  # three "API processes" answer once each
        subprocess.run([sys.executable, "-c", OBSERVE], env=env, check=True, timeout=120)
    out = subprocess.run(
        [sys.executable, "-c", SCRAPE, f"sqlite:///{tmp_path / 'm.sqlite3'}"], env=env,
        capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    assert "count 3.0" in out.stdout and "done 0.0" in out.stdout, out.stdout

"""`mpcoa worker` with no --site is the control host's worker (the control queue alone, node
control@HOST), and `mpcoa beat` keeps its schedule and pid file in MPCOA_DATA_DIR: what
docker-compose.yml and deploy/systemd/ start instead of raw `celery -A workers.app`."""

from __future__ import annotations

import os
import socket
import time

import pytest
from celery import Celery
from typer.testing import CliRunner

from cli.main import app as cli_app
from tests.support import wait_for
from tests.workers.conftest import worker_env


def test_no_site_and_no_control_is_refused():
    result = CliRunner().invoke(cli_app, ["worker", "--no-control"])
    assert result.exit_code == 2 and "--no-control needs a --site" in result.output


def test_a_bad_probe_port_range_stops_a_worker_at_its_start(monkeypatch):
    monkeypatch.setenv("MPCOA_ENV_FILE", "/nonexistent/.env")
    monkeypatch.setenv("MPCOA_PROBE_PORTS", "20000-20005")
    result = CliRunner().invoke(cli_app, ["worker", "--site", "SRL"])
    assert result.exit_code == 2, result.output
    assert "MPCOA_PROBE_PORTS:" in result.output and "fewer than the 16" in result.output


@pytest.mark.broker
def test_the_control_worker_serves_the_control_queue_only(broker_url, worker_launcher, tmp_path):
    env = worker_env("", broker_url, tmp_path)
    worker = worker_launcher.start_control(env)
    node = f"control@{socket.gethostname()}"
    inspect = Celery(broker=broker_url).control.inspect(destination=[node], timeout=2)
    queues: dict = {}

    def answered() -> bool:
        assert worker.poll() is None, worker_launcher.logs()
        queues.update(inspect.active_queues() or {})
        return node in queues

    wait_for(answered, 60, f"{node} to answer")
    assert [q["name"] for q in queues[node]] == ["mpcoa.control"]


@pytest.mark.broker
def test_beat_writes_its_pid_and_schedule_in_the_data_dir(broker_url, worker_launcher, tmp_path):
    data = tmp_path / "beat-data"  # made by `mpcoa beat`
    beat = worker_launcher.start_beat(worker_env("", broker_url, tmp_path,
                                                 MPCOA_DATA_DIR=str(data)))
    pidfile = data / "celerybeat.pid"

    def started() -> bool:
        assert beat.poll() is None, worker_launcher.logs()
        return pidfile.exists() and pidfile.read_text().strip().isdigit()

    wait_for(started, 60, "beat's pid file")
    assert int(pidfile.read_text()) == beat.pid  # what compose's health check signals
    os.kill(beat.pid, 0)
    time.sleep(1)
    assert list(data.glob("celerybeat-schedule*")), list(data.iterdir())

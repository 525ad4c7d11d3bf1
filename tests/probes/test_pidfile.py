"""A pidfile names one process by pid and start time: a stop never signals a process that
merely has the same pid (a recycled one), and does end the one it names."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from probes import pidfile

pytestmark = pytest.mark.slow  # processes of its own


def _sleeper() -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])


def test_a_stop_ends_the_named_process_and_never_a_recycled_pid(tmp_path):
    proc = _sleeper()
    path = tmp_path / "watcher.json"
    try:
        record = pidfile.write(path, proc.pid, apply_id=7, site="A")
        assert pidfile.read(path) == record and pidfile.alive(record)
        assert record["start_time"] == pidfile.start_time(proc.pid)

        # the same pid with another start time: what a pidfile left by a dead process reads
        # like once the kernel gave its pid to someone else
        path.write_text(json.dumps({**record, "start_time": record["start_time"] - 1}))
        assert not pidfile.alive(pidfile.read(path))
        stale = pidfile.stop(path, grace_s=2)
        assert stale["was_running"] is False and not path.exists()
        assert proc.poll() is None  # untouched

        pidfile.write(path, proc.pid)
        stopped = pidfile.stop(path, grace_s=10)
        assert stopped["was_running"] is True and not path.exists()
        assert proc.wait(10) == -15  # SIGTERM
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
    assert pidfile.stop(path) is None  # nothing named: nothing to do
    assert pidfile.start_time(proc.pid) is None or not pidfile.alive(record)

"""The passive side's server process: started without code between fork and exec, killed with
its worker, and ended later only when it is still the very process that was started."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from probes import pidfile
from probes.netns import pid_alive
from probes.tools import twosided as ts
from tests.support import free_port, wait_for

REPO = Path(__file__).resolve().parents[2]


def _kill(pid: int | None) -> None:
    if pid and pid_alive(pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def test_no_preexec_fn_anywhere() -> None:
    """A preexec_fn runs Python between fork and exec: unsafe in the threaded workers."""
    offenders = [str(p.relative_to(REPO)) for d in ("probes", "service", "workers", "api", "cli")
                 for p in (REPO / d).rglob("*.py") if "preexec_fn=" in p.read_text()]
    assert offenders == []


@pytest.mark.slow  # processes of its own
def test_the_server_dies_with_the_thread_that_started_it() -> None:
    """A worker (here a Python process starting the server from a thread, as Celery's threads
    do) that is SIGKILLed leaves no server: setpriv's PR_SET_PDEATHSIG reaches the exec'd tool,
    which leads its own process group (kill_leftover ends the group)."""
    script = textwrap.dedent("""
        import subprocess, sys, threading, time
        from probes.tools.twosided import die_with_parent
        def start():
            p = subprocess.Popen(die_with_parent(["sleep", "300"]), start_new_session=True)
            print(p.pid, flush=True)
            time.sleep(300)
        threading.Thread(target=start, daemon=True).start()
        time.sleep(300)
    """)
    parent = subprocess.Popen([sys.executable, "-c", script], cwd=REPO, stdout=subprocess.PIPE,
                              text=True)
    child = None
    try:
        child = int(parent.stdout.readline())
        wait_for(lambda: Path(f"/proc/{child}/cmdline").read_bytes().startswith(b"sleep\0"),
                 10, "setpriv to exec the tool")
        assert os.getpgid(child) == child and os.getsid(child) == child
        parent.kill()
        parent.wait()
        wait_for(lambda: not pid_alive(child), 10, "the server to die with its worker")
    finally:
        parent.kill()
        parent.wait()
        _kill(child)


@pytest.fixture
def iperf3_server():
    proc = subprocess.Popen(["iperf3", "-s", "-1", "-p", str(free_port())],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        wait_for(lambda: pidfile.start_time(proc.pid) is not None, 5, "iperf3 to start")
        yield proc
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.slow  # processes of its own
def test_kill_leftover_ends_the_server_it_names(iperf3_server) -> None:
    identity = ts.server_identity(iperf3_server.pid)
    assert ts.kill_leftover(identity) is True
    assert iperf3_server.wait(timeout=10) == -signal.SIGKILL


@pytest.mark.slow  # processes of its own
def test_kill_leftover_spares_a_process_that_got_the_pid_since(iperf3_server) -> None:
    """The database names a pid whose server died; the kernel gave the pid to another process
    since (here: an iperf3 of somebody else, started at another time): it lives on."""
    identity = ts.server_identity(iperf3_server.pid)
    for stale in ({**identity, "start_time": identity["start_time"] - 7},
                  {**identity, "boot_id": "another-boot-or-host"},
                  {**identity, "start_time": None},
                  {"pid": iperf3_server.pid}, None, {"pid": "1"}, {"pid": 1}):
        assert ts.kill_leftover(stale) is False, stale
    assert iperf3_server.poll() is None


@pytest.mark.slow  # processes of its own
def test_kill_leftover_spares_a_process_that_is_not_a_server() -> None:
    proc = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        wait_for(lambda: pidfile.start_time(proc.pid) is not None, 5, "sleep to start")
        assert ts.kill_leftover(ts.server_identity(proc.pid)) is False
        assert proc.poll() is None
    finally:
        proc.kill()
        proc.wait()

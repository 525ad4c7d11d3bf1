"""`mpcoa testbed cc unload` refuses while a running probe or a socket uses the control, and
says what does; a probe that died holds nothing."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from probes import cc_users, pidfile
from probes.bpf import cc as bpf_cc
from tests.support import host_lock

BIN = Path(sys.executable).parent
REPO = Path(__file__).resolve().parents[2]
TCP_CONGESTION = 13


def test_a_probe_holds_its_controls_while_it_runs(monkeypatch, tmp_path):
    monkeypatch.setattr(cc_users, "REGISTRY", tmp_path / "users")
    with cc_users.using(["vegas", "olia"], "probe A->B on testbed t"):
        assert cc_users.probe_users(["vegas"]) == [
            f"probe A->B on testbed t (pid {os.getpid()}) uses vegas"]
        assert cc_users.probe_users(["hybla"]) == []
    assert cc_users.probe_users(["vegas"]) == [] and not list((tmp_path / "users").iterdir())


def test_a_dead_probes_file_counts_for_nothing(monkeypatch, tmp_path):
    """A probe SIGKILLed mid-run leaves its file; its pid, reused or not, is not the same
    process (start time), so the file is no user and goes."""
    monkeypatch.setattr(cc_users, "REGISTRY", tmp_path)
    me = pidfile.start_time(os.getpid())
    stale = tmp_path / "1-dead.json"
    stale.write_text(json.dumps({"pid": os.getpid(), "start_time": me - 1,
                                 "ccs": ["vegas"], "what": "a killed probe"}))
    assert cc_users.probe_users(["vegas"]) == [] and not stale.exists()


@pytest.fixture
def vegas():
    """vegas registered by this test (host-wide, under the lock every BPF test takes)."""
    with host_lock("congestion-controls", exclusive=True):
        loaded = bpf_cc.load(["vegas"])
        try:
            yield
        finally:
            bpf_cc.unload(["vegas"], map_ids=loaded)


def _unload() -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / "mpcoa"), "testbed", "cc", "unload", "vegas"],
                          capture_output=True, text=True, timeout=120, check=False)


@pytest.mark.netns
def test_unload_refuses_while_a_probe_or_a_socket_uses_it(vegas):
    if "vegas" not in bpf_cc.ours():
        pytest.fail("vegas is this kernel's own or someone else's: nothing of ours to unload")
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent("""
        import sys, time
        from probes import cc_users
        with cc_users.using(["vegas"], "probe SRL->HU on testbed t9"):
            print("held", flush=True)
            time.sleep(120)
    """)], cwd=REPO, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        cp = _unload()
        assert cp.returncode == 2, cp.stdout + cp.stderr
        assert f"probe SRL->HU on testbed t9 (pid {holder.pid}) uses vegas" in cp.stderr
        assert "vegas" in bpf_cc.available()
    finally:
        holder.send_signal(signal.SIGKILL)  # a killed probe: its file stays, and counts not
        holder.wait()
    listener = socket.create_server(("127.0.0.1", 0))
    client = socket.socket()
    try:
        client.setsockopt(socket.IPPROTO_TCP, TCP_CONGESTION, b"vegas")
        client.connect(listener.getsockname())
        server_side, _ = listener.accept()
        cp = _unload()
        assert cp.returncode == 2 and "1 TCP socket in this host uses vegas" in cp.stderr, (
            cp.stdout + cp.stderr)
        server_side.close()
    finally:
        client.close()
        listener.close()
    cp = _unload()  # nothing uses it any more (a closing socket may linger: wait for it)
    for _ in range(20):
        if cp.returncode == 0:
            break
        time.sleep(0.5)
        cp = _unload()
    assert cp.returncode == 0 and "unloaded: vegas" in cp.stdout, cp.stdout + cp.stderr
    assert "vegas" not in bpf_cc.available()

"""Processes the tests start (`mpcoa serve`, workers, beat): stop them, whole process groups,
even when the test failed, and read the end of their logs for an assertion's message."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path


def kill_group(proc: subprocess.Popen, sig: int = signal.SIGKILL) -> None:
    """Send `sig` to the process's group (it was started with start_new_session) and reap it."""
    if proc.poll() is None:
        os.killpg(proc.pid, sig)
        proc.wait(timeout=30)


def stop_group(proc: subprocess.Popen, grace_s: float = 20.0) -> None:
    """SIGTERM the group; SIGKILL it if it is still there after `grace_s`."""
    if proc.poll() is not None:
        return
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        kill_group(proc)


def tail_logs(folder: Path, pattern: str, chars: int = 3000) -> str:
    """The last `chars` characters of every log matching `pattern`, in name order."""
    return "\n".join(p.read_text()[-chars:] for p in sorted(folder.glob(pattern)))

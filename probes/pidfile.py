"""A pidfile that names one process for sure: its pid *and* its start time (field 22 of
/proc/PID/stat, clock ticks since boot). A pid the kernel has handed to a new process since
reads back with another start time, so stopping by pidfile never kills a stranger.

Any process may stop the one a pidfile names (a rollback from the CLI stops the watcher an API
process or a site worker started): `stop` removes the file first -- which tells the process's
starter the stop was asked for -- then SIGTERM, then SIGKILL after a grace time.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from pathlib import Path
from typing import Any


def start_time(pid: int) -> int | None:
    """The process's start time in clock ticks since boot; None when there is no such pid."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # the command name (field 2) may hold spaces and parentheses: split after its last ")"
    fields = stat[stat.rindex(")") + 2:].split()
    return int(fields[19])  # field 22 overall; fields[0] is field 3


def write(path: Path, pid: int, **extra: Any) -> dict[str, Any]:
    """Name `pid` in `path` (atomically: written aside, renamed)."""
    record = {"pid": pid, "start_time": start_time(pid), **extra}
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(record))
    os.replace(tmp, path)
    return record


def read(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def alive(record: dict[str, Any] | None) -> bool:
    """The very process the record names is still running (a zombie counts as gone)."""
    if not record or not isinstance(record.get("pid"), int):
        return False
    pid = record["pid"]
    if start_time(pid) != record.get("start_time"):
        return False
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def stop(path: Path, *, grace_s: float = 10.0) -> dict[str, Any] | None:
    """Stop the process `path` names, if it is still that process; returns its record (None:
    no pidfile). The file is removed before the signal."""
    record = read(path)
    if record is None:
        return None
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    if not alive(record):
        return {**record, "was_running": False}
    with contextlib.suppress(ProcessLookupError):
        os.kill(record["pid"], signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while alive(record) and time.monotonic() < deadline:
        time.sleep(0.05)
    if alive(record):
        with contextlib.suppress(ProcessLookupError):
            os.kill(record["pid"], signal.SIGKILL)
    return {**record, "was_running": True}

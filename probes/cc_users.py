"""Who uses a congestion control right now, so that unregistering a BPF one (host-wide) can
refuse while a probe needs it and say what does: unregistered under a probe, the probe's next
socket fails ("unable to set TCP_CONGESTION").

Two sources: running probes, each of which holds a file in ``REGISTRY`` for as long as it runs
(`using`: the controls it sets and what it is; its process named by pid and start time,
``probes.pidfile``, so a file a killed probe left counts for nothing), and the TCP sockets of this
host and of every named network namespace that have the control (``ss -tin``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import subprocess
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path

from probes import environment, pidfile
from probes.netns import list_netns

log = logging.getLogger(__name__)

DEFAULT_REGISTRY = Path("/run/mpcoa/cc-users")
REGISTRY: Path | None = None  # a fixed folder (tests); else MPCOA_CC_USERS_DIR or the default


def registry() -> Path:
    return REGISTRY or Path(environment.get("cc_users_dir", DEFAULT_REGISTRY))


@contextlib.contextmanager
def using(ccs: Iterable[str], what: str) -> Iterator[None]:
    """Declare, for the block's length, that this process needs the controls `ccs`."""
    path = registry() / f"{os.getpid()}-{secrets.token_hex(6)}.json"
    try:
        pidfile.write(path, os.getpid(), ccs=sorted({c for c in ccs if c}), what=what[:200])
    except OSError as exc:  # never a reason not to probe: an unload just cannot see this one
        log.warning("congestion controls in use: cannot write %s (%s)", path, exc.strerror)
        yield
        return
    try:
        yield
    finally:
        path.unlink(missing_ok=True)


def probe_users(names: Iterable[str]) -> list[str]:
    """The running probes that need one of `names`, described; files of dead ones go."""
    wanted = set(names)
    out = []
    for path in sorted(registry().glob("*.json")) if registry().is_dir() else []:
        record = pidfile.read(path)
        if not pidfile.alive(record):
            path.unlink(missing_ok=True)
            continue
        ccs = sorted(wanted & set(record.get("ccs") or []))
        if ccs:
            out.append(f"{record.get('what', 'a probe')} (pid {record['pid']}) uses "
                       f"{', '.join(ccs)}")
    return out


def socket_users(names: Iterable[str]) -> list[str]:
    """How many TCP sockets use each of `names`, on this host and in each named namespace."""
    wanted = set(names)
    out = []
    for ns in (None, *list_netns()):
        argv = ["ss", "-tinH"] + (["-N", ns] if ns else [])
        try:
            cp = subprocess.run(argv, capture_output=True, text=True, timeout=10, check=False)  # noqa: S603
        except (OSError, subprocess.TimeoutExpired):
            continue
        counts = Counter(tok for line in cp.stdout.splitlines() for tok in line.split()
                         if tok in wanted)
        where = "this host" if ns is None else f"namespace {ns}"
        out += [f"{n} TCP socket{'s' if n > 1 else ''} in {where} use{'s' if n == 1 else ''} "
                f"{cc}" for cc, n in sorted(counts.items())]
    return out


def users(names: Iterable[str]) -> list[str]:
    """Everything that uses one of `names` now (empty: nothing does)."""
    names = list(names)
    return probe_users(names) + socket_users(names)

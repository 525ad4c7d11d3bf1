"""Small helpers every test folder shares: the one "now" seeds date their rows from, waiting for
a condition, a free local port, and the guard that makes a test touching PostgreSQL, Redis or the
testbed without its marker fail.

Time: no test writes a date that the product compares with its clock. Seeds and fixtures take
their times from `now()` (`ago(days=1)`: measured yesterday), which is this process's clock; a
test that needs time to pass moves that clock with the `clock` fixture (tests/conftest.py,
time-machine), which moves the product's `utcnow` and the answer cache's clock with it. So the
suite passes on any day, and with the clock a year ahead (`faketime -f '+366d'`, docs/testing.md).

The markers (`postgres`, `broker`, `netns`) decide what the fast tier leaves out (`pytest -m
fast`: tests/conftest.py marks `fast` every test without them); a forgotten one would put a test
that needs a server or root into that tier, where it would fail or hang for a reason nobody sees. So
the fixtures and helpers that reach those things call `require(marker, what)` first: an
unmarked test fails at once and says which marker it lacks.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TypeVar

import pytest

T = TypeVar("T")

#: the test being set up or run (tests/conftest.py keeps it current); None between tests
current_item: pytest.Item | None = None


def now() -> datetime:
    """What every seed and fixture takes "now" to be: this process's clock (aware, UTC), as the
    product reads it (`models.utcnow`); the `clock` fixture moves both."""
    return datetime.now(UTC)


def ago(**delta: float) -> datetime:
    """`now()` less `timedelta(**delta)`: when seeded data was measured (`ago(days=1)`)."""
    return now() - timedelta(**delta)


def real_clock_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """`env` (this process's environment by default) without libfaketime's variables: for a
    server a test starts in place of the machine's own (Redis) and for the browser, which keep
    the real clock as PostgreSQL and the shared Redis do under a run with the clock shifted
    (docs/testing.md, "Time"). Neither can run under libfaketime (Redis's allocator recurses
    into its clock_gettime, Chromium hangs), and neither reads a date the product compares."""
    env = dict(os.environ if env is None else env)
    for key in [k for k in env if k.startswith("FAKETIME") or k == "LD_PRELOAD"]:
        del env[key]
    return env


def require(marker: str, what: str) -> None:
    """Fail the current test unless it carries `marker` (it is about to use `what`)."""
    item = current_item
    if item is not None and item.get_closest_marker(marker) is None:
        pytest.fail(
            f"{item.nodeid} uses {what} but is not marked @pytest.mark.{marker}: add the marker "
            "(the fast tier deselects by it)",
            pytrace=False,
        )


#: how long a test waits for `mpcoa serve` (or the image's command) to answer: its processes
#: import the whole service, which takes over a minute when the suite and a benchmark share two
#: cores
SERVE_START_S = 180


def wait_for(
    predicate: Callable[[], T], timeout: float, what: str, interval: float = 0.2,
    detail: Callable[[], str] | None = None,
) -> T:
    """Call `predicate` until it returns something true, and return that; fail after
    `timeout` seconds naming `what` was awaited, and what `detail` says (e.g. a server's log)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            said = f"\n{detail()}" if detail is not None else ""
            raise AssertionError(f"timed out after {timeout} s waiting for {what}{said}")
        time.sleep(interval)


REPOSITORY = Path(__file__).resolve().parents[1]


def shared_fixtures(name: str) -> Path:
    """The folder `fixtures/<name>` of the project's shared/ (real NetPerfMeter 2.0.10 output,
    too large for the repository): shared/ beside the repository, or beside the folder the
    repository's work tree sits in (a CI clone has a copy beside it; a developer's work tree
    may sit one level deeper). Fails the test, naming where it looked, when there is none."""
    looked = []
    for parent in REPOSITORY.parents:
        folder = parent / "shared" / "fixtures" / name
        if folder.is_dir():
            return folder
        looked.append(str(folder))
    pytest.fail(f"no shared fixtures {name!r}: looked in {', '.join(looked)}", pytrace=False)


def answers_from(source: str) -> float:
    """How many answers this process has sent from `source` (cache | solved | provisional):
    the answer-latency histogram's count, as /metrics shows it. A cache hit is asserted as one
    more "cache" answer, never by the bytes being equal."""
    from api.metrics import ANSWER_LATENCY

    for metric in ANSWER_LATENCY.collect():
        for sample in metric.samples:
            if sample.name.endswith("_count") and sample.labels.get("source") == source:
                return sample.value
    return 0.0


@contextlib.contextmanager
def statements(bind=None) -> Iterator[list[str]]:
    """The SQL statements run in the block, in order: on `bind` (a connection or engine), or on
    every engine of this process."""
    from sqlalchemy import Engine, event

    target = Engine if bind is None else bind
    seen: list[str] = []

    def watch(_conn, _cursor, statement, *_args):
        seen.append(statement)

    event.listen(target, "before_cursor_execute", watch)
    try:
        yield seen
    finally:
        event.remove(target, "before_cursor_execute", watch)


def free_port() -> int:
    """A TCP port on 127.0.0.1 nobody listens on right now (the OS's pick)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def free_port_pair() -> int:
    """A port P on 127.0.0.1 with P and P + 1 both free right now (a tool that listens on a data
    port and its control port beside it): checked by binding both, not only P."""
    for _ in range(200):
        p = free_port()
        if p >= 65535:
            continue
        with socket.socket() as a, socket.socket() as b:
            try:
                a.bind(("127.0.0.1", p))
                b.bind(("127.0.0.1", p + 1))
            except OSError:
                continue
        return p
    raise RuntimeError("no two free ports side by side on 127.0.0.1")


def parent_pid(pid: int) -> int:
    """The parent of process `pid`, from /proc (OSError once it is gone). The command name in
    `stat` may hold spaces and parentheses: the fields after its last ")" are the kernel's."""
    return parent_in_stat(Path(f"/proc/{pid}/stat").read_text())


def parent_in_stat(stat: str) -> int:
    """The parent pid field of a /proc/PID/stat line."""
    return int(stat.rsplit(")", 1)[1].split()[1])


def listening(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket() as s:
        return s.connect_ex((host, port)) == 0


@contextlib.contextmanager
def host_lock(name: str, *, exclusive: bool) -> Iterator[None]:
    """Hold a lock shared by every test process on this host (pytest-xdist workers): exclusive
    for a module that registers and unregisters host-wide state (BPF congestion controls),
    shared for one that only needs that state to hold still."""
    path = Path("/run/lock") / f"mpcoa-tests-{name}.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as f:
        fcntl.flock(f, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


@contextlib.contextmanager
def running_testbed(spec) -> Iterator:
    """The emulated testbed `spec` up for the block, then down, with none of its namespaces
    left behind (also when the block fails)."""
    from probes.netns import list_netns
    from probes.testbed import lifecycle as tbmod

    require("netns", "the emulated testbed")
    try:
        yield tbmod.up(spec)
    finally:
        tbmod.down(spec.name)
        assert not [n for n in list_netns() if n.startswith(f"mpcoa-{spec.name}-")]

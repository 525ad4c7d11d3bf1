"""SIGINT and SIGTERM as an exception, so that whatever built a testbed tears it down.

Python turns SIGINT into KeyboardInterrupt and its `finally` blocks run; SIGTERM (what `kill`,
systemd and container runtimes send) ends the process at once by default, leaving namespaces,
the delay line and iperf3 servers behind. Inside `stop_on_signals()` both raise `Stopped` (a
KeyboardInterrupt, so code that already cleans up on Ctrl-C cleans up on SIGTERM too); inside
`shielded()` (the teardown) both are ignored, so a second Ctrl-C cannot cut the teardown short.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Stopped(KeyboardInterrupt):
    """A stop signal arrived; `signum` says which."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

    @property
    def exit_code(self) -> int:
        """What a shell reports for a process ended by this signal."""
        return 128 + self.signum


@contextmanager
def stop_on_signals() -> Iterator[None]:
    """Within the block SIGINT and SIGTERM raise `Stopped` in the main thread; after the first,
    both are ignored until the block is left (the teardown that follows runs to its end).
    Outside the main thread (where Python cannot set handlers) it does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, _frame: object) -> None:
        for s in STOP_SIGNALS:
            signal.signal(s, signal.SIG_IGN)
        raise Stopped(signum)

    previous = {s: signal.signal(s, handler) for s in STOP_SIGNALS}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


@contextmanager
def shielded() -> Iterator[None]:
    """SIGINT and SIGTERM are ignored within the block: for a teardown that must finish."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.signal(s, signal.SIG_IGN) for s in STOP_SIGNALS}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


def run_stoppable(main: Callable[[], int | None]) -> int:
    """Run a command's `main` so that SIGINT or SIGTERM unwinds it (its `finally` blocks take
    down what it built); the exit status: main's, or 128 + the signal's number."""
    with stop_on_signals():
        try:
            return main() or 0
        except Stopped as exc:
            print(f"stopped by {exc}: torn down", file=sys.stderr)
            return exc.exit_code

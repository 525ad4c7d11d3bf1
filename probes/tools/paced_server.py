"""A site's long-lived paced receiver: `paced_tool recv --serve`, started once by the site's
worker and reused by every paced probe that comes to the site, so a probe pays no server start.

One receiver per namespace (None: this host's own stack), in the worker process that started it
(the worker runs one task at a time, solo pool). It dies with the worker (``setpriv
--pdeathsig``), a dead one is started again at the next probe, and `stop_all` ends them when the
worker stops. It serves probes one after another: a second sender waits in the listen backlog,
and the site's lock means none does. Each probe's frames go back to the sender on the probe's
control connection; the receiver's own output (one line per probe) is not kept.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from dataclasses import dataclass

from probes.netns import in_ns
from probes.tools.paced import TOOL
from probes.tools.ports import choose_port_triple
from probes.tools.runner import Server, wait_listening
from probes.tools.twosided import die_with_parent


@dataclass
class PacedReceiver:
    server: Server
    port: int
    argv: list[str]
    starts: int  #: how many receivers this process started for the namespace so far

    def alive(self) -> bool:
        return self.server.proc.poll() is None


_receivers: dict[str | None, PacedReceiver] = {}
_lock = threading.Lock()


def ensure(ns: str | None = None, python: str = sys.executable) -> tuple[PacedReceiver, bool]:
    """The namespace's running receiver, started if there is none (or it died); (receiver,
    started now)."""
    with _lock:
        current = _receivers.get(ns)
        if current is not None and current.alive():
            return current, False
        starts = current.starts if current is not None else 0
        if current is not None:
            current.server.kill()
        port = choose_port_triple([ns])
        argv = [python, TOOL, "recv", "--port", str(port), "--serve", "--clock", "monotonic"]
        proc = subprocess.Popen(  # noqa: S603 - argv from validated values
            die_with_parent(in_ns(ns, argv)), stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
            start_new_session=True)
        server = Server(proc, ns, "paced")
        try:
            wait_listening(ns, port, proc, "paced")
            wait_listening(ns, port + 1, proc, "paced")
        except BaseException:
            server.kill()
            raise
        # Its stderr says only that it listens: closed now, so nothing can fill the pipe.
        if proc.stderr is not None:
            proc.stderr.close()
        receiver = PacedReceiver(server, port, argv, starts + 1)
        _receivers[ns] = receiver
        return receiver, True


def stop_all() -> int:
    """End every receiver this process started; how many were running."""
    with _lock:
        running = [r for r in _receivers.values() if r.alive()]
        for r in _receivers.values():
            r.server.kill()
        _receivers.clear()
        return len(running)

"""A NetPerfMeter passive side started for the next probe while this one's results are read and
stored.

Why: 2.0.10's passive side takes a new data connection only at its flow manager's next tick
(`FlowManager::run` polls the sockets it knew at its last wake; its timeout runs to the next
one-second display event, counted from the process's start). A passive side started right before
each probe's active side made every probe wait for that first tick: 0.71 s of a uit-haw probe
between the flow's identification sent and acknowledged. Started once the probe before has ended
(its connections aborted, so no measured window is running), the spare has been up through that
probe's parsing and storing, the campaign's turn and the next probe's checks by the time the next
active side connects: the wait is shorter by that much (or a part of a second, whichever tick
comes next, when that took more than one).

One spare per host pair (sender and receiver namespace) and binary in this process, on a port
triple free in both namespaces; it dies with the process that started it (``setpriv
--pdeathsig``), one that ended is not used, and `discard_all` ends them (at exit too).
"""

from __future__ import annotations

import atexit
import subprocess
import threading
from collections.abc import Callable
from dataclasses import dataclass

from probes.base import ProbeError
from probes.netns import in_ns
from probes.tools.ports import choose_port_triple
from probes.tools.runner import Server, wait_listening

Key = tuple[str | None, str | None, str]  #: (sender ns, receiver ns, binary)


@dataclass
class Spare:
    server: Server
    port: int
    argv: list[str]


_spares: dict[Key, Spare] = {}
_lock = threading.Lock()


def take(key: Key) -> Spare | None:
    """The pair's spare passive side, listening, or None (none started, or it ended)."""
    with _lock:
        spare = _spares.pop(key, None)
    if spare is None:
        return None
    if spare.server.proc.poll() is not None:
        spare.server.kill()
        return None
    try:  # long listening by now: one look
        wait_listening(spare.server.ns, spare.port + 1, spare.server.proc, "netperfmeter")
    except ProbeError:
        spare.server.kill()
        return None
    return spare


def prepare(key: Key, argv_for: Callable[[int], list[str]]) -> Spare:
    """Start the pair's next passive side (`argv_for(port)`: its command line) without waiting
    for it; any spare the receiver's namespace had is ended."""
    from probes.tools.twosided import die_with_parent

    sender_ns, receiver_ns, _ = key
    port = choose_port_triple([sender_ns, receiver_ns])
    argv = argv_for(port)
    proc = subprocess.Popen(  # noqa: S603 - argv from validated values
        die_with_parent(in_ns(receiver_ns, argv)), stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    spare = Spare(Server(proc, receiver_ns, "netperfmeter"), port, argv)
    with _lock:
        old = [_spares.pop(k) for k in list(_spares) if k[1] == receiver_ns]
        _spares[key] = spare
    for o in old:
        o.server.kill()
    return spare


def discard_all() -> None:
    with _lock:
        spares = list(_spares.values())
        _spares.clear()
    for s in spares:
        s.server.kill()


atexit.register(discard_all)

"""User-space delay line: the testbed's replacement for netem (which this kernel lacks).

Runs inside the core namespace (``ip netns exec <core> python -m probes.delayline CONFIG``),
attaches to the persistent TUN device the testbed created there, and for every IPv4 packet the
kernel routes into it (``ip rule iif <site link> lookup <table>`` -> ``default dev <tun>``)
looks up the path by (source, destination) address, drops it with the path's loss probability,
holds it for the path's one-way delay from the moment it reads it (plus jitter, never reordering
within a path; never less than the delay without jitter) and writes it back, so the kernel
forwards it to the destination site's link.

One thread, ``select`` with microsecond timeouts, one FIFO per path and direction. It exits on
SIGTERM/SIGINT and by itself when its namespace disappears, so it never outlives the testbed.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import random
import select
import signal
import socket
import struct
import sys
import time
from collections import deque

TUNSETIFF = 0x400454CA
IFF_TUN = 0x0001
IFF_NO_PI = 0x1000


def open_tun(name: str) -> int:
    fd = os.open("/dev/net/tun", os.O_RDWR | os.O_NONBLOCK)
    ifr = struct.pack("16sH22x", name.encode(), IFF_TUN | IFF_NO_PI)
    fcntl.ioctl(fd, TUNSETIFF, ifr)
    return fd


class Path:
    __slots__ = ("delay", "jitter", "last", "loss", "queue")

    def __init__(self, delay_ms: float, loss_pct: float, jitter_ms: float) -> None:
        self.delay = delay_ms / 1000.0
        self.loss = loss_pct / 100.0
        self.jitter = jitter_ms / 1000.0
        self.queue: deque[tuple[float, bytes]] = deque()
        self.last = 0.0


def run(config: dict) -> int:
    tun = config["tun"]
    paths: dict[tuple[bytes, bytes], Path] = {}
    for p in config["paths"]:
        key = (socket.inet_aton(p["src"]), socket.inet_aton(p["dst"]))
        paths[key] = Path(p["delay_ms"], p.get("loss_pct", 0.0), p.get("jitter_ms", 0.0))
    passthrough = Path(0.0, 0.0, 0.0)
    rng = random.Random(config.get("seed"))  # noqa: S311 - emulation, not crypto
    watch = config.get("netns_file")
    stats_file = config.get("stats_file")
    fd = open_tun(tun)
    stop = False

    def _stop(_sig, _frm):
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    active: list[Path] = []
    forwarded = dropped = unknown = 0
    next_check = time.monotonic() + 1.0
    ready = config.get("ready_file")
    if ready:
        with open(ready, "w", encoding="ascii") as f:
            f.write(str(os.getpid()))
    read, write, monotonic, sel = os.read, os.write, time.monotonic, select.select
    while not stop:
        now = monotonic()
        due = None
        if active:
            still = []
            for path in active:
                q = path.queue
                while q and q[0][0] <= now:
                    try:
                        write(fd, q.popleft()[1])
                        forwarded += 1
                    except OSError:
                        dropped += 1
                if q:
                    still.append(path)
                    if due is None or q[0][0] < due:
                        due = q[0][0]
            active = still
        timeout = 0.5 if due is None else max(0.0, due - now)
        try:
            r, _, _ = sel([fd], [], [], timeout)
        except InterruptedError:
            continue
        if r:
            for _ in range(256):
                try:
                    pkt = read(fd, 65536)
                except BlockingIOError:
                    break
                # The hold starts when this packet is read, never earlier: one time taken before
                # a batch of reads held every packet that arrived while this process waited for
                # the CPU (a busy host) for less than the path's delay, by as long as it waited.
                now = monotonic()
                if len(pkt) < 20 or pkt[0] >> 4 != 4:
                    continue  # IPv4 only; the testbed uses no IPv6
                path = paths.get((pkt[12:16], pkt[16:20]))
                if path is None:
                    unknown += 1
                    path = passthrough
                if path.loss and rng.random() < path.loss:
                    dropped += 1
                    continue
                t = now + path.delay
                if path.jitter:
                    t += rng.uniform(-path.jitter, path.jitter)
                if t < path.last:
                    t = path.last  # keep the path's order: jitter never reorders
                path.last = t
                if not path.queue:
                    active.append(path)
                path.queue.append((t, pkt))
        if now >= next_check:
            next_check = now + 1.0
            if watch and not os.path.exists(watch):
                break
            if stats_file:
                tmp = stats_file + ".tmp"
                with open(tmp, "w", encoding="ascii") as f:
                    json.dump({"forwarded": forwarded, "dropped": dropped, "unknown": unknown}, f)
                os.replace(tmp, stats_file)
    os.close(fd)
    return 0


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m probes.delayline CONFIG.json", file=sys.stderr)
        return 2
    with open(argv[0], encoding="utf-8") as f:
        config = json.load(f)
    _before_the_hosts()
    return run(config)


def _before_the_hosts() -> None:
    """The emulated network runs before the emulated hosts' programs: on a loaded machine a
    delay line that waits for the CPU adds delay and bursts no real path has. Raising the
    priority needs root (the testbed runs as root); without it the default stands."""
    with contextlib.suppress(OSError):
        os.setpriority(os.PRIO_PROCESS, 0, -10)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

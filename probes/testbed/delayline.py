"""User-space delay line: the testbed's replacement for netem (which this kernel lacks).

Runs inside the core namespace (``ip netns exec <core> python -m probes.testbed.delayline CONFIG``),
attaches to the persistent TUN device the testbed created there, and for every IPv4 or IPv6
packet the
kernel routes into it (``ip rule iif <site link> lookup <table>`` -> ``default dev <tun>``)
looks up the path by (source, destination) address, drops it with the path's loss probability
(independently, or in bursts from a Gilbert-Elliott chain when the path has ``loss_burst``),
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
    __slots__ = ("bad", "bursts", "delay", "dropped", "enter_bad", "jitter", "last", "leave_bad",
                 "loss", "packets", "queue", "was_dropped")

    def __init__(self, delay_ms: float, loss_pct: float, jitter_ms: float,
                 loss_burst: float | None = None) -> None:
        self.delay = delay_ms / 1000.0
        self.loss = loss_pct / 100.0
        self.jitter = jitter_ms / 1000.0
        self.queue: deque[tuple[float, bytes]] = deque()
        self.last = 0.0
        # Gilbert-Elliott: every packet is dropped in the bad state; the chain leaves it with
        # probability 1/burst per packet (bursts of mean length `burst`) and enters it so that
        # the long-run share of bad packets is the loss rate.
        self.bad = False
        self.enter_bad = self.leave_bad = 0.0
        if loss_burst is not None and self.loss > 0:
            self.leave_bad = 1.0 / loss_burst
            self.enter_bad = self.leave_bad * self.loss / (1.0 - self.loss)
        # counters: packets seen, dropped, and runs of consecutive drops (bursts)
        self.packets = self.dropped = self.bursts = 0
        self.was_dropped = False

    def drops(self, rnd: float) -> bool:
        """Whether this packet is lost (`rnd` uniform in [0, 1)), counting it."""
        self.packets += 1
        if self.leave_bad:
            lost = self.bad
            self.bad = rnd >= self.leave_bad if self.bad else rnd < self.enter_bad
        else:
            lost = rnd < self.loss
        if lost:
            self.dropped += 1
            if not self.was_dropped:
                self.bursts += 1
        self.was_dropped = lost
        return lost


def _packed(address: str) -> bytes:
    """An address as it stands in a packet's header: 4 bytes for IPv4, 16 for IPv6."""
    fam = socket.AF_INET6 if ":" in address else socket.AF_INET
    return socket.inet_pton(fam, address)


def run(config: dict) -> int:
    tun = config["tun"]
    paths: dict[tuple[bytes, bytes], Path] = {}
    names: dict[str, Path] = {}
    for p in config["paths"]:
        key = (_packed(p["src"]), _packed(p["dst"]))
        paths[key] = Path(p["delay_ms"], p.get("loss_pct", 0.0), p.get("jitter_ms", 0.0),
                          p.get("loss_burst"))
        names[f"{p['src']}>{p['dst']}"] = paths[key]
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
                version = pkt[0] >> 4 if pkt else 0
                if version == 4 and len(pkt) >= 20:
                    path = paths.get((pkt[12:16], pkt[16:20]))
                elif version == 6 and len(pkt) >= 40:
                    path = paths.get((pkt[8:24], pkt[24:40]))
                else:
                    continue  # not an IP packet: nothing the testbed routes here
                if path is None:
                    unknown += 1
                    path = passthrough
                if path.loss and path.drops(rng.random()):
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
                    json.dump({"forwarded": forwarded, "dropped": dropped, "unknown": unknown,
                               "paths": {n: {"packets": v.packets, "dropped": v.dropped,
                                             "bursts": v.bursts}
                                         for n, v in names.items() if v.loss}}, f)
                os.replace(tmp, stats_file)
    os.close(fd)
    return 0


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m probes.testbed.delayline CONFIG.json", file=sys.stderr)
        return 2
    with open(argv[0], encoding="utf-8") as f:
        config = json.load(f)
    _before_the_hosts()
    return run(config)


#: the delay line's real-time priority (SCHED_RR, 1-99): above every ordinary process, low
#: among real-time ones (the kernel's own threads that use the class stay ahead of it)
RT_PRIORITY = 10


def _before_the_hosts() -> None:
    """The emulated network runs before the emulated hosts' programs: on a loaded machine a
    delay line that waits for the CPU adds delay and bursts no real path has (an allowed
    subflow that stalls past its RTO has its data reinjected on a backup one).

    A nice value is not enough: with autogroup scheduling it ranks a process within its own
    session only, and every session gets an equal share, so a busy session elsewhere (a server
    started in a session of its own) still delays it. The real-time class runs before every
    ordinary process; the delay line sleeps in `select` between packets, and the kernel's
    real-time throttling keeps a share of each second for the others whatever it does. Both
    need root (the testbed runs as root); without it the default stands."""
    with contextlib.suppress(OSError):
        os.setpriority(os.PRIO_PROCESS, 0, -10)
    with contextlib.suppress(OSError, AttributeError):
        os.sched_setscheduler(0, os.SCHED_RR, os.sched_param(RT_PRIORITY))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

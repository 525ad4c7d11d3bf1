"""A paced sender and receiver of frames over one MPTCP connection (the CI-runnable stream
probe: Debian 12 has no NetPerfMeter 2.x, and its sockperf 3.7 reports half the round trip of
echoed messages, not one-way delay; see docs/testbed.md).

    python -m probes.tools.paced_tool recv --port P [--buffer B] [--deadline S] [--clock C]
                                     [--serve]
    python -m probes.tools.paced_tool send --connect ADDR --port P --rate HZ --size BYTES
                                     --duration S [--bind ADDR] [--cc CC] [--buffer B]
                                     [--clock C] [--sync N]

Two connections per probe. The **control connection** (plain TCP to port ``P + 1``) carries
the probe's hello (its buffer and read deadline: a long-lived receiver listens anew with the
buffer asked), NTP-style clock exchanges before and after the stream and, at the end, the
receiver's report;
the **data connection** (port ``P``) carries the frames. Its socket is MPTCP itself
(``IPPROTO_MPTCP``, 262), not made one by mptcpize. Each frame is a 16-byte header (sequence
number, send time in µs), its 4-byte size and filler, written at its scheduled time
``t0 + seq / rate``: the send time stamped in it is that schedule, so a frame that waits in the
application because the socket buffer is full counts that wait as delay (what an encoder
feeding the socket would see). The receiver stamps each frame with its own clock when its last
byte is read.

Clocks: ``--clock`` is the clock each end stamps with, ``monotonic`` by default (a step of the
wall clock cannot move a stamp; a Linux time namespace offsets it, which is how the clock
offset is tested). The two ends' clocks differ between hosts: each exchange is the sender's t1
(sent), the receiver's t2 (received) and t3 (answered), the sender's t4 (answer received), so
the receiver's clock minus the sender's is ((t2 - t1) + (t3 - t4)) / 2 within half the round
trip. ``--sync N`` exchanges are made before the first frame and N after the receiver has read
the last one (none while frames queue on the path); `probes.clocksync` turns them into the
offset and its uncertainty.

A connection that stalls (takes no data) cannot hold the sender: its writes end at the
duration plus ``STALL_MARGIN_S``, the report says why (``stalled``) and counts every scheduled
frame in ``frames_sent``, so the frames not written are lost.

The sender prints one JSON document when done: its own figures, the exchanges (``sync``) and the
receiver's report (``receiver``, with every frame). The receiver prints its report too; with
``--serve`` it stays up and serves one probe after another (one JSON line each), so a site
starts it once. ``--buffer 0`` (default) leaves SO_SNDBUF/SO_RCVBUF to autotuning; what was set
is read back with getsockopt and reported.
"""

from __future__ import annotations

import argparse
import json
import math
import select
import socket
import struct
import sys
import time
from typing import Any

IPPROTO_MPTCP = getattr(socket, "IPPROTO_MPTCP", 262)
TCP_CONGESTION = getattr(socket, "TCP_CONGESTION", 13)
HEADER = struct.Struct("!QQ")  # sequence number, scheduled send time (µs of --clock)
MIN_FRAME = HEADER.size
VERSION = "2"
CLOCKS = {"realtime": time.CLOCK_REALTIME, "monotonic": time.CLOCK_MONOTONIC}
DEFAULT_SYNC = 5
#: the control connection's port, next to the data port (a probe reserves the triple around it)
CONTROL_OFFSET = 1
#: how long after its control connection a probe's data connection may come
DATA_ACCEPT_S = 30.0
#: how long after the data deadline the control connection may stay open (the last exchanges)
LINGER_S = 60.0
#: how long past the last frame's slot the sender may still be writing: a connection that
#: takes no data (tiny buffers over several subflows can stall one) ends the stream there,
#: reported as ``stalled``, instead of holding the probe until something times it out
STALL_MARGIN_S = 2.0
_clock = time.CLOCK_MONOTONIC


def now_us() -> int:
    return time.clock_gettime_ns(_clock) // 1000


def _buffers(sock: socket.socket, buffer: int) -> dict[str, int]:
    if buffer > 0:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, buffer)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, buffer)
    return {"set": buffer,
            "sndbuf": sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF),
            "rcvbuf": sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)}


class Lines:
    """Newline-delimited JSON messages on a stream socket."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock, self.pending = sock, b""

    def send(self, msg: dict[str, Any]) -> None:
        self.sock.sendall(json.dumps(msg).encode() + b"\n")

    def feed(self) -> list[dict[str, Any]] | None:
        """The whole messages one read completes ([] none yet), None at end of stream."""
        chunk = self.sock.recv(1 << 16)
        if not chunk:
            return None
        self.pending += chunk
        *done, self.pending = self.pending.split(b"\n")
        return [json.loads(x) for x in done if x.strip()]

    def recv(self, timeout_s: float) -> dict[str, Any]:
        end = time.monotonic() + timeout_s
        while b"\n" not in self.pending:
            left = end - time.monotonic()
            if left <= 0 or not select.select([self.sock], [], [], left)[0]:
                raise TimeoutError(f"control connection: no answer within {timeout_s:g} s")
            chunk = self.sock.recv(1 << 16)
            if not chunk:
                raise ConnectionError("control connection closed by the receiver")
            self.pending += chunk
        line, self.pending = self.pending.split(b"\n", 1)
        return json.loads(line)


class FrameReader:
    """The frames of one data connection, stamped when their last byte is read."""

    def __init__(self) -> None:
        self.frames: list[list[int]] = []
        self.pending = b""
        self.header: tuple[int, int] | None = None
        self.need = 0
        self.got = 0

    def feed(self, chunk: bytes, t: int) -> None:
        self.pending += chunk
        while True:
            if self.header is None:
                if len(self.pending) < HEADER.size + 4:
                    return
                self.header = HEADER.unpack_from(self.pending)
                (self.need,) = struct.unpack_from("!I", self.pending, HEADER.size)
                self.got = 0
            take = min(self.need - self.got, len(self.pending))
            self.got += take
            self.pending = self.pending[take:]
            if self.got < self.need:
                return
            self.frames.append([self.header[0], self.header[1], t, self.need])
            self.header = None


def connecting_socket(address: str, proto: int = 0) -> socket.socket:
    """A stream socket in the family of `address` (the tool runs as a plain script: it keeps
    its own copy of probes.tools.addressing's few lines)."""
    return socket.socket(socket.AF_INET6 if ":" in address else socket.AF_INET,
                         socket.SOCK_STREAM, proto)


def ipv6_enabled() -> bool:
    """Whether this process's network namespace has IPv6 (/proc/sys/net is per namespace)."""
    try:
        with open("/proc/sys/net/ipv6/conf/all/disable_ipv6", encoding="ascii") as f:
            return f.read().strip() == "0"
    except OSError:
        return False


def any_family_listener(port: int, proto: int = 0, before_bind=None) -> socket.socket:
    """Every local address of both families (``::``, IPV6_V6ONLY off); ``0.0.0.0`` where the
    host has no IPv6."""
    for fam, wildcard in ((socket.AF_INET6, "::"), (socket.AF_INET, "0.0.0.0")):  # noqa: S104
        if fam == socket.AF_INET6 and not ipv6_enabled():
            continue  # an IPv4-only namespace keeps a plain IPv4 listener, as it always had
        try:
            s = socket.socket(fam, socket.SOCK_STREAM, proto)
        except OSError:
            continue
        try:
            if fam == socket.AF_INET6:
                s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if before_bind is not None:
                before_bind(s)
            s.bind((wildcard, port))
            return s
        except OSError:
            s.close()
            if fam == socket.AF_INET:
                raise
    raise OSError(f"no socket could listen on port {port}")


def unmapped(address: str) -> str:
    """An IPv4 peer of a dual-stack listener (``::ffff:a.b.c.d``) as its IPv4 address."""
    return address[len("::ffff:"):] if address.startswith("::ffff:") and "." in address \
        else address


class Listeners:
    """The control listener and the data listener, the latter made again when a probe asks for
    another buffer (the window scale is chosen from the listener's buffer at the handshake)."""

    def __init__(self, port: int, buffer: int) -> None:
        self.port = port
        # any of the site's ISP addresses, of either family
        self.ctrl = any_family_listener(port + CONTROL_OFFSET)
        self.ctrl.listen(4)
        self.data = self._data(buffer)
        self.buffer = buffer

    def _data(self, buffer: int) -> socket.socket:
        # every local address: the sender's subflows reach any of the site's ISP addresses;
        # buffers before listen: the window scale is chosen at the handshake
        data = any_family_listener(self.port, IPPROTO_MPTCP,
                                   before_bind=lambda s: _buffers(s, buffer))
        data.listen(4)
        return data

    def use_buffer(self, buffer: int) -> None:
        if buffer != self.buffer:
            self.data.close()
            self.data = self._data(buffer)
            self.buffer = buffer

    def close(self) -> None:
        self.ctrl.close()
        self.data.close()


def serve_one(lis: Listeners, deadline_s: float, accept_s: float) -> dict[str, Any]:
    """One probe: the sender's control connection, its hello (the probe's buffer and
    deadline), its exchanges, its data connection until the sender closes it or the deadline
    after it came (frames not complete by then are lost), the report on the control connection
    when asked, the exchanges after."""
    if not select.select([lis.ctrl], [], [], None if math.isinf(accept_s) else accept_s)[0]:
        return {"error": f"no connection within {accept_s:g} s"}
    cs, _ = lis.ctrl.accept()
    buffer = lis.buffer
    cs.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    ctrl = Lines(cs)
    conn: socket.socket | None = None
    peer: list[Any] = []
    buffers: dict[str, int] = {}
    reader = FrameReader()
    eof, report_wanted, reported = False, False, False
    exchanges = 0
    end_accept = time.monotonic() + DATA_ACCEPT_S
    end: float | None = None  # the data connection's deadline, once it came

    def report() -> dict[str, Any]:
        return {"tool": "paced", "version": VERSION, "side": "receiver", "peer": peer,
                "eof": eof, "frames": reader.frames, "buffers": buffers}

    try:
        while True:
            now = time.monotonic()
            if conn is None and now > end_accept:
                out = {"error": f"no data connection within {DATA_ACCEPT_S:g} s"}
                break
            if end is not None and now > end + LINGER_S:  # a sender that never says it is done
                out = report()
                break
            reading = conn is not None and not eof and now < (end or now)
            if report_wanted and not reported and conn is not None and not reading:
                ctrl.send(report())
                reported = True
            watch: list[socket.socket] = [cs]
            if conn is None:
                watch.append(lis.data)
            elif reading:
                watch.append(conn)
            ready, _, _ = select.select(watch, [], [], 0.2)
            if cs in ready:
                t2 = now_us()  # first: the receive stamp of an exchange
                msgs = ctrl.feed()
                if msgs is None:  # the sender is done (or gone)
                    out = report()
                    break
                for msg in msgs:
                    if not isinstance(msg, dict):
                        continue
                    if msg.get("op") == "sync":
                        ctrl.send({"t2": t2, "t3": now_us()})
                        exchanges += 1
                    elif msg.get("op") == "hello" and conn is None:
                        buffer = max(0, int(msg.get("buffer", buffer)))
                        deadline_s = max(1.0, float(msg.get("deadline", deadline_s)))
                        lis.use_buffer(buffer)
                        ctrl.send({"ready": True})
                    elif msg.get("op") == "report":
                        report_wanted = True
                continue  # stamps first: the frames wait for the next round
            if conn is not None and conn in ready:
                chunk = conn.recv(1 << 20)
                t = now_us()
                if not chunk:
                    eof = True
                else:
                    reader.feed(chunk, t)
            if conn is None and lis.data in ready:
                conn, addr = lis.data.accept()
                # the listener stays open: the other subflows' MP_JOIN SYNs arrive on it
                peer = [unmapped(addr[0]), addr[1]]  # an IPv4 peer as IPv4
                buffers = _buffers(conn, buffer)
                end = time.monotonic() + deadline_s
    finally:
        if conn is not None:
            conn.close()
        cs.close()
    out["exchanges"] = exchanges
    return out


def receive(port: int, buffer: int, deadline_s: float, accept_s: float = 30.0,
            serve: bool = False) -> dict[str, Any]:
    lis = Listeners(port, buffer)
    print(json.dumps({"listening": port, "control": port + CONTROL_OFFSET}), file=sys.stderr,
          flush=True)
    try:
        while True:
            try:
                out = serve_one(lis, deadline_s, accept_s=float("inf") if serve else accept_s)
            except (OSError, ValueError) as exc:  # a sender gone mid-probe, or not a sender
                out = {"error": f"receiver: {exc}"}
            if not serve:
                return out
            # a long-lived receiver logs each probe (the sender has the whole report)
            print(json.dumps({k: v for k, v in out.items() if k != "frames"}), flush=True)
    finally:
        lis.close()


def _exchanges(ctrl: Lines, n: int, timeout_s: float) -> list[list[int]]:
    out = []
    for _ in range(n):
        t1 = now_us()
        ctrl.send({"op": "sync"})
        answer = ctrl.recv(timeout_s)
        t4 = now_us()
        out.append([t1, int(answer["t2"]), int(answer["t3"]), t4])
    return out


def send(address: str, port: int, *, rate_hz: float, size: int, duration_s: float,
         bind: str | None, cc: str | None, buffer: int, sync: int = DEFAULT_SYNC,
         report_wait_s: float = 30.0, deadline_s: float | None = None) -> dict[str, Any]:
    """`deadline_s`: how long after the data connection the receiver reads (default the
    duration plus 5 s of drain)."""
    if deadline_s is None:
        deadline_s = duration_s + 5.0
    if size < MIN_FRAME + 4:
        raise SystemExit(f"--size: at least {MIN_FRAME + 4} bytes")
    cs = connecting_socket(address)
    cs.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if bind:  # the same path as the data connection's first subflow
        cs.bind((bind, 0))
    cs.settimeout(10)
    cs.connect((address, port + CONTROL_OFFSET))
    cs.settimeout(None)
    ctrl = Lines(cs)
    # the receiver listens with this probe's buffer (a long-lived one served others before)
    ctrl.send({"op": "hello", "buffer": buffer, "deadline": deadline_s})
    if not ctrl.recv(10.0).get("ready"):
        raise ValueError("the receiver did not get ready")
    before = _exchanges(ctrl, sync, 10.0)
    sock = connecting_socket(address, IPPROTO_MPTCP)
    if cc:
        sock.setsockopt(socket.IPPROTO_TCP, TCP_CONGESTION, cc.encode())
    # A frame is written whole; with Nagle its last, partial segment would wait for the ACK of
    # everything before it (measured live: +30 ms on a 30 ms path, a small frame one frame
    # interval late), which no latency-sensitive sender accepts.
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    buffers = _buffers(sock, buffer)
    if bind:
        sock.bind((bind, 0))
    sock.settimeout(10)
    sock.connect((address, port))
    sock.settimeout(None)
    used_cc = sock.getsockopt(socket.IPPROTO_TCP, TCP_CONGESTION, 16).split(b"\0")[0].decode()
    filler = bytes(size - HEADER.size - 4)
    t0 = now_us() + 20_000
    n = int(duration_s * rate_hz)
    stall_at = t0 + round((duration_s + STALL_MARGIN_S) * 1e6)
    behind = 0
    stalled: str | None = None
    for seq in range(n):
        at = t0 + round(seq * 1e6 / rate_hz)
        wait = at - now_us()
        if wait > 0:
            time.sleep(wait / 1e6)
        else:
            behind += 1
        # the timeout bounds the whole write (Python >= 3.5): a stalled connection ends here
        sock.settimeout(max(0.001, (stall_at - now_us()) / 1e6))
        try:
            sock.sendall(HEADER.pack(seq, at) + struct.pack("!I", size) + filler)
        except TimeoutError:
            stalled = (f"the connection stalled: frame {seq} of {n} not written within the "
                       f"duration plus {STALL_MARGIN_S:g} s")
            break
    sock.settimeout(None)
    done = now_us()
    nodelay = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
    sock.shutdown(socket.SHUT_WR)
    # the report comes once the receiver has read the last frame: the exchanges after it
    # find the path empty again
    ctrl.send({"op": "report"})
    receiver = ctrl.recv(report_wait_s)
    sock.close()
    after = _exchanges(ctrl, sync, 10.0)
    cs.close()
    return {"tool": "paced", "version": VERSION, "side": "sender", "frames_sent": n,
            "rate_hz": rate_hz, "size": size, "nodelay": bool(nodelay),
            "first_send_us": t0, "last_write_done_us": done, "sent_late": behind, "cc": used_cc,
            "stalled": stalled,
            "buffers": buffers, "sync": {"before": before, "after": after},
            "receiver": receiver}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m probes.tools.paced_tool")
    sub = ap.add_subparsers(dest="side", required=True)
    r = sub.add_parser("recv")
    r.add_argument("--port", type=int, required=True)
    r.add_argument("--buffer", type=int, default=0)
    r.add_argument("--deadline", type=float, default=3600.0)
    r.add_argument("--clock", choices=sorted(CLOCKS), default="monotonic")
    r.add_argument("--serve", action="store_true", help="serve one probe after another")
    s = sub.add_parser("send")
    s.add_argument("--connect", required=True)
    s.add_argument("--port", type=int, required=True)
    s.add_argument("--rate", type=float, required=True)
    s.add_argument("--size", type=int, required=True)
    s.add_argument("--duration", type=float, required=True)
    s.add_argument("--bind")
    s.add_argument("--cc")
    s.add_argument("--buffer", type=int, default=0)
    s.add_argument("--clock", choices=sorted(CLOCKS), default="monotonic")
    s.add_argument("--sync", type=int, default=DEFAULT_SYNC, choices=range(1, 65),
                   metavar="N", help="clock exchanges before and after the stream (1-64)")
    s.add_argument("--report-wait", type=float, default=30.0)
    s.add_argument("--deadline", type=float, help="the receiver reads for this long")
    a = ap.parse_args(argv)
    global _clock
    _clock = CLOCKS[a.clock]
    if a.side == "recv":
        out = receive(a.port, a.buffer, a.deadline, serve=a.serve)
    else:
        try:
            out = send(a.connect, a.port, rate_hz=a.rate, size=a.size, duration_s=a.duration,
                       bind=a.bind, cc=a.cc, buffer=a.buffer, sync=a.sync,
                       report_wait_s=a.report_wait, deadline_s=a.deadline)
        except (OSError, ValueError) as exc:  # TimeoutError and ConnectionError are OSErrors
            out = {"error": f"sender: {exc}"}
    json.dump(out, sys.stdout)
    sys.stdout.write("\n")
    return 1 if "error" in out else 0


if __name__ == "__main__":
    raise SystemExit(main())

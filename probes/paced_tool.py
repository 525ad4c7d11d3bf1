"""A paced sender and receiver of frames over one MPTCP connection (the CI-runnable stream
probe: Debian 12 has no NetPerfMeter 2.x, and its sockperf 3.7 reports half the round trip of
echoed messages, not one-way delay; see docs/testbed.md).

    python -m probes.paced_tool recv --port P [--buffer B] [--deadline S] [--clock C]
    python -m probes.paced_tool send --connect ADDR --port P --rate HZ --size BYTES
                                     --duration S [--bind ADDR] [--cc CC] [--buffer B] [--clock C]

The socket is MPTCP itself (``IPPROTO_MPTCP``, 262), not made one by mptcpize. Each frame is a
16-byte header (sequence number, send time in µs) and ``size - 16`` bytes of filler, written at
its scheduled time ``t0 + seq / rate``: the send time stamped in it is that schedule, so a frame
that waits in the application because the socket buffer is full counts that wait as delay (what
an encoder feeding the socket would see). The receiver stamps each frame with its own clock when
its last byte is read. ``--clock`` is the clock both ends stamp with: ``monotonic`` when both ends
run on one host (the emulated testbed: a step of the wall clock cannot move a stamp, and it is
the clock the delay line holds packets by), ``realtime`` (µs since the epoch, the default)
between hosts whose clocks are synchronised. Both print one JSON document on stdout when done:
the receiver when the sender closes or at ``--deadline`` (frames not complete by then are lost),
the sender after its last frame. ``--buffer 0`` (default) leaves SO_SNDBUF/SO_RCVBUF to
autotuning; what was set is read back with getsockopt and reported.
"""

from __future__ import annotations

import argparse
import json
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
VERSION = "1"
CLOCKS = {"realtime": time.CLOCK_REALTIME, "monotonic": time.CLOCK_MONOTONIC}
_clock = time.CLOCK_REALTIME


def now_us() -> int:
    return time.clock_gettime_ns(_clock) // 1000


def _buffers(sock: socket.socket, buffer: int) -> dict[str, int]:
    if buffer > 0:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, buffer)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, buffer)
    return {"set": buffer,
            "sndbuf": sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF),
            "rcvbuf": sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)}


def receive(port: int, buffer: int, deadline_s: float, accept_s: float = 30.0) -> dict[str, Any]:
    lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, IPPROTO_MPTCP)
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    _buffers(lsock, buffer)  # before listen: the window scale is chosen at the handshake
    # every local address: the sender's subflows reach any of the site's ISP addresses
    lsock.bind(("0.0.0.0", port))  # noqa: S104
    lsock.listen(1)
    print(json.dumps({"listening": port}), file=sys.stderr, flush=True)
    ready, _, _ = select.select([lsock], [], [], accept_s)
    if not ready:
        return {"error": f"no connection within {accept_s:g} s"}
    conn, peer = lsock.accept()
    # the listener stays open: the other subflows' MP_JOIN SYNs arrive on it
    buffers = _buffers(conn, buffer)
    end = time.monotonic() + deadline_s
    frames: list[list[int]] = []
    pending = b""
    need: int | None = None  # bytes of the current frame still to come, once its size is known
    header: tuple[int, int] | None = None
    got = 0
    eof = False
    while time.monotonic() < end:
        r, _, _ = select.select([conn], [], [], max(0.0, min(0.5, end - time.monotonic())))
        if not r:
            continue
        chunk = conn.recv(1 << 20)
        t = now_us()
        if not chunk:
            eof = True
            break
        pending += chunk
        while True:
            if header is None:
                if len(pending) < HEADER.size + 4:
                    break
                seq, sent = HEADER.unpack_from(pending)
                (size,) = struct.unpack_from("!I", pending, HEADER.size)
                header, need, got = (seq, sent), size, 0
            assert need is not None
            take = min(need - got, len(pending))
            got += take
            pending = pending[take:]
            if got < need:
                break
            frames.append([header[0], header[1], t, need])
            header, need = None, None
    conn.close()
    lsock.close()
    return {"tool": "mpcoa-paced", "version": VERSION, "side": "receiver", "peer": list(peer),
            "eof": eof, "frames": frames, "buffers": buffers}


def send(address: str, port: int, *, rate_hz: float, size: int, duration_s: float,
         bind: str | None, cc: str | None, buffer: int) -> dict[str, Any]:
    if size < MIN_FRAME + 4:
        raise SystemExit(f"--size: at least {MIN_FRAME + 4} bytes")
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, IPPROTO_MPTCP)
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
    behind = 0
    for seq in range(n):
        at = t0 + round(seq * 1e6 / rate_hz)
        wait = at - now_us()
        if wait > 0:
            time.sleep(wait / 1e6)
        else:
            behind += 1
        sock.sendall(HEADER.pack(seq, at) + struct.pack("!I", size) + filler)
    done = now_us()
    nodelay = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
    sock.shutdown(socket.SHUT_WR)
    sock.close()
    return {"tool": "mpcoa-paced", "version": VERSION, "side": "sender", "frames_sent": n,
            "rate_hz": rate_hz, "size": size, "nodelay": bool(nodelay),
            "first_send_us": t0, "last_write_done_us": done, "sent_late": behind, "cc": used_cc,
            "buffers": buffers}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m probes.paced_tool")
    sub = ap.add_subparsers(dest="side", required=True)
    r = sub.add_parser("recv")
    r.add_argument("--port", type=int, required=True)
    r.add_argument("--buffer", type=int, default=0)
    r.add_argument("--deadline", type=float, default=3600.0)
    r.add_argument("--clock", choices=sorted(CLOCKS), default="realtime")
    s = sub.add_parser("send")
    s.add_argument("--connect", required=True)
    s.add_argument("--port", type=int, required=True)
    s.add_argument("--rate", type=float, required=True)
    s.add_argument("--size", type=int, required=True)
    s.add_argument("--duration", type=float, required=True)
    s.add_argument("--bind")
    s.add_argument("--cc")
    s.add_argument("--buffer", type=int, default=0)
    s.add_argument("--clock", choices=sorted(CLOCKS), default="realtime")
    a = ap.parse_args(argv)
    global _clock
    _clock = CLOCKS[a.clock]
    if a.side == "recv":
        out = receive(a.port, a.buffer, a.deadline)
    else:
        out = send(a.connect, a.port, rate_hz=a.rate, size=a.size, duration_s=a.duration,
                   bind=a.bind, cc=a.cc, buffer=a.buffer)
    json.dump(out, sys.stdout)
    sys.stdout.write("\n")
    return 1 if "error" in out else 0


if __name__ == "__main__":
    raise SystemExit(main())

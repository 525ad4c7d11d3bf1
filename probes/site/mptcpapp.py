"""A plain MPTCP application, for confirming an applied answer: no path-manager control of ours,
no congestion control chosen; the site's own endpoints, limits and sysctls decide everything.

``sink ADDR PORT SECONDS``: accept one MPTCP connection on PORT (every address), count what
arrives every 0.2 s, print JSON (bytes, series). ``send SRC DST PORT SECONDS [SNDBUF]``:
connect from SRC (an application binding its source, as the plan's ``connect`` says), send for
SECONDS, print the CC the kernel chose, how many subflows MPTCP_INFO counts and whether it fell
back to TCP. `confirm` runs both halves in two namespaces and returns the receiver's goodput.
"""

from __future__ import annotations

import json
import os
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from probes.tools.addressing import any_family_listener, connecting_socket, unmapped, version

IPPROTO_MPTCP, SOL_MPTCP, MPTCP_INFO = 262, 284, 1
TCP_CONGESTION = 13
INTERVAL_S = 0.2


def sink(addr: str, port: int, seconds: float) -> dict[str, Any]:
    """`addr` is where the sender connects; the sink listens on every address, as a server
    does: subflows join on the site's other (announced) addresses."""
    # every address of both families, inside the site's namespace, as a server does
    ls = any_family_listener(port, IPPROTO_MPTCP)
    ls.listen(1)
    ls.settimeout(10.0)
    print("ready", flush=True)
    c, peer = ls.accept()
    c.settimeout(1.0)
    n, t0, t0_wall, nxt, series = 0, None, None, 0.0, []
    while True:
        try:
            b = c.recv(1 << 20)
        except TimeoutError:
            b = None
        except ConnectionResetError:
            break
        now = time.monotonic()
        if b == b"" or (t0 is not None and now - t0 > seconds + 1):
            break
        if not b:
            continue
        if t0 is None:
            t0, t0_wall = now, time.time()
        n += len(b)
        if now - t0 >= nxt:
            series.append((round(now - t0, 3), n))
            nxt += INTERVAL_S
    series.append((round(time.monotonic() - (t0 or time.monotonic()), 3), n))
    return {"bytes": n, "series": series, "peer": unmapped(peer[0]), "t0_wall": t0_wall}


def send(src: str, dst: str, port: int, seconds: float, sndbuf: int | None) -> dict[str, Any]:
    if version(src) != version(dst):
        raise ValueError(f"source {src} and destination {dst} are not of one address family")
    s = connecting_socket(dst, IPPROTO_MPTCP)
    if sndbuf:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, sndbuf)
    s.bind((src, 0))
    s.connect((dst, port))
    cc = s.getsockopt(socket.IPPROTO_TCP, TCP_CONGESTION, 16).split(b"\0")[0].decode()
    buf = b"\0" * 65536
    t0 = time.monotonic()
    s.settimeout(0.5)
    peak_subflows = 0
    next_check = t0
    while time.monotonic() < t0 + seconds:
        try:
            s.send(buf)
        except TimeoutError:
            pass
        except (BrokenPipeError, ConnectionResetError):
            break
        if time.monotonic() >= next_check:
            peak_subflows = max(peak_subflows, _subflows(s) or 0)
            next_check += 0.5
    subflows = _subflows(s)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.close()
    return {"cc": cc, "subflows": subflows, "peak_subflows": peak_subflows,
            "fallback": subflows is None,
            "sndbuf": sndbuf}


def _subflows(s: socket.socket) -> int | None:
    """Subflows besides the first, from MPTCP_INFO (None: the connection fell back to TCP)."""
    try:
        info = s.getsockopt(SOL_MPTCP, MPTCP_INFO, 256)
    except OSError:
        return None
    return info[0] if info else None


def goodput_mbps(series: list[list[float]], warmup_s: float, end_s: float | None = None
                 ) -> float:
    """Mean goodput between `warmup_s` and `end_s` (None: the end) of a sink's series."""
    pts = [p for p in series if p[0] >= warmup_s and (end_s is None or p[0] <= end_s)]
    if len(pts) < 2 or pts[-1][0] <= pts[0][0]:
        return 0.0
    return (pts[-1][1] - pts[0][1]) * 8 / (pts[-1][0] - pts[0][0]) / 1e6


def confirm(*, sender_ns: str | None, receiver_ns: str | None, source: str, destination: str,
            port: int, seconds: float, warmup_s: float, sndbuf: int | None = None
            ) -> dict[str, Any]:
    """One transfer source -> destination; the receiver's goodput after the warm-up."""
    from probes.netns import in_ns, kill_pid

    env = dict(os.environ)
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
    me = [sys.executable, "-m", "probes.site.mptcpapp"]
    srv = subprocess.Popen(  # noqa: S603 - argv list of validated values
        in_ns(receiver_ns, [*me, "sink", destination, str(port), str(seconds)]),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        if srv.stdout.readline().strip() != "ready":
            raise RuntimeError(f"sink did not start: {srv.stderr.read()[-400:]}")
        argv = [*me, "send", source, destination, str(port), str(seconds)]
        if sndbuf:
            argv.append(str(sndbuf))
        cli = subprocess.run(  # noqa: S603
            in_ns(sender_ns, argv), capture_output=True, text=True, env=env,
            timeout=seconds + 30, check=False)
        if cli.returncode != 0:
            raise RuntimeError(f"sender failed: {cli.stderr[-400:]}")
        out, err = srv.communicate(timeout=seconds + 15)
        if srv.returncode != 0:
            raise RuntimeError(f"sink failed: {err[-400:]}")
    finally:
        if srv.poll() is None:
            kill_pid(srv.pid)
    received = json.loads(out.strip().splitlines()[-1])
    sent = json.loads(cli.stdout.strip().splitlines()[-1])
    return {"goodput_mbps": goodput_mbps(received["series"], warmup_s),
            "bytes": received["bytes"], "seconds": seconds, "warmup_s": warmup_s,
            "series": received["series"], "t0_wall": received["t0_wall"], **sent}


def main(argv: list[str]) -> int:
    if argv[0] == "sink":
        print(json.dumps(sink(argv[1], int(argv[2]), float(argv[3]))), flush=True)
    else:
        sndbuf = int(argv[5]) if len(argv) > 5 else None
        print(json.dumps(send(argv[1], argv[2], int(argv[3]), float(argv[4]), sndbuf)),
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

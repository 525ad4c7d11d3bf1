"""Probes must not contaminate each other: abort a probe's connections on both ends when it
ends (the kernel keeps sending a closed socket's queued data otherwise), and wait before a probe
until both sites are quiet (no socket with queued bytes, empty qdisc backlogs), recording it.

``ss -K`` destroys sockets through inet_diag (needs CONFIG_INET_DIAG_DESTROY, present here);
destroying the TCP subflows of an MPTCP connection resets the connection on both sides.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable

from probes import environment
from probes.base import ProbeError, QuietCheck
from probes.netns import in_ns, run_many, run_ns
from probes.tools.sstats import parse_ss_msk, parse_ss_subflows


def quiet_timeout_s() -> float:
    """MPCOA_QUIET_TIMEOUT_S, 0..600 s (default 10; service/settings.py validates it)."""
    try:
        return float(environment.get("quiet_timeout_s", 10.0))
    except ValueError as exc:
        raise ProbeError(str(exc)) from None


def abort_connections(ns: str | None, ports: Iterable[int], *, listeners: bool = True) -> int:
    """Destroy every TCP socket (MPTCP subflows included) using one of ``ports``, local or
    remote, in ``ns``; returns how many ``ss`` reported. ``listeners`` False: the connections
    only, so a long-lived server's listening sockets stay (destroying one closes it)."""
    ports = sorted({int(p) for p in ports})
    if not ports or not all(0 < p < 65536 for p in ports):
        raise ProbeError(f"abort_connections: bad ports {ports}")
    expr: list[str] = ["("]
    for p in ports:
        if len(expr) > 1:
            expr.append("or")
        expr += ["sport", "=", f":{p}", "or", "dport", "=", f":{p}"]
    expr.append(")")
    which = ["-a"] if listeners else ["state", "connected"]
    out = run_ns(ns, ["ss", "-K", "-t", "-n", "-H", *which, *expr], check=False).stdout
    return sum(1 for ln in out.splitlines() if ln.strip() and not ln[0].isspace())


SOCKETS_ARGV = (["ss", "-tanH"], ["ss", "-ManH"])
QDISCS_ARGV = ["tc", "-s", "-j", "qdisc", "show"]


def busy_sockets(ns: str | None) -> list[tuple[str, int]]:
    """(description, queued bytes) of sockets that can still put traffic on the wire: data in
    Send-Q, or in Recv-Q of an established connection (its reader is still there). Unread data
    on a connection that is closing (an aborted probe's MPTCP socket lingering in FIN-WAIT-2
    without subflows, seen on a 1 %-loss path) sends nothing and is not waited for."""
    t, m = (run_ns(ns, argv, check=False).stdout for argv in SOCKETS_ARGV)
    return still_sending(ns or "host", t, m)


def still_sending(where: str, tcp_text: str, mptcp_text: str) -> list[tuple[str, int]]:
    """`busy_sockets` on the text of `ss -tanH` and `ss -ManH`."""
    out = []
    for kind, socks in (("tcp", parse_ss_subflows(tcp_text)), ("mptcp", parse_ss_msk(mptcp_text))):
        for s in socks:
            q = s["send_q"] + (s["recv_q"] if s["state"] == "ESTAB" else 0)
            if q > 0 and s["state"] != "LISTEN":
                out.append((f"{where} {kind} {s['local']}:{s['lport']}->"
                            f"{s['remote']}:{s['rport']} {s['state']} {q} B", q))
    return out


def qdisc_backlogs(ns: str | None, ignore: Iterable[str] = ()) -> list[tuple[str, int]]:
    """(description, backlog bytes) of every qdisc with a backlog in ``ns``, leaving out the
    devices in ``ignore``."""
    return backlogs_in(ns, run_ns(ns, QDISCS_ARGV, check=False).stdout, ignore)


def backlogs_in(ns: str | None, text: str, ignore: Iterable[str] = ()) -> list[tuple[str, int]]:
    """`qdisc_backlogs` on the text of `QDISCS_ARGV`."""
    skip = set(ignore)
    try:
        rows = json.loads(text or "[]")
    except ValueError:
        return []
    return [(f"{ns or 'host'} qdisc {r.get('kind')} {r.get('dev')} {r['backlog']} B",
             int(r["backlog"])) for r in rows
            if int(r.get("backlog") or 0) > 0 and r.get("dev") not in skip]


def wait_quiet(socket_ns: list[str], qdisc_ns: list[str], timeout_s: float | None = None,
               interval_s: float = 0.2, ignore: dict[str, list[str]] | None = None
               ) -> QuietCheck:
    """Poll until nothing is queued in ``socket_ns`` and no qdisc of ``qdisc_ns`` has a
    backlog, at most ``timeout_s``; the result says what was still busy. ``ignore``:
    namespace -> devices whose backlog is other traffic's (not waited for)."""
    ignore = ignore or {}
    timeout_s = quiet_timeout_s() if timeout_s is None else timeout_s
    t0 = time.monotonic()
    while True:
        socks, qds = _busy_now(socket_ns, qdisc_ns, ignore)
        waited = time.monotonic() - t0
        if (not socks and not qds) or waited >= timeout_s:
            return QuietCheck(
                waited_s=round(waited, 3), queued_bytes=sum(q for _, q in socks),
                backlog_bytes=sum(q for _, q in qds), quiet=not socks and not qds,
                checked=sorted(set(socket_ns) | set(qdisc_ns)),
                busy=[d for d, _ in socks + qds][:20])
        time.sleep(interval_s)


def _busy_now(socket_ns: list[str], qdisc_ns: list[str], ignore: dict[str, list[str]]
              ) -> tuple[list[tuple[str, int]], list[tuple[str, int]]]:
    """`busy_sockets` of each of `socket_ns` and `qdisc_backlogs` of each of `qdisc_ns`, every
    table read at once (`netns.run_many`)."""
    done = run_many([in_ns(ns, argv) for ns in socket_ns for argv in SOCKETS_ARGV]
                    + [in_ns(ns, QDISCS_ARGV) for ns in qdisc_ns])
    socks = [b for i, ns in enumerate(socket_ns)
             for b in still_sending(ns or "host", done[2 * i].stdout, done[2 * i + 1].stdout)]
    rest = done[2 * len(socket_ns):]
    qds = [b for ns, cp in zip(qdisc_ns, rest, strict=True)
           for b in backlogs_in(ns, cp.stdout, ignore.get(ns, ()))]
    return socks, qds

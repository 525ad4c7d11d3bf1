"""Parsing ``ss -tin`` (TCP subflows with their ``tcp-ulp-mptcp`` info) and ``ss -Min`` (MPTCP
connections). Subflows are grouped by the connection token that follows the ``/`` in
``token:LOCAL(id:x)/REMOTE(id:y)``, which is the token ``ss -M`` shows for the connection."""

from __future__ import annotations

import re
from typing import Any

_ADDR = re.compile(r"^\[?(?P<addr>[^\]%]+?)(?:%[^\]:]+)?\]?:(?P<port>\d+|\*)$")
_KV = re.compile(r"\b(bytes_acked|bytes_sent|bytes_received|bytes_retrans|cwnd|subflows):(\d+)")
_RTT = re.compile(r"\brtt:([\d.]+)/")
_MINRTT = re.compile(r"\bminrtt:([\d.]+)")
_RTO = re.compile(r"\brto:([\d.]+)")
_SKMEM = re.compile(r"\bskmem:\(([^)]*)\)")
_SF_TOKEN = re.compile(
    r"tcp-ulp-mptcp flags:(\S*) token:([0-9a-f]+)\(id:(\d+)\)/([0-9a-f]+)\(id:(\d+)\)"
)
_MSK_TOKEN = re.compile(r"\btoken:([0-9a-f]+)")


def _split_addr(s: str) -> tuple[str, int]:
    m = _ADDR.match(s)
    if not m:
        return s, 0
    p = m.group("port")
    addr = m.group("addr")
    if addr.startswith("::ffff:") and "." in addr:  # v4-mapped (a dual-stack listener's side)
        addr = addr[len("::ffff:"):]
    return addr, int(p) if p.isdigit() else 0


def _float(rx: re.Pattern[str], info: str) -> float | None:
    m = rx.search(info)
    return float(m.group(1)) if m else None


def parse_skmem(info: str) -> dict[str, int]:
    """``skmem:(r0,rb131072,t0,tb87040,...)`` -> {"r": 0, "rb": 131072, "t": 0, "tb": 87040, ...}"""
    m = _SKMEM.search(info)
    out: dict[str, int] = {}
    for item in (m.group(1).split(",") if m else []):
        k = item.rstrip("0123456789")
        if k and item[len(k):].isdigit():
            out[k] = int(item[len(k):])
    return out


def _queues(fields: list[str]) -> tuple[str, int, int]:
    """(state, Recv-Q, Send-Q) of a header line (``ss -H`` with or without a state column)."""
    if fields and fields[0].isdigit():
        return "", int(fields[0]), int(fields[1]) if len(fields) > 1 and fields[1].isdigit() else 0
    rq = int(fields[1]) if len(fields) > 1 and fields[1].isdigit() else 0
    sq = int(fields[2]) if len(fields) > 2 and fields[2].isdigit() else 0
    return fields[0] if fields else "", rq, sq


def _records(text: str) -> list[tuple[list[str], str]]:
    """(header fields, info text) per socket: a header line, then indented info lines."""
    out: list[tuple[list[str], str]] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        if line[0] in " \t" and out:
            out[-1] = (out[-1][0], out[-1][1] + " " + line.strip())
        else:
            out.append((line.split(), ""))
    return out


def _endpoints(fields: list[str]) -> tuple[str, int, str, int] | None:
    addrs = [f for f in fields if _ADDR.match(f)]
    if len(addrs) < 2:
        return None
    local, lport = _split_addr(addrs[-2])
    remote, rport = _split_addr(addrs[-1])
    return local, lport, remote, rport


def parse_ss_subflows(text: str) -> list[dict[str, Any]]:
    """TCP sockets from ``ss -tin``; MPTCP subflows carry ``token`` (else None)."""
    out = []
    for fields, info in _records(text):
        ep = _endpoints(fields)
        if ep is None:
            continue
        kv = {k: int(v) for k, v in _KV.findall(info)}
        m = _SF_TOKEN.search(info)
        rtt = _RTT.search(info)
        skmem = parse_skmem(info)
        state, rq, sq = _queues(fields)
        out.append({
            "state": state, "recv_q": rq, "send_q": sq,
            "min_rtt_ms": _float(_MINRTT, info), "rto_ms": _float(_RTO, info),
            "sndbuf": skmem.get("tb"), "rcvbuf": skmem.get("rb"),
            "local": ep[0], "lport": ep[1], "remote": ep[2], "rport": ep[3],
            "bytes_acked": kv.get("bytes_acked", 0),
            "bytes_sent": kv.get("bytes_sent", 0),
            "bytes_received": kv.get("bytes_received", 0),
            "bytes_retrans": kv.get("bytes_retrans", 0),
            "rtt_ms": float(rtt.group(1)) if rtt else None,
            "token": m.group(4) if m else None,
            "flags": m.group(1) if m else None,
            "local_id": int(m.group(3)) if m else None,
            "remote_id": int(m.group(5)) if m else None,
            "backup": bool(m and ("b" in m.group(1).lower())),
            "cc": next((w for w in info.split() if not w.startswith("skmem:")), None),
        })
    return out


def parse_ss_msk(text: str) -> list[dict[str, Any]]:
    """MPTCP sockets from ``ss -Min``: token, additional subflows, fallback flag."""
    out = []
    for fields, info in _records(text):
        ep = _endpoints(fields)
        if ep is None:
            continue
        kv = {k: int(v) for k, v in _KV.findall(info)}
        m = _MSK_TOKEN.search(info)
        skmem = parse_skmem(info)
        state, rq, sq = _queues(fields)
        out.append({
            "state": state, "recv_q": rq, "send_q": sq,
            "sndbuf": skmem.get("tb"), "rcvbuf": skmem.get("rb"),
            "local": ep[0], "lport": ep[1], "remote": ep[2], "rport": ep[3],
            "token": m.group(1) if m else None,
            "subflows": kv.get("subflows", 0),
            "fallback": " fallback" in f" {info}",
        })
    return out


def split_addr(s: str) -> tuple[str, int]:
    """(address, port) of an ``ss`` address column; v4-mapped addresses come back as IPv4."""
    return _split_addr(s)

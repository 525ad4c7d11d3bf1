"""What the kernel really did during a probe, shared by every backend: the data connection's
subflows (names, backup flag, bytes, RTT, RTO, buffers), MPTCP fallback, and the buffers of the
MPTCP sockets on both ends, from ``ss`` samples taken while the tool runs."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from probes.base import ObservedSubflow
from probes.netns import run_ns
from probes.tools.context import HostPair
from probes.tools.sstats import parse_ss_msk, parse_ss_subflows


class SsPoller(threading.Thread):
    """Samples ``ss`` every ``interval`` s during a run.

    Sender: ``ss -tinm`` (subflows) and ``ss -Minm`` (MPTCP sockets) of connections to
    ``dport``; receiver (when given): ``ss -Minm`` of connections on ``dport``, every
    ``receiver_every``-th sample (only its buffers are needed). A failing sample is counted and
    waited out like a good one, never retried at once. ``wait(seconds)`` is the pause between
    samples: by default the stop event's wait, which `stop` cuts short.
    """

    def __init__(self, ns: str | None, dport: int, interval: float = 0.2, *,
                 receiver_ns: str | None = None, watch_receiver: bool = False,
                 receiver_every: int = 5, ss: str = "ss",
                 wait: Callable[[float], object] | None = None) -> None:
        super().__init__(daemon=True)
        self.ns, self.dport, self.interval, self.ss = ns, dport, interval, ss
        self.receiver_ns, self.watch_receiver = receiver_ns, watch_receiver
        self.receiver_every = max(1, receiver_every)
        self.subflows: dict[tuple, dict[str, Any]] = {}
        self.msk: dict[str, dict[str, Any]] = {}
        self.receiver_msk: dict[tuple, dict[str, Any]] = {}
        self.plain_tcp: dict[tuple, dict[str, Any]] = {}
        self.samples = 0
        self.errors = 0
        self.last_error = ""
        self.last_raw = ""
        self._stop_ev = threading.Event()
        self._wait = wait or self._stop_ev.wait

    def sample(self) -> None:
        t = run_ns(self.ns, [self.ss, "-tinmH", "state", "established"], check=False).stdout
        m = run_ns(self.ns, [self.ss, "-MinmH"], check=False).stdout
        for sf in parse_ss_subflows(t):
            if sf["rport"] != self.dport:
                continue
            key = (sf["token"], sf["local"], sf["lport"], sf["remote"], sf["rport"])
            if sf["token"] is None:
                self.plain_tcp[key] = sf
            else:
                prev = self.subflows.get(key, {})
                sf["max_sndbuf"] = max(sf["sndbuf"] or 0, prev.get("max_sndbuf", 0))
                sf["max_rcvbuf"] = max(sf["rcvbuf"] or 0, prev.get("max_rcvbuf", 0))
                self.subflows[key] = sf
        for ms in parse_ss_msk(m):
            if ms["rport"] == self.dport and ms["token"]:
                prev = self.msk.get(ms["token"], {})
                ms["fallback"] = ms["fallback"] or prev.get("fallback", False)
                _keep_max_buffers(ms, prev)
                self.msk[ms["token"]] = ms
        if self.watch_receiver and self.samples % self.receiver_every == 0:
            r = run_ns(self.receiver_ns, [self.ss, "-MinmH"], check=False).stdout
            for ms in parse_ss_msk(r):
                if ms["lport"] == self.dport and ms["rport"]:
                    key = (ms["remote"], ms["rport"])
                    _keep_max_buffers(ms, self.receiver_msk.get(key, {}))
                    self.receiver_msk[key] = ms
        self.samples += 1
        self.last_raw = t + "\n---\n" + m

    def run(self) -> None:
        while not self._stop_ev.is_set():
            try:
                self.sample()
            except Exception as exc:
                self.errors += 1
                self.last_error = str(exc)[:300]
            self._wait(self.interval)

    def stop(self) -> None:
        self._stop_ev.set()
        self.join(timeout=5)

    def data_connection(self) -> tuple[str | None, list[dict[str, Any]]]:
        """Token and subflows of the connection that carried the most bytes."""
        by_token: dict[str, list[dict[str, Any]]] = {}
        for (token, *_), sf in self.subflows.items():
            by_token.setdefault(token, []).append(sf)
        if not by_token:
            return None, []
        token = max(by_token, key=lambda k: sum(s["bytes_acked"] for s in by_token[k]))
        return token, by_token[token]


def _keep_max_buffers(ms: dict[str, Any], prev: dict[str, Any]) -> None:
    """Autotuning grows buffers during a run: keep the largest value seen, and the latest
    (``last_sndbuf``, ``last_rcvbuf``): a socket's buffer once its tool set it. A passive side
    that sets the asked size only when the flow identifies itself (NetPerfMeter's accepted
    socket, one RTT after accept) shows the kernel's defaults before, so the largest seen is not
    what the run had there."""
    for k in ("sndbuf", "rcvbuf"):
        vals = [v for v in (ms.get(k), prev.get(k)) if v is not None]
        ms[f"last_{k}"] = ms.get(k) if ms.get(k) is not None else prev.get(f"last_{k}")
        ms[k] = max(vals) if vals else None


@dataclass
class Observation:
    """The data connection as the kernel ran it."""

    token: str | None
    subflows: list[ObservedSubflow] = field(default_factory=list)
    fallback_reason: str | None = None
    buffers: dict[str, int | None] = field(default_factory=dict)  #: the largest seen
    buffers_last: dict[str, int | None] = field(default_factory=dict)  #: the latest seen
    raw: dict[str, Any] = field(default_factory=dict)

    def buffers_for(self, asked: int | None) -> dict[str, int | None]:
        """The buffers to check a request against: a size asked is locked once the tool sets
        it, so the latest sample is the run's; autotuned buffers grow, so the largest is."""
        return dict(self.buffers if asked is None else self.buffers_last)

    @property
    def subflow_bytes(self) -> dict[str, int]:
        return {s.name: s.bytes_acked for s in self.subflows}

    @property
    def backup_seen(self) -> list[str]:
        return sorted(s.name for s in self.subflows if s.backup)


def observe(poller: SsPoller, pair: HostPair) -> Observation:
    """Summarise a finished poller: subflows by name, fallback, effective buffers."""
    token, sfs = poller.data_connection()
    by_name: dict[str, ObservedSubflow] = {}
    for sf in sfs:
        name = pair.subflow_name(sf["local"], sf["remote"]) or f"{sf['local']}-{sf['remote']}"
        prev = by_name.get(name)  # a re-created subflow: add its bytes to the first one's
        by_name[name] = ObservedSubflow(
            name=name, backup=sf["backup"] or bool(prev and prev.backup),
            bytes_acked=sf["bytes_acked"] + (prev.bytes_acked if prev else 0),
            bytes_retrans=sf["bytes_retrans"] + (prev.bytes_retrans if prev else 0),
            rtt_ms=sf["rtt_ms"], min_rtt_ms=sf["min_rtt_ms"], rto_ms=sf["rto_ms"],
            sndbuf=sf.get("max_sndbuf") or sf["sndbuf"],
            rcvbuf=sf.get("max_rcvbuf") or sf["rcvbuf"])
    msk = poller.msk.get(token or "", {})
    fallback = None
    if token is None:
        fallback = "no MPTCP subflow seen on the sender (plain TCP)"
    elif not token.strip("0"):
        # made plain TCP inside connect() (the blackhole lockout, a token that could not be
        # made): the subflow never got a token, and `ss -M` has no socket under it
        fallback = "MPTCP connection made plain TCP at connect (the subflow has no token)"
    elif msk.get("fallback"):
        fallback = "MPTCP connection fell back to TCP"
    peer = poller.receiver_msk.get((msk.get("local"), msk.get("lport")), {})
    buffers, last = ({f"{end}_{k}": sock.get(f"{prefix}{k}") for end, sock in
                      (("sender", msk), ("receiver", peer)) for k in ("sndbuf", "rcvbuf")}
                     for prefix in ("", "last_"))
    raw = {"ss_last": poller.last_raw, "ss_samples": poller.samples,
           "ss_errors": poller.errors, "ss_last_error": poller.last_error,
           "plain_tcp_connections": len(poller.plain_tcp)}
    return Observation(token=token, subflows=sorted(by_name.values(), key=lambda s: s.name),
                       fallback_reason=fallback, buffers=buffers, buffers_last=last, raw=raw)

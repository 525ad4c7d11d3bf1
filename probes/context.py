"""Where a measurement runs: the sender and receiver hosts (namespaces), their addresses, and
the helpers every backend shares (kernel/MPTCP settings, subflow control, per-subflow bytes)."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from probes.base import ProbeError
from probes.netns import in_ns, kill_pid, run, run_ns, sysctl_get, sysctl_set
from probes.sstats import parse_ss_msk, parse_ss_subflows


@dataclass
class HostPair:
    """Sender and receiver host. ``*_ns`` None = this host's own network stack.

    ``sender_addrs``/``receiver_addrs``: ISP label -> address, in ISP order; the first receiver
    address is where the connection starts when every subflow may carry payload.
    ``userspace_pm``: the backend may switch the sender to the userspace path manager for subflow
    control (true on the emulated testbed, whose namespaces are ours).
    """

    sender_ns: str | None
    receiver_ns: str | None
    sender_addrs: dict[str, str]
    receiver_addrs: dict[str, str]
    userspace_pm: bool = False
    testbed: str | None = None
    workdir: Path = field(default_factory=lambda: Path(tempfile.gettempdir()))

    def subflow_name(self, local: str, remote: str) -> str | None:
        lo = next((k for k, v in self.sender_addrs.items() if v == local), None)
        re = next((k for k, v in self.receiver_addrs.items() if v == remote), None)
        return f"{lo}-{re}" if lo and re else None

    def all_subflows(self) -> list[str]:
        return [f"{lo}-{re}" for lo in self.sender_addrs for re in self.receiver_addrs]

    def sender(self, argv: list[str]) -> list[str]:
        return in_ns(self.sender_ns, argv)

    def receiver(self, argv: list[str]) -> list[str]:
        return in_ns(self.receiver_ns, argv)


MPTCP_SYSCTLS = ("net.mptcp.enabled", "net.mptcp.path_manager", "net.mptcp.pm_type",
                 "net.mptcp.scheduler", "net.mptcp.checksum_enabled")


def kernel_info(ns: str | None = None) -> dict[str, Any]:
    info: dict[str, Any] = {"release": platform.release(), "machine": platform.machine()}
    for key in ("net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem", "net.core.rmem_max",
                "net.core.wmem_max", "net.ipv4.tcp_congestion_control",
                "net.ipv4.tcp_available_congestion_control"):
        info[key] = sysctl_get(ns, key)
    return info


def mptcp_settings(ns: str | None) -> dict[str, Any]:
    out: dict[str, Any] = {k: sysctl_get(ns, k) for k in MPTCP_SYSCTLS}
    base = ["ip"] if ns is None else ["ip", "-n", ns]
    ep = run([*base, "mptcp", "endpoint", "show"], check=False)
    lim = run([*base, "mptcp", "limits", "show"], check=False)
    out["endpoints"] = [ln.strip() for ln in ep.stdout.splitlines() if ln.strip()]
    out["limits"] = lim.stdout.strip()
    return out


def set_path_manager(ns: str | None, kind: str) -> None:
    """``kernel`` or ``userspace`` for new connections in ``ns`` (path_manager, or pm_type)."""
    if sysctl_get(ns, "net.mptcp.path_manager") is not None:
        sysctl_set(ns, {"net.mptcp.path_manager": kind})
    else:
        sysctl_set(ns, {"net.mptcp.pm_type": 1 if kind == "userspace" else 0})


class SubflowControl:
    """Userspace path manager in the sender's namespace for one run (context manager).

    Creates every subflow of ``pairs`` ((local addr, local id, remote addr, backup)); the ones
    with backup=True stay established but carry no payload.
    """

    def __init__(self, pair: HostPair, pairs: list[tuple[str, int, str, bool]], dport: int) -> None:
        self.pair = pair
        self.pairs = pairs
        self.dport = dport
        self.proc: subprocess.Popen[bytes] | None = None
        self.dir = Path(tempfile.mkdtemp(prefix="mpcoa-upm-", dir=pair.workdir))
        self.events: list[dict[str, Any]] = []

    def __enter__(self) -> SubflowControl:
        cfg = {
            "dport": self.dport,
            "ready_file": str(self.dir / "ready"),
            "subflows": [{"local": lo, "local_id": i, "remote": re, "backup": b}
                         for lo, i, re, b in self.pairs],
        }
        (self.dir / "upm.json").write_text(json.dumps(cfg))
        set_path_manager(self.pair.sender_ns, "userspace")
        env = dict(os.environ)
        env["PYTHONPATH"] = str(Path(__file__).resolve().parent.parent)
        self.log = open(self.dir / "events.jsonl", "wb")
        self.proc = subprocess.Popen(  # noqa: S603 - fixed argv
            self.pair.sender([sys.executable, "-m", "probes.upm", str(self.dir / "upm.json")]),
            stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.STDOUT, env=env,
        )
        deadline = time.monotonic() + 10
        while not (self.dir / "ready").exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.__exit__(None, None, None)
                raise ProbeError("userspace path manager helper did not start: "
                                 + (self.dir / "events.jsonl").read_text(errors="replace")[-400:])
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None and self.proc.poll() is None:
            kill_pid(self.proc.pid)
        if self.proc is not None:
            self.proc.wait()
        self.log.close()
        set_path_manager(self.pair.sender_ns, "kernel")
        for ln in (self.dir / "events.jsonl").read_text(errors="replace").splitlines():
            try:
                self.events.append(json.loads(ln))
            except ValueError:
                self.events.append({"text": ln})


class SsPoller(threading.Thread):
    """Samples ``ss -Mti`` / ``ss -ti`` on the sender every ``interval`` s during a run.

    Keeps, per MPTCP connection (token) to ``dport``, the last counters of each subflow and the
    MPTCP-level info (subflow count, fallback flag).
    """

    def __init__(self, ns: str | None, dport: int, interval: float = 0.2) -> None:
        super().__init__(daemon=True)
        self.ns, self.dport, self.interval = ns, dport, interval
        self.subflows: dict[tuple, dict[str, Any]] = {}
        self.msk: dict[str, dict[str, Any]] = {}
        self.plain_tcp: dict[tuple, dict[str, Any]] = {}
        self.samples = 0
        self.last_raw = ""
        self._stop_ev = threading.Event()

    def sample(self) -> None:
        t = run_ns(self.ns, ["ss", "-tinH", "state", "established"], check=False).stdout
        m = run_ns(self.ns, ["ss", "-MinH"], check=False).stdout
        for sf in parse_ss_subflows(t):
            if sf["rport"] != self.dport:
                continue
            key = (sf["token"], sf["local"], sf["lport"], sf["remote"], sf["rport"])
            if sf["token"] is None:
                self.plain_tcp[key] = sf
            else:
                self.subflows[key] = sf
        for ms in parse_ss_msk(m):
            if ms["rport"] == self.dport and ms["token"]:
                prev = self.msk.get(ms["token"], {})
                ms["fallback"] = ms["fallback"] or prev.get("fallback", False)
                self.msk[ms["token"]] = ms
        self.samples += 1
        self.last_raw = t + "\n---\n" + m

    def run(self) -> None:
        while not self._stop_ev.is_set():
            try:
                self.sample()
            except Exception:  # noqa: S112 - sampling is best effort, keep going
                continue
            self._stop_ev.wait(self.interval)

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

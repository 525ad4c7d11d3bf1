"""Where a measurement runs: the sender and receiver hosts (namespaces), their addresses, and
the kernel/MPTCP settings every backend records."""

from __future__ import annotations

import platform
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from probes.netns import in_ns, run_many, sysctl_argv, sysctl_get_many, sysctl_values


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
    #: namespaces between the sites (the testbed's core) whose qdisc backlog must be empty too
    transit_ns: list[str] = field(default_factory=list)
    #: subflow name -> the least one-way delay its path can have, sender to receiver (ms), where
    #: it is known (the emulated testbed's configured delay less its jitter); empty: unknown
    path_floor_ms: dict[str, float] = field(default_factory=dict)
    #: namespace -> devices whose queue other traffic keeps busy (the testbed's competing
    #: traffic): the quiet check before a probe does not wait for their backlog to drain
    shared_qdiscs: dict[str, list[str]] = field(default_factory=dict)
    workdir: Path = field(default_factory=lambda: Path(tempfile.gettempdir()))

    def subflow_name(self, local: str, remote: str) -> str | None:
        lo = next((k for k, v in self.sender_addrs.items() if v == local), None)
        re = next((k for k, v in self.receiver_addrs.items() if v == remote), None)
        return f"{lo}-{re}" if lo and re else None

    def delay_floor_ms(self) -> float | None:
        """The least one-way delay any of the pair's subflows can have (None: unknown): no byte
        of a probe arrives sooner, whichever subflow carried it."""
        return min(self.path_floor_ms.values()) if self.path_floor_ms else None

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
    info.update(sysctl_get_many(ns, (
        "net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem", "net.core.rmem_max", "net.core.wmem_max",
        "net.ipv4.tcp_congestion_control", "net.ipv4.tcp_available_congestion_control")))
    return info


def mptcp_settings(ns: str | None) -> dict[str, Any]:
    return mptcp_settings_of([ns])[0]


def mptcp_settings_of(namespaces: list[str | None]) -> list[dict[str, Any]]:
    """`mptcp_settings` of each namespace, every read at once (`netns.run_many`)."""
    commands = []
    for ns in namespaces:
        base = ["ip"] if ns is None else ["ip", "-n", ns]
        commands += [in_ns(ns, sysctl_argv(MPTCP_SYSCTLS)), [*base, "mptcp", "endpoint", "show"],
                     [*base, "mptcp", "limits", "show"]]
    done = run_many(commands)
    out = []
    for i in range(len(namespaces)):
        sysctls, ep, lim = done[3 * i:3 * i + 3]
        one: dict[str, Any] = sysctl_values(sysctls.stdout, MPTCP_SYSCTLS)
        one["endpoints"] = [ln.strip() for ln in ep.stdout.splitlines() if ln.strip()]
        one["limits"] = lim.stdout.strip()
        out.append(one)
    return out

"""Whether MPTCP can work on a host (or a testbed namespace) now: the ``mptcp_health`` of its
capability report.

It carries the kernel's MPTCP health counters (`probes.tools.mptcp_counters`), whether the
kernel's blackhole lockout is in force, and the ``net.mptcp`` settings an answer's plan relies
on. The lockout (net/mptcp/ctrl.c: ``mptcp_active_disable``) is kept per network namespace and
shown nowhere: no sysctl or file holds its start or its count. What is observable is its effect:
while it lasts, every active MPTCP connect is made plain TCP before its SYN leaves, and the
kernel counts it in ``MPCapableSYNTXDisabled``. So the check opens one MPTCP connect to a
loopback port that is bound and not listening (refused at once, nothing established: a
successful connect over loopback would end the lockout, ``mptcp_active_enable``) and looks
whether that counter rose. Writing ``net.mptcp.blackhole_timeout`` ends a lockout; 0 turns the
detector off.
"""

from __future__ import annotations

import re
import sys
from typing import Any

from probes.netns import run_ns, sysctl_get_many
from probes.tools.mptcp_counters import health_counters, read_counters

#: the kernel's upper bound on ``ip mptcp limits`` subflows and add_addr_accepted
KERNEL_MAX_SUBFLOWS = 8

SETTINGS = ("net.mptcp.enabled", "net.mptcp.allow_join_initial_addr_port",
            "net.mptcp.path_manager", "net.mptcp.pm_type", "net.mptcp.blackhole_timeout",
            "net.mptcp.syn_retrans_before_tcp_fallback", "net.mptcp.stale_loss_cnt")

#: one non-blocking MPTCP connect to a bound, unlistened loopback port: the kernel decides
#: inside connect() whether the lockout turns it into TCP
_LOCKOUT_CONNECT = (
    "import socket\n"
    "hold = socket.socket()\n"
    "hold.bind(('127.0.0.1', 0))\n"
    "s = socket.socket(socket.AF_INET, socket.SOCK_STREAM, 262)\n"
    "s.setblocking(False)\n"
    "try:\n"
    "    s.connect(hold.getsockname())\n"
    "except OSError:\n"
    "    pass\n"
)

DISABLED = "MPCapableSYNTXDisabled"


def parse_limits(text: str) -> dict[str, int]:
    """``ip mptcp limits show`` -> {"add_addr_accepted": n, "subflows": m}."""
    return {k: int(v) for k, v in re.findall(r"\b(add_addr_accepted|subflows)\s+(\d+)", text)}


def lockout_in_force(ns: str | None, blackhole_timeout: str | None) -> bool | None:
    """Whether the blackhole lockout turns an MPTCP connect into TCP now (None: not known, as
    MPTCP sockets cannot be opened or the counters read)."""
    if blackhole_timeout == "0":
        return False  # the detector is off: no lockout starts or lasts
    before = read_counters([ns])[0]
    cp = run_ns(ns, [sys.executable, "-c", _LOCKOUT_CONNECT], check=False, timeout=10)
    after = read_counters([ns])[0]
    if cp.returncode != 0 or DISABLED not in before or DISABLED not in after:
        return None
    return after[DISABLED] > before[DISABLED]


def judge(settings: dict[str, str | None], limits: dict[str, int],
          lockout: bool | None) -> tuple[list[str], list[str]]:
    """(problems, warnings): what stops MPTCP from working here, and what an answer's plan
    relies on that is not so."""
    problems, warnings = [], []
    if settings.get("net.mptcp.enabled") not in (None, "1"):
        problems.append("MPTCP disabled: net.mptcp.enabled is "
                        f"{settings['net.mptcp.enabled']}")
    if lockout:
        problems.append(
            "MPTCP blackhole lockout in force: the kernel makes every new MPTCP connection "
            "plain TCP (an earlier connection's MP_CAPABLE SYNs were dropped on the path) for "
            f"net.mptcp.blackhole_timeout={settings.get('net.mptcp.blackhole_timeout')} s, "
            "doubling per repeat up to 64x; fix the path, then end it by writing "
            "net.mptcp.blackhole_timeout")
    if settings.get("net.mptcp.allow_join_initial_addr_port") == "0":
        warnings.append("net.mptcp.allow_join_initial_addr_port=0: the peer's subflows to this "
                        "host's initial address and port are refused, which the plan's "
                        "full mesh needs")
    for key, value in limits.items():
        if value > KERNEL_MAX_SUBFLOWS:
            warnings.append(f"ip mptcp limits {key} {value}: above the kernel's maximum of "
                            f"{KERNEL_MAX_SUBFLOWS}")
    return problems, warnings


def mptcp_health(ns: str | None = None) -> dict[str, Any]:
    """The host's (or namespace `ns`'s) MPTCP health, as its capability report carries it."""
    settings = sysctl_get_many(ns, SETTINGS)
    base = ["ip"] if ns is None else ["ip", "-n", ns]
    cp = run_ns(None, [*base, "mptcp", "limits", "show"], check=False)
    limits = parse_limits(cp.stdout) if cp.returncode == 0 else {}
    enabled = settings.get("net.mptcp.enabled") == "1"
    timeout = settings.get("net.mptcp.blackhole_timeout")
    lockout = lockout_in_force(ns, timeout) if enabled else None
    problems, warnings = judge(settings, limits, lockout)
    return {
        "counters": health_counters(read_counters([ns])[0]),
        "lockout": {"in_force": lockout,
                    "blackhole_timeout_s": None if timeout is None else int(timeout)},
        "settings": {k.removeprefix("net.mptcp."): v for k, v in settings.items()},
        "limits": limits,
        "kernel_max_subflows": KERNEL_MAX_SUBFLOWS,
        "problems": problems,
        "warnings": warnings,
    }


def subflow_warning(local_isps: int, remote_isps: int) -> str | None:
    """A warning when the largest subset (every pair of the sites' ISPs) needs more additional
    subflows than the kernel allows (`KERNEL_MAX_SUBFLOWS`); None when it fits."""
    extra = local_isps * remote_isps - 1
    if extra <= KERNEL_MAX_SUBFLOWS:
        return None
    return (f"{local_isps} x {remote_isps} ISPs make {extra + 1} subflows: a subset of more "
            f"than {KERNEL_MAX_SUBFLOWS + 1} cannot be set up (the kernel allows "
            f"{KERNEL_MAX_SUBFLOWS} subflows beside the first)")

"""Per-host capability check: MPTCP enabled, congestion controls, kernel SCTP, a tool's version.

A missing capability is reported with a clear error naming it (CapabilityError)."""

from __future__ import annotations

import re
import shutil
import socket
from typing import Any

from probes.base import CapabilityError
from probes.netns import run, sysctl_get_many

IPPROTO_SCTP = 132
NETPERFMETER_VERSION = r"(?:NetPerfMeter|Network Performance Meter)\D*(\d+\.\d+(?:\.\d+)?)"
IPERF3_VERSION = r"iperf (\d+\.\d+(?:\.\d+)?)"


def kernel_has_sctp() -> bool:
    """Kernel SCTP (NetPerfMeter 1.9 needs it even as a passive node)."""
    try:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM, IPPROTO_SCTP)
    except OSError:
        return False
    s.close()
    return True


def tool_version(binary: str, args: list[str], pattern: str) -> str | None:
    if shutil.which(binary) is None:
        return None
    cp = run([binary, *args], check=False, timeout=10)
    m = re.search(pattern, cp.stdout + cp.stderr)
    return m.group(1) if m else "unknown"


def check_host(ns: str | None = None) -> dict[str, Any]:
    """What one host (namespace) offers; nothing raised here, see ``require``."""
    got = sysctl_get_many(ns, ("net.mptcp.enabled", "net.ipv4.tcp_available_congestion_control",
                               "net.mptcp.available_path_managers", "net.mptcp.pm_type"))
    enabled = got["net.mptcp.enabled"]
    ccs = (got["net.ipv4.tcp_available_congestion_control"] or "").split()
    pms = (got["net.mptcp.available_path_managers"] or "").split()
    if not pms and got["net.mptcp.pm_type"] is not None:
        pms = ["kernel", "userspace"]
    return {
        "namespace": ns,
        "mptcp_enabled": enabled == "1",
        "mptcp_sysctl_present": enabled is not None,
        "congestion_controls": ccs,
        "path_managers": pms,
        "sctp": kernel_has_sctp(),
    }


def require(
    host: dict[str, Any],
    *,
    mptcp: bool = True,
    ccs: list[str] | tuple[str, ...] = (),
    sctp: bool = False,
) -> None:
    """Raise CapabilityError naming the first missing capability."""
    where = f" (namespace {host['namespace']})" if host.get("namespace") else ""
    if mptcp and not host["mptcp_sysctl_present"]:
        raise CapabilityError(f"kernel MPTCP: not available{where} (no net.mptcp sysctls)")
    if mptcp and not host["mptcp_enabled"]:
        raise CapabilityError(f"kernel MPTCP: disabled{where}; set net.mptcp.enabled=1")
    for cc in ccs:
        if cc not in host["congestion_controls"]:
            raise CapabilityError(
                f"congestion control {cc!r}: not available{where} "
                f"(have: {', '.join(host['congestion_controls'])})")
    if sctp and not host["sctp"]:
        raise CapabilityError(f"kernel SCTP: not available{where} (NetPerfMeter 1.9 needs it)")


def require_pair(caps: dict[str, Any], cc: str) -> None:
    """Both ends of a probe can run it: kernel MPTCP enabled and its congestion control offered
    (`caps`: a backend's capabilities, with each end's ``check_host`` as sender and receiver)."""
    for side in ("sender", "receiver"):
        if not caps[side]["mptcp_enabled"]:
            raise CapabilityError(f"{side}: kernel MPTCP is not enabled (net.mptcp.enabled)")
        if cc not in caps[side]["congestion_controls"]:
            raise CapabilityError(
                f"{side}: congestion control {cc!r} not available "
                f"(have: {', '.join(caps[side]['congestion_controls'])})")

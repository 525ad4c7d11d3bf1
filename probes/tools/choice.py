"""Which probe tool runs a probe: what a host has, what each tool allows, and the choice.

A campaign asks for ``auto``, ``netperfmeter`` or ``iperf3`` (its ``probe_tool``). ``auto`` takes
NetPerfMeter 2.x where both ends have it (one tool for bulk and streams, measuring frames
itself), otherwise iperf3 for bulk probes and the paced tool for streams. iperf3 paces (``-b``)
but measures no frame, so a stream's probes never run on it: asked for ``iperf3``, a stream's
probes run on the paced tool. NetPerfMeter 1.9 (Debian 12's package) is not used: its MPTCP is
the out-of-tree kernels' and its passive side needs kernel SCTP.

A host's inventory (``inventory``) is what ``mpcoa worker --check`` prints and what a site's
capability report carries (``tools`` and ``allows``); ``choose`` decides from two of them.
"""

from __future__ import annotations

import shutil
from typing import Any

from probes.base import PROBE_TOOLS, CapabilityError, ProbeTool
from probes.tools.capabilities import IPERF3_VERSION, NETPERFMETER_VERSION, tool_version
from probes.tools.paced_tool import VERSION as PACED_VERSION

__all__ = ["PROBE_TOOLS", "ProbeTool", "allows", "choose", "inventory", "measures"]
#: what a probe can measure: bulk goodput, or a stream's frames (their one-way delays)
BULK, FRAMES = "bulk", "frames"

INSTALL_NETPERFMETER = ("NetPerfMeter 2.x (not packaged by Debian 12: build it from "
                        "github.com/dreibh/netperfmeter and give its path in MPCOA_NETPERFMETER)")
INSTALL_IPERF3 = "iperf3 and mptcpize (Debian packages 'iperf3', 'mptcpize')"


def is_netperfmeter_2(version: str | None) -> bool:
    """A readable 2.x (or later) version: upstream MPTCP, no SCTP needed."""
    if not version:
        return False
    head = version.split(".")[0]
    return head.isdigit() and int(head) >= 2


def iperf3_native_mptcp(version: str | None) -> bool:
    """iperf3 3.16 added ``--mptcp``; older ones run under mptcpize."""
    try:
        major, minor = (int(p) for p in (version or "").split(".")[:2])
    except ValueError:
        return False
    return (major, minor) >= (3, 16)


def allows(tools: dict[str, Any]) -> dict[str, list[str]]:
    """Per tool of an inventory's ``tools``, what it can measure on this host (empty: nothing,
    and the inventory's notes say why)."""
    out: dict[str, list[str]] = {}
    iperf3 = tools.get("iperf3")
    iperf3_runs = bool(iperf3) and (iperf3_native_mptcp(iperf3) or bool(tools.get("mptcpize")))
    out["iperf3"] = [BULK] if iperf3_runs else []
    out["netperfmeter"] = [BULK, FRAMES] if is_netperfmeter_2(tools.get("netperfmeter")) else []
    # the paced tool is this package's own script on an MPTCP socket of its own
    out["mpcoa-paced"] = [FRAMES] if tools.get("mpcoa-paced") else []
    return out


def notes(tools: dict[str, Any]) -> list[str]:
    """Why a tool that is present allows nothing, in words."""
    out = []
    iperf3 = tools.get("iperf3")
    if iperf3 and not iperf3_native_mptcp(iperf3) and not tools.get("mptcpize"):
        out.append(f"iperf3 {iperf3} has no --mptcp and mptcpize is missing (Debian package "
                   "'mptcpize')")
    npm = tools.get("netperfmeter")
    if npm and not is_netperfmeter_2(npm):
        out.append(f"NetPerfMeter {npm} is not 2.x: its MPTCP is the out-of-tree kernels' "
                   f"(install {INSTALL_NETPERFMETER})")
    return out


def inventory(netperfmeter: str = "netperfmeter", iperf3: str = "iperf3") -> dict[str, Any]:
    """The probe tools found on this host, their versions and what each allows."""
    tools = {
        "iperf3": tool_version(iperf3, ["--version"], IPERF3_VERSION),
        "mptcpize": "present" if shutil.which("mptcpize") else None,
        "netperfmeter": tool_version(netperfmeter, ["--version"], NETPERFMETER_VERSION),
        "mpcoa-paced": PACED_VERSION,
    }
    return {"tools": tools, "allows": allows(tools), "notes": notes(tools)}


def measures(tools: dict[str, Any]) -> set[str]:
    """What some tool of an inventory's ``tools`` can measure."""
    return {what for got in allows(tools).values() for what in got}


def choose(choice: str, kind: str, sides: list[dict[str, Any]]) -> str:
    """The backend (``netperfmeter``, ``iperf3`` or ``paced``) that runs a probe of profile
    ``kind`` (bulk or paced) under the campaign's ``choice``, given both ends' ``tools``;
    CapabilityError naming what to install when no tool both ends have can run it."""
    if choice not in PROBE_TOOLS:
        raise CapabilityError(f"probe_tool: {choice!r} is not one of {', '.join(PROBE_TOOLS)}")
    offered = [allows(tools) for tools in sides]

    def both(tool: str, what: str) -> bool:
        return all(what in got[tool] for got in offered)

    what = FRAMES if kind == "paced" else BULK
    if choice in ("auto", "netperfmeter") and both("netperfmeter", what):
        return "netperfmeter"
    if choice == "netperfmeter":
        raise CapabilityError(f"probe_tool netperfmeter: not on both sites; install "
                              f"{INSTALL_NETPERFMETER}")
    if what == FRAMES:
        if both("mpcoa-paced", FRAMES):
            return "paced"
        raise CapabilityError(
            "a stream's probes need a frame-level tool on both sites and none is there: "
            f"install {INSTALL_NETPERFMETER}, or run mpcoa's worker (its paced tool) there")
    if both("iperf3", BULK):
        return "iperf3"
    raise CapabilityError(f"no bulk probe tool on both sites: install {INSTALL_IPERF3} or "
                          f"{INSTALL_NETPERFMETER}")

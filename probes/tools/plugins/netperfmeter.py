"""NetPerfMeter 2.x as a probe tool: bulk goodput and a stream's frames, on upstream MPTCP (1.9,
Debian 12's package, runs the out-of-tree kernels' and is not used). On the testbed
`probes.tools.netperfmeter`; across real hosts each site's worker runs one long-lived passive node
(`probes.tools.npm_twosided`), named in its capability report, that serves every probe."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from probes.base import MeasurementRequest, MeasurementResult
from probes.tools import npm_twosided
from probes.tools.capabilities import NETPERFMETER_VERSION, tool_version
from probes.tools.netperfmeter import NetPerfMeterBackend, default_binary
from probes.tools.protocol import BULK, FRAMES, ProbeTool, register


def is_netperfmeter_2(version: str | None) -> bool:
    """A readable 2.x (or later) version: upstream MPTCP, no SCTP needed."""
    if not version:
        return False
    head = version.split(".")[0]
    return head.isdigit() and int(head) >= 2


class NetPerfMeter(ProbeTool):
    name = "netperfmeter"
    measures = (BULK, FRAMES)
    preference = 10  # auto's first: one tool for bulk and streams, measuring frames itself
    install = ("install NetPerfMeter 2.x (not packaged by Debian 12: build it from "
               "github.com/dreibh/netperfmeter and give its path in MPCOA_NETPERFMETER)")
    node_key = "netperfmeter_passive"

    def found(self, binary: str | None = None) -> dict[str, str | None]:
        return {"netperfmeter": tool_version(binary or default_binary(), ["--version"],
                                             NETPERFMETER_VERSION)}

    def allows(self, tools: Mapping[str, Any]) -> list[str]:
        return [BULK, FRAMES] if is_netperfmeter_2(tools.get("netperfmeter")) else []

    def notes(self, tools: Mapping[str, Any]) -> list[str]:
        version = tools.get("netperfmeter")
        if version and not is_netperfmeter_2(version):
            return [f"NetPerfMeter {version} is not 2.x: its MPTCP is the out-of-tree kernels' "
                    f"({self.install})"]
        return []

    def backend(self, pair: Any, **options: Any) -> NetPerfMeterBackend:
        return NetPerfMeterBackend(pair, **options)

    def testbed_options(self, binary: str | None = None) -> dict[str, Any]:
        # the next probe's passive side started as this one ends (`probes.tools.npm_spare`)
        return {"spare": True, **({"binary": binary} if binary else {})}

    def start_node(self, local_addrs: dict[str, str]) -> npm_twosided.PassiveNode:
        return npm_twosided.PassiveNode(default_binary(), local_addrs).start()

    def active_measure(self, request: MeasurementRequest, *, sender_addrs: dict[str, str],
                       receiver_addrs: dict[str, str], port: int, binary: str | None = None,
                       wait_report: Callable[[], dict[str, Any]]) -> MeasurementResult:
        # the node's results come back over the control connection: no report to wait for
        return npm_twosided.active_measure(request, sender_addrs=sender_addrs,
                                           receiver_addrs=receiver_addrs, port=port,
                                           binary=binary or default_binary())


TOOL = register(NetPerfMeter())

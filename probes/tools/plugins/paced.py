"""The paced tool (`probes.tools.paced_tool`, this package's own script on an MPTCP socket) as a
probe tool: a stream's frames only, never asked for by name: it runs the stream probes of a
campaign whose tool measures no frame (iperf3). On the testbed `probes.tools.paced`; across real
hosts the receiving site's long-lived receiver (`probes.tools.paced_server`, started at its first
paced probe) serves each probe, whose frames reach the sender on the probe's own connection."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from probes.base import MeasurementRequest, MeasurementResult, ProbeError
from probes.tools import paced_server, twosided, twosided_paced
from probes.tools.context import mptcp_settings
from probes.tools.paced import PacedBackend
from probes.tools.paced_tool import VERSION
from probes.tools.protocol import FRAMES, ProbeTool, register


@dataclass
class Passive:
    """A probe served by the site's long-lived receiver: nothing to wait for or end."""

    port: int
    pid: int
    report: dict[str, Any]

    def running(self) -> bool:
        return False

    def stop(self) -> None:
        """The receiver outlives the probe."""

    def finish(self) -> dict[str, Any]:
        return self.report


class Paced(ProbeTool):
    name = "paced"
    measures = (FRAMES,)
    preference = 30
    askable = False
    install = "run mpcoa's worker (its paced tool) there"

    def found(self, binary: str | None = None) -> dict[str, str | None]:
        return {"paced": VERSION}

    def backend(self, pair: Any, *, resident: bool = False, **options: Any) -> PacedBackend:
        if resident:  # the receiver's namespace keeps one paced receiver between probes
            options["receiver_port"] = paced_server.ensure(pair.receiver_ns)[0].port
        return PacedBackend(pair, **options)

    def testbed_options(self, binary: str | None = None) -> dict[str, Any]:
        return {"resident": True}  # a receiver kept between probes saves a start each

    def passive_start(self, request: MeasurementRequest, *, local_addrs: dict[str, str],
                      binary: str | None = None) -> Passive:
        try:
            twosided.prepare_receiver(None, len(local_addrs))
            receiver, started = paced_server.ensure()
        except Exception as exc:
            raise ProbeError(f"paced receiver: {exc}") from exc
        return Passive(receiver.port, receiver.server.pid,
                       {"tool": self.name, "settings": mptcp_settings(None),
                        "receiver_started": started, "receiver_starts": receiver.starts})

    def active_measure(self, request: MeasurementRequest, *, sender_addrs: dict[str, str],
                       receiver_addrs: dict[str, str], port: int, binary: str | None = None,
                       wait_report: Callable[[], dict[str, Any]]) -> MeasurementResult:
        return twosided_paced.active_measure(request, sender_addrs=sender_addrs,
                                             receiver_addrs=receiver_addrs, port=port,
                                             wait_report=wait_report)


TOOL = register(Paced())

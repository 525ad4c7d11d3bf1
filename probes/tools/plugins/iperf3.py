"""iperf3 as a probe tool: bulk goodput only (it paces but measures no frame), through
``mptcpize run`` or its own ``--mptcp`` (3.16+); on the testbed `probes.tools.iperf3`, across real
hosts a server per probe on the receiving site (`probes.tools.twosided`)."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from probes.base import MeasurementRequest, MeasurementResult
from probes.tools import twosided
from probes.tools.capabilities import IPERF3_VERSION, tool_version
from probes.tools.iperf3 import Iperf3Backend, has_native_mptcp
from probes.tools.protocol import BULK, ProbeTool, register

DEFAULT_BINARY = "iperf3"


def runs_mptcp(version: str | None, mptcpize: Any) -> bool:
    """Native ``--mptcp`` (3.16+), or an older one under mptcpize."""
    try:
        native = has_native_mptcp(version or "")
    except ValueError:
        native = False
    return native or bool(mptcpize)


@dataclass
class Passive:
    """The receiving site's iperf3 server for one probe (``-s -1``: it ends after its client)."""

    run: twosided.PassiveRun
    port: int = field(init=False)
    pid: int = field(init=False)
    report: dict[str, Any] = field(init=False)

    def __post_init__(self) -> None:
        self.port, self.pid = self.run.port, self.run.server.pid
        self.report = {"server": twosided.server_identity(self.pid)}

    def running(self) -> bool:
        return self.run.server.proc.poll() is None

    def stop(self) -> None:
        self.run.server.kill()

    def finish(self) -> dict[str, Any]:
        return twosided.passive_finish(self.run, wait_s=1.0)


class Iperf3(ProbeTool):
    name = "iperf3"
    measures = (BULK,)
    preference = 20
    install = "install iperf3 and mptcpize (Debian packages 'iperf3', 'mptcpize')"

    def found(self, binary: str | None = None) -> dict[str, str | None]:
        return {"iperf3": tool_version(binary or DEFAULT_BINARY, ["--version"], IPERF3_VERSION),
                "mptcpize": "present" if shutil.which("mptcpize") else None}

    def allows(self, tools: Mapping[str, Any]) -> list[str]:
        version = tools.get("iperf3")
        return [BULK] if version and runs_mptcp(version, tools.get("mptcpize")) else []

    def notes(self, tools: Mapping[str, Any]) -> list[str]:
        version = tools.get("iperf3")
        if version and not runs_mptcp(version, tools.get("mptcpize")):
            return [f"iperf3 {version} has no --mptcp and mptcpize is missing (Debian package "
                    "'mptcpize')"]
        return []

    def backend(self, pair: Any, **options: Any) -> Iperf3Backend:
        return Iperf3Backend(pair, **options)

    def testbed_options(self, binary: str | None = None) -> dict[str, Any]:
        return {"binary": binary} if binary else {}

    def passive_start(self, request: MeasurementRequest, *, local_addrs: dict[str, str],
                      binary: str | None = None) -> Passive:
        return Passive(twosided.passive_start(request, local_addrs=local_addrs,
                                              binary=binary or DEFAULT_BINARY))

    def active_measure(self, request: MeasurementRequest, *, sender_addrs: dict[str, str],
                       receiver_addrs: dict[str, str], port: int, binary: str | None = None,
                       wait_report: Callable[[], dict[str, Any]]) -> MeasurementResult:
        return twosided.active_measure(request, sender_addrs=sender_addrs,
                                       receiver_addrs=receiver_addrs, port=port,
                                       binary=binary or DEFAULT_BINARY, wait_report=wait_report)


TOOL = register(Iperf3())

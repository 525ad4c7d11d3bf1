"""The probe tools by name, the shipped ones registered: `TOOLS[name]` is a tool
(`probes.tools.protocol.ProbeTool`); `make_backend` binds its backend to a host pair or a testbed.

Importing this module imports the shipped tools' modules, each of which registers its tool; a
tool of another package registers itself the same way (`register`) before a campaign names it.
"""

from __future__ import annotations

from typing import Any

from probes.base import MeasurementRequest, ProbeError
from probes.tools.context import HostPair
from probes.tools.plugins import iperf3, netperfmeter, paced  # noqa: F401 - they register
from probes.tools.protocol import TOOLS, ProbeTool, register, unregister

__all__ = ["TOOLS", "ProbeTool", "make_backend", "register", "unregister"]


def make_backend(name: str, *, pair: HostPair | None = None, testbed: Any = None,
                 request: Any = None, **kw: Any):
    """A backend bound to a host pair (or to a testbed, whose ``context`` builds the pair)."""
    if pair is None and testbed is None:
        raise ProbeError("make_backend: give a host pair or a testbed")
    return _Bound(TOOLS[name], pair, testbed, kw)


class _Bound:
    """Builds the host pair per request (a testbed's pair depends on the sender/receiver)."""

    def __init__(self, tool: ProbeTool, pair: HostPair | None, testbed: Any,
                 kw: dict[str, Any]) -> None:
        self.tool, self.pair, self.testbed, self.kw = tool, pair, testbed, kw
        self.name = tool.name

    def _backend(self, request: Any = None):
        pair = self.pair
        if pair is None:
            if request is None:
                s, r = self.testbed.spec.sites
                request = MeasurementRequest(sender=s.name, receiver=r.name)
            pair = self.testbed.context(request)
        return self.tool.backend(pair, **self.kw)

    def measure(self, request: Any):
        return self._backend(request).measure(request)

    def capabilities(self) -> dict[str, Any]:
        return self._backend().capabilities()

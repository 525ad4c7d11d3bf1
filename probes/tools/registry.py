"""Backends by name."""

from __future__ import annotations

from typing import Any

from probes.base import ProbeError
from probes.tools.context import HostPair

BACKENDS = ("iperf3", "netperfmeter", "paced")


def make_backend(name: str, *, pair: HostPair | None = None, testbed: Any = None,
                 request: Any = None, **kw: Any):
    """A backend bound to a host pair (or to a testbed, whose ``context`` builds the pair)."""
    if pair is None and testbed is None:
        raise ProbeError("make_backend: give a host pair or a testbed")
    if name == "iperf3":
        from probes.tools.iperf3 import Iperf3Backend

        return _Bound(Iperf3Backend, pair, testbed, kw)
    if name == "netperfmeter":
        from probes.tools.netperfmeter import NetPerfMeterBackend

        return _Bound(NetPerfMeterBackend, pair, testbed, kw)
    if name == "paced":
        from probes.tools.paced import PacedBackend

        return _Bound(PacedBackend, pair, testbed, kw)
    raise ProbeError(f"backend: unknown backend {name!r} (have {', '.join(BACKENDS)})")


class _Bound:
    """Builds the host pair per request (a testbed's pair depends on the sender/receiver)."""

    def __init__(self, cls: type, pair: HostPair | None, testbed: Any, kw: dict[str, Any]) -> None:
        self.cls, self.pair, self.testbed, self.kw = cls, pair, testbed, kw
        self.name = cls.name

    def _backend(self, request: Any = None):
        pair = self.pair
        if pair is None:
            if request is None:
                s, r = self.testbed.spec.sites
                from probes.base import MeasurementRequest

                request = MeasurementRequest(sender=s.name, receiver=r.name)
            pair = self.testbed.context(request)
        kw = dict(self.kw)
        if kw.pop("resident", False) and self.name == "paced":
            # the receiver's namespace keeps one paced receiver between probes
            from probes.tools import paced_server

            kw["receiver_port"] = paced_server.ensure(pair.receiver_ns)[0].port
        return self.cls(pair, **kw)

    def measure(self, request: Any):
        return self._backend(request).measure(request)

    def capabilities(self) -> dict[str, Any]:
        return self._backend().capabilities()

"""iperf3 backend: MPTCP through ``mptcpize run`` (Debian 12's iperf3 3.12 has no MPTCP flag) or
iperf3's own ``--mptcp`` where the version has it (3.16+); ``-C`` congestion control, ``-w``
buffer (both ends: iperf3 passes it to the server), JSON intervals.

Goodput is the receiver's (the server's JSON intervals); per-subflow bytes come from ``ss -ti``
samples on the sender (bytes_acked of each subflow of the data connection).
"""

from __future__ import annotations

import json
import math
import re
import shutil
from typing import Any

from probes.base import (
    CapabilityError,
    MeasurementRequest,
    MeasurementResult,
    ProbeError,
    set_on_both_ends,
)
from probes.netns import run
from probes.tools import binver
from probes.tools.context import HostPair
from probes.tools.ports import choose_port_triple
from probes.tools.runner import RunOutput, ToolRun, assemble, run_probe
from probes.tools.subflowctl import plan_subflows

_VERSION = re.compile(r"iperf (\d+\.\d+(?:\.\d+)?)")


def parse_version(text: str) -> str | None:
    m = _VERSION.search(text)
    return m.group(1) if m else None


def version_tuple(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in v.split("."))


def has_native_mptcp(version: str) -> bool:
    return version_tuple(version) >= (3, 16)


def build_commands(
    request: MeasurementRequest,
    *,
    binary: str,
    version: str,
    port: int,
    server_addr: str,
    bind_addr: str | None,
    interval_s: float,
    mptcpize: str = "mptcpize",
) -> tuple[list[str], list[str]]:
    """(server argv, client argv) for one measurement (before namespace wrapping)."""
    native = has_native_mptcp(version)
    wrap = [] if native else [mptcpize, "run"]
    server = [*wrap, binary, "-s", "-1", "-J", "-p", str(port)]
    client = [*wrap, binary, "-c", server_addr, "-p", str(port),
              "-t", str(max(1, math.ceil(request.duration_s))), "-J",
              "-i", f"{interval_s:g}", "-C", request.cc, "--connect-timeout", "5000"]
    if native:
        client.append("--mptcp")
    if bind_addr:
        client += ["-B", bind_addr]
    if request.buffer_bytes is not None:
        client += ["-w", str(request.buffer_bytes)]
    if request.profile.kind == "paced":
        assert request.profile.frame_size_bytes is not None
        client += ["-b", str(int(request.profile.rate_bps or 0)),
                   "-l", str(request.profile.frame_size_bytes)]
    return server, client


def parse_server_json(data: dict[str, Any]) -> dict[str, Any]:
    """Receiver-side goodput from the server's JSON."""
    if "error" in data:
        raise ProbeError(f"iperf3 server: {data['error']}")
    sums = [iv.get("sum", {}) for iv in data.get("intervals", [])]
    sums = [s for s in sums if not s.get("omitted")]
    nominal = max((float(s.get("seconds", 0.0)) for s in sums), default=0.0)
    series = []
    for s in sums:
        # The last interval is a stub (a few ms) in which the receiver drains its socket buffer:
        # its "rate" is an artifact far above the path's capacity, so it is not a sample.
        if float(s.get("seconds", nominal)) < 0.5 * nominal:
            continue
        series.append((round(float(s["end"]), 6), float(s["bits_per_second"]) / 1e6))
    end = data.get("end", {})
    recv = end.get("sum_received") or end.get("sum") or {}
    start = data.get("start", {})
    return {
        "series": series,
        "bytes": int(recv.get("bytes", 0)),
        "seconds": float(recv.get("seconds", 0.0)),
        "mbps": float(recv.get("bits_per_second", 0.0)) / 1e6,
        "sndbuf": start.get("sndbuf_actual"),
        "rcvbuf": start.get("rcvbuf_actual"),
        "cc": end.get("receiver_tcp_congestion"),
        "version": start.get("version"),
    }


def parse_client_json(data: dict[str, Any]) -> dict[str, Any]:
    if "error" in data:
        raise ProbeError(f"iperf3 client: {data['error']}")
    start, end = data.get("start", {}), data.get("end", {})
    return {
        "sndbuf": start.get("sndbuf_actual"),
        "rcvbuf": start.get("rcvbuf_actual"),
        "cc": end.get("sender_tcp_congestion"),
        "sent_bytes": int((end.get("sum_sent") or {}).get("bytes", 0)),
        "version": start.get("version"),
    }


class Iperf3Backend:
    name = "iperf3"

    def __init__(self, pair: HostPair, binary: str = "iperf3", mptcpize: str = "mptcpize",
                 interval_s: float = 1.0, leave_active: tuple[str, ...] = ()) -> None:
        """``leave_active``: excluded subflows to create without the backup flag (a deliberate
        fault, so tests can see the subflow-set check fail a probe)."""
        self.pair = pair
        self.leave_active = tuple(leave_active)
        self.binary = binary
        self.mptcpize = mptcpize
        self.interval_s = interval_s

    # ---- capabilities ------------------------------------------------------------------------
    def version(self) -> str:
        return binver.cached(self.binary, self._read_version)

    def _read_version(self) -> str:
        if shutil.which(self.binary) is None:
            raise CapabilityError(f"iperf3: binary {self.binary!r} not found")
        cp = run([self.binary, "--version"], check=False)
        v = parse_version(cp.stdout + cp.stderr)
        if not v:
            raise CapabilityError(f"iperf3: cannot read the version of {self.binary!r}")
        return v

    def capabilities(self) -> dict[str, Any]:
        from probes.tools.capabilities import check_host

        v = self.version()
        need_mptcpize = not has_native_mptcp(v)
        caps: dict[str, Any] = {"tool": "iperf3", "version": v, "native_mptcp": not need_mptcpize}
        if need_mptcpize and shutil.which(self.mptcpize) is None:
            raise CapabilityError(f"mptcpize: not installed (iperf3 {v} has no --mptcp; "
                                  "install Debian package 'mptcpize')")
        caps["sender"] = check_host(self.pair.sender_ns)
        caps["receiver"] = check_host(self.pair.receiver_ns)
        return caps

    # ---- measuring -----------------------------------------------------------------------------
    def check_request(self, request: MeasurementRequest) -> str:
        """The tool's version, after checking both hosts can run the request."""
        from probes.tools.capabilities import require_pair  # where check_host is patched too

        caps = self.capabilities()
        require_pair(caps, request.cc)
        return caps["version"]

    def measure(self, request: MeasurementRequest) -> MeasurementResult:
        version = self.check_request(request)
        pair = self.pair
        plan = plan_subflows(pair, request, self.leave_active)
        port = choose_port_triple([pair.sender_ns, pair.receiver_ns])
        server_argv, client_argv = build_commands(
            request, binary=self.binary, version=version, port=port,
            server_addr=plan.server_addr, bind_addr=plan.bind_addr, interval_s=self.interval_s,
            mptcpize=self.mptcpize)
        out = run_probe(pair, plan, ToolRun(
            tool="iperf3", server_argv=server_argv, client_argv=client_argv, data_port=port,
            listen_port=port, ports=[port - 1, port, port + 1],
            client_timeout_s=request.duration_s + 30))
        try:
            # the client first: when it failed, the server waited for it until it was stopped,
            # and "interrupt - the server has terminated" would hide the reason
            cli = parse_client_json(json.loads(out.client_stdout))
            srv = parse_server_json(json.loads(out.server_stdout))
        except ValueError as exc:
            raise ProbeError(f"iperf3: unreadable JSON output ({exc}); stderr: "
                             f"{out.client_stderr.strip()[:300]} {out.server_stderr.strip()[:300]}"
                             ) from None
        raw = {"server_argv": server_argv, "client_argv": client_argv,
               "server_stdout": out.server_stdout, "server_stderr": out.server_stderr,
               "client_stdout": out.client_stdout, "client_stderr": out.client_stderr,
               "sent_bytes": cli["sent_bytes"],
               # what iperf3 read back with getsockopt right after setting (-w) the buffers
               "tool_buffers": {"sender_sndbuf": cli["sndbuf"], "sender_rcvbuf": cli["rcvbuf"],
                                "receiver_sndbuf": srv["sndbuf"],
                                "receiver_rcvbuf": srv["rcvbuf"]}}
        result = assemble(request, pair, plan, out, tool="iperf3", version=version,
                          series=srv["series"], total_mbps=srv["mbps"],
                          bytes_received=srv["bytes"],
                          kernel_extra={"sender_cc_used": cli["cc"],
                                        "receiver_cc_used": srv["cc"]},
                          raw=raw, buffers_set=set_on_both_ends(request))
        add_run_artifacts(result, out)
        return result


def add_run_artifacts(result: MeasurementResult, out: RunOutput) -> None:
    """Both sides' raw outputs: the JSON documents and whatever the tool said on stderr."""
    result.add_artifact("iperf3-client.json", out.client_stdout)
    result.add_artifact("iperf3-server.json", out.server_stdout)
    for name, text in (("iperf3-client.stderr.txt", out.client_stderr),
                       ("iperf3-server.stderr.txt", out.server_stderr)):
        if text:
            result.add_artifact(name, text)

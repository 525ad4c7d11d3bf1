"""The paced backend: `probes/paced_tool.py` as a probe, run like iperf3 (the receiver's
server in its namespace, the sender's client under subflow control while ``ss`` watches the
data port, both ends aborted afterwards), and its frames turned into `probes.frames` figures.

Only paced profiles: bulk goodput is iperf3's job. The receiver stops reading at the probe's
duration plus ``DRAIN_S`` after the sender's first frame could arrive; a frame not complete by
then is lost. Clocks: both namespaces of the emulated testbed read the host's CLOCK_MONOTONIC
(``--clock monotonic``: a step of the wall clock mid-probe cannot move a delay), so delays are
one-way (``clock="shared"``); a pair of real sites would need ``clock="relative"``. A frame that
reads faster than the fastest path the testbed emulates fails the probe (`probes.frames`).
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

from probes.base import (
    CapabilityError,
    MeasurementRequest,
    MeasurementResult,
    ProbeError,
    set_on_both_ends,
)
from probes.capabilities import check_host
from probes.context import HostPair
from probes.frames import FRAMES_ARTIFACT, FrameRecord, frame_stats, frames_csv, goodput_series
from probes.paced_tool import VERSION
from probes.ports import choose_port_triple
from probes.runner import ToolRun, assemble, run_probe
from probes.subflowctl import plan_subflows

TOOL = str(Path(__file__).resolve().parent / "paced_tool.py")
#: how long after the last frame's schedule the receiver still waits for it
DRAIN_S = 5.0


def build_commands(request: MeasurementRequest, *, port: int, server_addr: str,
                   bind_addr: str | None, python: str = sys.executable,
                   ) -> tuple[list[str], list[str]]:
    p = request.profile
    if p.kind != "paced":
        raise ProbeError("paced backend: only paced profiles (bulk probes run on iperf3)")
    assert p.frame_rate_hz is not None
    assert p.frame_size_bytes is not None
    buffer = str(request.buffer_bytes or 0)
    deadline = math.ceil(request.duration_s + DRAIN_S)  # counted from the connection
    server = [python, TOOL, "recv", "--port", str(port), "--buffer", buffer,
              "--deadline", str(deadline), "--clock", "monotonic"]
    client = [python, TOOL, "send", "--connect", server_addr, "--port", str(port),
              "--rate", f"{p.frame_rate_hz:g}", "--size", str(p.frame_size_bytes),
              "--duration", f"{request.duration_s:g}", "--cc", request.cc, "--buffer", buffer,
              "--clock", "monotonic"]
    if bind_addr:
        client += ["--bind", bind_addr]
    return server, client


def frame_records(receiver: dict[str, Any], sender: dict[str, Any]) -> list[FrameRecord]:
    """Every frame the sender wrote, received or not (a lost frame's send time is its slot)."""
    got = {int(f[0]): f for f in receiver.get("frames", [])}
    t0, rate, size = int(sender["first_send_us"]), float(sender["rate_hz"]), int(sender["size"])
    out = []
    for seq in range(int(sender["frames_sent"])):
        f = got.get(seq)
        out.append(FrameRecord(seq, int(f[1]), int(f[2]), int(f[3])) if f is not None else
                   FrameRecord(seq, t0 + round(seq * 1e6 / rate), None, size))
    return out


class PacedBackend:
    name = "paced"

    def __init__(self, pair: HostPair, python: str = sys.executable,
                 leave_active: tuple[str, ...] = ()) -> None:
        self.pair = pair
        self.python = python
        self.leave_active = tuple(leave_active)

    def capabilities(self) -> dict[str, Any]:
        s, r = check_host(self.pair.sender_ns), check_host(self.pair.receiver_ns)
        return {"tool": "mpcoa-paced", "version": VERSION, "sender": s, "receiver": r}

    def measure(self, request: MeasurementRequest) -> MeasurementResult:
        caps = self.capabilities()
        for side in ("sender", "receiver"):
            if not caps[side]["mptcp_enabled"]:
                raise CapabilityError(f"{side}: kernel MPTCP is not enabled (net.mptcp.enabled)")
            if request.cc not in caps[side]["congestion_controls"]:
                raise CapabilityError(
                    f"{side}: congestion control {request.cc!r} not available "
                    f"(have: {', '.join(caps[side]['congestion_controls'])})")
        plan = plan_subflows(self.pair, request, self.leave_active)
        port = choose_port_triple([self.pair.sender_ns, self.pair.receiver_ns])
        server_argv, client_argv = build_commands(
            request, port=port, server_addr=plan.server_addr, bind_addr=plan.bind_addr,
            python=self.python)
        out = run_probe(self.pair, plan, ToolRun(
            tool="mpcoa-paced", server_argv=server_argv, client_argv=client_argv,
            data_port=port, listen_port=port, ports=[port - 1, port, port + 1],
            client_timeout_s=request.duration_s + 30, server_wait_s=DRAIN_S + 5))
        try:
            sender = json.loads(out.client_stdout)
            receiver = json.loads(out.server_stdout)
        except ValueError as exc:
            raise ProbeError(f"paced tool: unreadable output ({exc}); stderr: "
                             f"{out.client_stderr.strip()[-300:]} "
                             f"{out.server_stderr.strip()[-300:]}") from None
        if "error" in receiver:
            raise ProbeError(f"paced receiver: {receiver['error']}")
        records = frame_records(receiver, sender)
        start = int(sender["first_send_us"])
        series = goodput_series(records, start, duration_s=request.duration_s)
        received = sum(r.size_bytes for r in records if r.recv_us is not None)
        seconds = max(1e-9, request.duration_s)
        raw = {"server_argv": server_argv, "client_argv": client_argv,
               "client_stderr": out.client_stderr, "server_stderr": out.server_stderr,
               "sender": {k: v for k, v in sender.items() if k != "frames"},
               "receiver": {k: v for k, v in receiver.items() if k != "frames"},
               # what the tool read back with getsockopt right after setting (or not)
               "tool_buffers": {"sender_sndbuf": sender["buffers"]["sndbuf"],
                                "sender_rcvbuf": sender["buffers"]["rcvbuf"],
                                "receiver_sndbuf": receiver["buffers"]["sndbuf"],
                                "receiver_rcvbuf": receiver["buffers"]["rcvbuf"]}}
        result = assemble(request, self.pair, plan, out, tool="mpcoa-paced", version=VERSION,
                          series=series, total_mbps=received * 8 / seconds / 1e6,
                          bytes_received=received,
                          kernel_extra={"sender_cc_used": sender.get("cc")}, raw=raw,
                          buffers_set=set_on_both_ends(request))
        result.frames = frame_stats(records, budget_ms=request.profile.delay_budget_ms,
                                    warmup_s=request.warmup_s,
                                    floor_ms=self.pair.delay_floor_ms())
        result.add_artifact(FRAMES_ARTIFACT, frames_csv(records))
        result.add_artifact("paced-sender.json", out.client_stdout)
        result.add_artifact("paced-receiver.json", out.server_stdout)
        return result

"""The paced backend: `probes/tools/paced_tool.py` as a probe, run like iperf3 (the receiver's
server in its namespace, the sender's client under subflow control while ``ss`` watches the
data port, both ends aborted afterwards), and its frames turned into `probes.frames` figures.

Only paced profiles: bulk goodput is iperf3's job. The receiver stops reading at the probe's
duration plus ``DRAIN_S`` after the sender's first frame could arrive; a frame not complete by
then is lost. The sender's output carries the receiver's report (it asks for it on the control
connection), so its end alone has the whole probe. Clocks: both ends stamp CLOCK_MONOTONIC.
Both namespaces of the emulated testbed read the host's own, so delays are one-way as stamped
(``clock="shared"``; the offset the exchanges estimate is kept in the raw output, near 0).
Between hosts (``shared_clock=False``) the receive stamps are corrected by the estimated offset
(`probes.clocksync`) and the delays are one-way within its uncertainty, or relative to the
flow's minimum where that uncertainty is too large (`probes.frames`). A frame that reads faster
than the fastest path the testbed emulates fails the probe (`probes.frames`).
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

from probes import clocksync
from probes.base import (
    MeasurementRequest,
    MeasurementResult,
    ProbeError,
    set_on_both_ends,
)
from probes.clocksync import ClockOffset
from probes.frames import FRAMES_ARTIFACT, FrameRecord, frame_stats, frames_csv, goodput_series
from probes.tools.capabilities import check_host, require_pair
from probes.tools.context import HostPair
from probes.tools.paced_tool import DEFAULT_SYNC, VERSION
from probes.tools.ports import choose_port_triple
from probes.tools.runner import RunOutput, ToolRun, assemble, run_probe
from probes.tools.subflowctl import SubflowPlan, plan_subflows

TOOL = str(Path(__file__).resolve().parent / "paced_tool.py")
#: how long after the last frame's schedule the receiver still waits for it
DRAIN_S = 5.0


def build_commands(request: MeasurementRequest, *, port: int, server_addr: str,
                   bind_addr: str | None, python: str = sys.executable,
                   sync: int = DEFAULT_SYNC) -> tuple[list[str], list[str]]:
    """(receiver, sender) command lines; `sync`: clock exchanges before and after the stream
    (each one control round trip: one clock needs but a sanity check)."""
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
              "--clock", "monotonic", "--sync", str(sync), "--deadline", str(deadline)]
    if bind_addr:
        client += ["--bind", bind_addr]
    return server, client


def frame_records(receiver: dict[str, Any], sender: dict[str, Any],
                  offset_ms: float = 0.0) -> list[FrameRecord]:
    """Every frame the sender wrote, received or not (a lost frame's send time is its slot);
    receive stamps put on the sender's clock by `offset_ms` (the receiver's clock minus the
    sender's)."""
    got = {int(f[0]): f for f in receiver.get("frames", [])}
    shift = round(offset_ms * 1000)
    t0, rate, size = int(sender["first_send_us"]), float(sender["rate_hz"]), int(sender["size"])
    out = []
    for seq in range(int(sender["frames_sent"])):
        f = got.get(seq)
        out.append(FrameRecord(seq, int(f[1]), int(f[2]) - shift, int(f[3])) if f is not None
                   else FrameRecord(seq, t0 + round(seq * 1e6 / rate), None, size))
    return out


def clock_offset(sender: dict[str, Any]) -> ClockOffset:
    """The offset from the exchanges the sender reports (`probes.clocksync`)."""
    sync = sender.get("sync") or {}
    try:
        return clocksync.estimate(sync.get("before") or [], sync.get("after") or [])
    except (TypeError, ValueError) as exc:
        raise ProbeError(f"paced tool: {exc}") from None


def read_outputs(client_stdout: str, client_stderr: str, server_stderr: str = ""
                 ) -> tuple[dict[str, Any], dict[str, Any]]:
    """(sender, receiver) reports from the sender's output (it carries the receiver's)."""
    try:
        sender = json.loads(client_stdout)
    except ValueError as exc:
        raise ProbeError(f"paced tool: unreadable output ({exc}); stderr: "
                         f"{client_stderr.strip()[-300:]} {server_stderr.strip()[-300:]}"
                         ) from None
    if not isinstance(sender, dict):
        raise ProbeError("paced tool: its output is not a JSON object")
    if "error" in sender:
        raise ProbeError(f"paced {sender['error']}; stderr: {client_stderr.strip()[-300:]} "
                         f"{server_stderr.strip()[-300:]}")
    receiver = sender.get("receiver")
    if not isinstance(receiver, dict):
        raise ProbeError("paced tool: the sender got no report from the receiver")
    if "error" in receiver:
        raise ProbeError(f"paced receiver: {receiver['error']}")
    return sender, receiver


def build_result(request: MeasurementRequest, pair: HostPair, plan: SubflowPlan,
                 out: RunOutput, *, sender: dict[str, Any], receiver: dict[str, Any],
                 shared_clock: bool, raw_extra: dict[str, Any]) -> MeasurementResult:
    """One result from the two reports. `shared_clock`: both ends read one clock (the emulated
    testbed), so the delays are one-way as stamped; otherwise the receive stamps are corrected
    by the offset the exchanges give, and the delays are one-way within its uncertainty."""
    offset = clock_offset(sender)
    records = frame_records(receiver, sender, 0.0 if shared_clock else offset.offset_ms)
    start = int(sender["first_send_us"])
    series = goodput_series(records, start, duration_s=request.duration_s)
    received = sum(r.size_bytes for r in records if r.recv_us is not None)
    seconds = max(1e-9, request.duration_s)
    raw = {**raw_extra,
           "sender": {k: v for k, v in sender.items() if k not in ("frames", "receiver")},
           "receiver": {k: v for k, v in receiver.items() if k != "frames"},
           "clock_offset": {**offset.model_dump(), "applied": not shared_clock},
           # what the tool read back with getsockopt right after setting (or not)
           "tool_buffers": {"sender_sndbuf": sender["buffers"]["sndbuf"],
                            "sender_rcvbuf": sender["buffers"]["rcvbuf"],
                            "receiver_sndbuf": receiver["buffers"]["sndbuf"],
                            "receiver_rcvbuf": receiver["buffers"]["rcvbuf"]}}
    result = assemble(request, pair, plan, out, tool="paced", version=VERSION,
                      series=series, total_mbps=received * 8 / seconds / 1e6,
                      bytes_received=received,
                      kernel_extra={"sender_cc_used": sender.get("cc")}, raw=raw,
                      buffers_set=set_on_both_ends(request))
    result.frames = frame_stats(records, budget_ms=request.profile.delay_budget_ms,
                                warmup_s=request.warmup_s, floor_ms=pair.delay_floor_ms(),
                                offset=None if shared_clock else offset
                                ).model_copy(update={"stalled": sender.get("stalled")})
    result.add_artifact(FRAMES_ARTIFACT, frames_csv(records))
    result.add_artifact("paced-sender.json", json.dumps(
        {k: v for k, v in sender.items() if k != "receiver"}))
    result.add_artifact("paced-receiver.json", json.dumps(receiver))
    return result


class PacedBackend:
    """`shared_clock` False: the receiver's clock is taken as another host's (the receive
    stamps corrected by the estimated offset); `receiver_wrapper`: a command the receiver runs
    under (``unshare --time --monotonic=N``: a clock offset by a known amount)."""

    name = "paced"

    def __init__(self, pair: HostPair, python: str = sys.executable,
                 leave_active: tuple[str, ...] = (), *, shared_clock: bool = True,
                 receiver_wrapper: tuple[str, ...] = (), receiver_port: int | None = None
                 ) -> None:
        self.pair = pair
        self.python = python
        self.leave_active = tuple(leave_active)
        self.shared_clock = shared_clock
        self.receiver_wrapper = tuple(receiver_wrapper)
        #: a long-lived receiver's port (`probes.tools.paced_server`): no receiver started per probe
        self.receiver_port = receiver_port

    def capabilities(self) -> dict[str, Any]:
        s, r = check_host(self.pair.sender_ns), check_host(self.pair.receiver_ns)
        return {"tool": "paced", "version": VERSION, "sender": s, "receiver": r}

    def measure(self, request: MeasurementRequest) -> MeasurementResult:
        require_pair(self.capabilities(), request.cc)
        plan = plan_subflows(self.pair, request, self.leave_active)
        port = self.receiver_port or choose_port_triple([self.pair.sender_ns,
                                                         self.pair.receiver_ns])
        server_argv, client_argv = build_commands(
            request, port=port, server_addr=plan.server_addr, bind_addr=plan.bind_addr,
            python=self.python, sync=1 if self.shared_clock else DEFAULT_SYNC)
        if self.receiver_port is not None:
            server_argv = []  # the resident receiver takes the probe's buffer from its hello
        out = run_probe(self.pair, plan, ToolRun(
            tool="paced",
            server_argv=[*self.receiver_wrapper, *server_argv] if server_argv else [],
            client_argv=client_argv, data_port=port, listen_port=port,
            ports=[port - 1, port, port + 1],
            client_timeout_s=request.duration_s + 30, server_wait_s=DRAIN_S + 5))
        sender, receiver = read_outputs(out.client_stdout, out.client_stderr,
                                        out.server_stderr)
        return build_result(request, self.pair, plan, out, sender=sender, receiver=receiver,
                            shared_clock=self.shared_clock,
                            raw_extra={"server_argv": server_argv, "client_argv": client_argv,
                                       "client_stderr": out.client_stderr,
                                       "server_stderr": out.server_stderr})

"""The paced tool two-sided: each site runs its own end of a paced probe on its own stack.

The receiver site's passive half is its long-lived receiver (`probes.tools.paced_server`): started
once, its port reported with the site's addresses; there is no per-probe server to start, wait
for or end. The sender site's active half (`active_measure`) runs the sender against that port
under its own subflow control, observes its subflows, aborts its own connections and builds the
result: the sender's output carries the receiver's report (frames) from the control connection,
and the two hosts' clocks are told apart by the offset its exchanges estimate.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from probes.base import MeasurementRequest, MeasurementResult
from probes.tools.context import HostPair, mptcp_settings
from probes.tools.paced import DRAIN_S, build_commands, build_result, read_outputs
from probes.tools.runner import RunOutput, ToolRun
from probes.tools.subflowctl import plan_subflows
from probes.tools.twosided import drive_sender


def active_measure(request: MeasurementRequest, *, sender_addrs: dict[str, str],
                   receiver_addrs: dict[str, str], port: int,
                   wait_report: Callable[[], dict[str, Any]], ns: str | None = None,
                   python: str = sys.executable) -> MeasurementResult:
    """The sender's half against the receiver site's paced receiver on `port`; `wait_report`
    blocks until the passive side has reported (its MPTCP settings)."""
    pair = HostPair(ns, None, dict(sender_addrs), dict(receiver_addrs), userspace_pm=True)
    plan = plan_subflows(pair, request)
    _, client_argv = build_commands(request, port=port, server_addr=plan.server_addr,
                                    bind_addr=plan.bind_addr, python=python)
    cmd = ToolRun(tool="paced", server_argv=[], client_argv=client_argv, data_port=port,
                  listen_port=port, ports=[port - 1, port, port + 1],
                  client_timeout_s=request.duration_s + DRAIN_S + 40)
    out = RunOutput(settings={"sender": mptcp_settings(ns)})
    drive_sender(pair, plan, cmd, out, ns)
    report = wait_report()
    out.settings["receiver"] = report.get("settings", {})
    sender, receiver = read_outputs(out.client_stdout, out.client_stderr)
    return build_result(request, pair, plan, out, sender=sender, receiver=receiver,
                        shared_clock=False,
                        raw_extra={"client_argv": client_argv, "two_sided": True,
                                   "client_stderr": out.client_stderr,
                                   "receiver_port": port,
                                   "receiver_started": report.get("receiver_started")})

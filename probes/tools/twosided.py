"""Two-sided probes: each site runs its own end of a probe on its own stack.

The receiver site's passive half (`passive_start`, `passive_finish`) prepares its MPTCP side,
starts the server on a free port bound to its ISP addresses and, once the client is done,
reports what the server saw; the sender site's active half (`active_measure`) runs the client
against the reported port and addresses under its own subflow control, observes its subflows,
aborts its own connections and assembles the one result from both reports. The two halves
meet through the caller (the service's probe_sessions table); nothing here knows the database.
iperf3 here; the paced tool's halves are `probes.tools.twosided_paced` (its passive side a site's
long-lived receiver); the NetPerfMeter passive side is not split yet.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from probes import pidfile
from probes.base import (
    CapabilityError,
    MeasurementRequest,
    MeasurementResult,
    ProbeError,
    set_on_both_ends,
    utcnow,
)
from probes.netns import in_ns, pid_alive, run_ns
from probes.tools.context import HostPair, mptcp_settings
from probes.tools.hygiene import abort_connections
from probes.tools.iperf3 import (
    Iperf3Backend,
    build_commands,
    parse_client_json,
    parse_server_json,
)
from probes.tools.ports import choose_port_triple
from probes.tools.runner import RunOutput, Server, ToolRun, assemble, drive, wait_listening
from probes.tools.subflowctl import plan_subflows

MAX_SUBFLOWS = 8  # the kernel's ceiling for the MPTCP limits


def die_with_parent(argv: list[str]) -> list[str]:
    """`argv` run so that it gets SIGKILL when the worker that started it dies (a SIGKILLed
    worker leaves no server behind). util-linux's `setpriv --pdeathsig` sets PR_SET_PDEATHSIG
    and execs, so nothing but subprocess's own code runs between fork and exec (a `preexec_fn`
    is not safe in a threaded worker); `ip netns exec` and mptcpize exec too, so the server
    keeps the setting. The new session comes from Popen's `start_new_session`."""
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        raise CapabilityError("tool 'setpriv': not installed (Debian package util-linux)")
    return [setpriv, "--pdeathsig", "KILL", "--", *argv]


def prepare_receiver(ns: str | None, n_addrs: int) -> None:
    """Limits so the sender's joins (and its announced addresses) are accepted."""
    n = min(MAX_SUBFLOWS, max(2, n_addrs * n_addrs))
    run_ns(ns, ["ip", "mptcp", "limits", "set", "subflows", str(n), "add_addr_accepted",
                str(min(MAX_SUBFLOWS, n_addrs))], check=False)


@dataclass
class PassiveRun:
    server: Server
    port: int
    version: str
    server_argv: list[str]
    ns: str | None

    @property
    def ports(self) -> list[int]:
        return [self.port - 1, self.port, self.port + 1]


def passive_start(request: MeasurementRequest, *, local_addrs: dict[str, str],
                  ns: str | None = None, binary: str = "iperf3",
                  mptcpize: str = "mptcpize") -> PassiveRun:
    """Start the receiver's server (iperf3 -s -1) on a free port; it listens on every local
    address (the ISP addresses are this host's), so any sender subflow reaches it."""
    backend = Iperf3Backend(HostPair(ns, ns, dict(local_addrs), dict(local_addrs)),
                            binary=binary, mptcpize=mptcpize)
    version = backend.version()
    prepare_receiver(ns, len(local_addrs))
    port = choose_port_triple([ns])
    server_argv, _ = build_commands(request, binary=binary, version=version, port=port,
                                    server_addr=next(iter(local_addrs.values())),
                                    bind_addr=None, interval_s=backend.interval_s,
                                    mptcpize=mptcpize)
    proc = subprocess.Popen(  # noqa: S603 - argv from validated values
        die_with_parent(in_ns(ns, server_argv)), stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    server = Server(proc, ns, "iperf3")
    try:
        wait_listening(ns, port, proc, "iperf3")
    except BaseException:
        server.kill()
        raise
    return PassiveRun(server, port, version, server_argv, ns)


def passive_finish(run: PassiveRun, *, wait_s: float) -> dict[str, Any]:
    """Wait (at most `wait_s`) for the server to end after its one client, abort the probe's
    connections on this side, and report what the server saw."""
    try:
        stdout, stderr = run.server.finish(max(0.0, wait_s))
    finally:
        run.server.kill()
        aborted = abort_connections(run.ns, run.ports)
    try:
        srv = parse_server_json(json.loads(stdout))
    except ValueError as exc:
        raise ProbeError(f"iperf3 server: unreadable JSON output ({exc}); stderr: "
                         f"{stderr.strip()[:300]}") from None
    return {"tool": "iperf3", "version": run.version, "series": srv["series"],
            "mbps": srv["mbps"], "bytes": srv["bytes"], "cc": srv["cc"],
            "sndbuf": srv["sndbuf"], "rcvbuf": srv["rcvbuf"], "server_argv": run.server_argv,
            "server_stdout": stdout, "server_stderr": stderr, "aborted_sockets": aborted,
            "settings": mptcp_settings(run.ns)}


def server_identity(pid: int) -> dict[str, Any]:
    """What names the server process for sure (`kill_leftover`): its pid, its start time and
    this boot (a pid is reused by other processes, and by other hosts' workers)."""
    return {"pid": pid, "start_time": pidfile.start_time(pid), "boot_id": _boot_id()}


def _boot_id() -> str | None:
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as f:
            return f.read().strip()
    except OSError:
        return None


def kill_leftover(identity: dict[str, Any] | None) -> bool:
    """End a server a killed predecessor left (its process group): only the very process
    `identity` (from `server_identity`) names -- same pid, start time and boot -- and only
    while it is an iperf3 process; a pid since handed to another process is left alone."""
    if not isinstance(identity, dict):
        return False
    pid = identity.get("pid")
    if not isinstance(pid, int) or pid <= 1 or not pid_alive(pid):
        return False
    if identity.get("start_time") is None or identity.get("boot_id") != _boot_id():
        return False
    if not pidfile.alive({"pid": pid, "start_time": identity["start_time"]}):
        return False
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmd = f.read().split(b"\0")
    except OSError:
        return False
    if not any(os.path.basename(c.decode(errors="replace")) == "iperf3" for c in cmd):
        return False
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def active_measure(request: MeasurementRequest, *, sender_addrs: dict[str, str],
                   receiver_addrs: dict[str, str], port: int,
                   wait_report: Callable[[], dict[str, Any]], ns: str | None = None,
                   binary: str = "iperf3", mptcpize: str = "mptcpize") -> MeasurementResult:
    """The sender's half: run the client against the passive side's port under subflow control
    (userspace PM on this host's own stack), abort its own connections, then combine with the
    receiver's report (`wait_report` blocks until the passive side has reported)."""
    pair = HostPair(ns, None, dict(sender_addrs), dict(receiver_addrs), userspace_pm=True)
    backend = Iperf3Backend(pair, binary=binary, mptcpize=mptcpize)
    version = backend.version()
    plan = plan_subflows(pair, request)
    _, client_argv = build_commands(request, binary=binary, version=version, port=port,
                                    server_addr=plan.server_addr, bind_addr=plan.bind_addr,
                                    interval_s=backend.interval_s, mptcpize=mptcpize)
    cmd = ToolRun(tool="iperf3", server_argv=[], client_argv=client_argv, data_port=port,
                  listen_port=port, ports=[port - 1, port, port + 1],
                  client_timeout_s=request.duration_s + 30)
    out = RunOutput(settings={"sender": mptcp_settings(ns)})
    drive_sender(pair, plan, cmd, out, ns)
    report = wait_report()
    out.settings["receiver"] = report.get("settings", {})
    try:
        cli = parse_client_json(json.loads(out.client_stdout))
    except ValueError as exc:
        raise ProbeError(f"iperf3 client: unreadable JSON output ({exc}); stderr: "
                         f"{out.client_stderr.strip()[:300]}") from None
    raw = {"server_argv": report.get("server_argv"), "client_argv": client_argv,
           "server_stdout": report.get("server_stdout", ""),
           "server_stderr": report.get("server_stderr", ""),
           "client_stdout": out.client_stdout, "client_stderr": out.client_stderr,
           "sent_bytes": cli["sent_bytes"], "two_sided": True,
           "receiver_aborted_sockets": report.get("aborted_sockets"),
           "tool_buffers": {"sender_sndbuf": cli["sndbuf"], "sender_rcvbuf": cli["rcvbuf"],
                            "receiver_sndbuf": report.get("sndbuf"),
                            "receiver_rcvbuf": report.get("rcvbuf")}}
    series = [tuple(p) for p in report["series"]]
    return assemble(request, pair, plan, out, tool="iperf3", version=version,
                    series=series, total_mbps=report["mbps"], bytes_received=report["bytes"],
                    kernel_extra={"sender_cc_used": cli["cc"], "receiver_cc_used": report["cc"]},
                    raw=raw, buffers_set=set_on_both_ends(request))


def drive_sender(pair: HostPair, plan, cmd, out: RunOutput, ns: str) -> None:
    """The active side's run, timed; its connections are aborted at the end whatever happened
    (one left stalled would hold the ports and skew the next probe)."""
    out.started = utcnow()
    try:
        drive(pair, plan, cmd, out, watch_receiver=False)
    finally:
        out.ended = utcnow()
        out.aborted_sockets += abort_connections(ns, cmd.ports)

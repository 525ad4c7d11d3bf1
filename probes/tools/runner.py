"""The run every backend shares: wait for quiet sites, start the receiver's server, run the
client under subflow control while ``ss`` watches the data port, abort the probe's connections
on both ends, and assemble the result from the tool's goodput and the kernel's observation."""

from __future__ import annotations

import contextlib
import re
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from probes.base import (
    MeasurementRequest,
    MeasurementResult,
    ProbeError,
    QuietCheck,
    mean_after_warmup,
    utcnow,
)
from probes.netns import in_ns, kill_pid, run_ns
from probes.tools.context import HostPair, kernel_info, mptcp_settings_of
from probes.tools.hygiene import abort_connections, wait_quiet
from probes.tools.mptcp_counters import delta, fallback_causes, read_counters
from probes.tools.observer import Observation, SsPoller, observe
from probes.tools.subflowctl import SubflowControl, SubflowPlan


@dataclass
class ToolRun:
    """What a backend runs: argv of both sides, the ports, where the client writes."""

    tool: str
    server_argv: list[str]
    client_argv: list[str]
    data_port: int  #: the port the MPTCP data connection goes to (ss and the PM watch it)
    listen_port: int  #: a port the server listens on once it is ready
    ports: list[int]  #: every port of the probe (aborted afterwards)
    client_timeout_s: float
    client_cwd: str | None = None
    server_merge_stderr: bool = False
    #: how long the server may take to end by itself after the client (iperf3 -1 does; the
    #: NetPerfMeter passive side never does and is ended)
    server_wait_s: float = 15.0
    #: a log file the client writes, whose last line `done_marker` says it has written every
    #: result and returns success: the client is ended there rather than waited for (what a
    #: tool does after it, e.g. join a thread that sleeps up to a second, measures nothing)
    done_log: str | None = None
    done_marker: str = ""
    #: seconds after the client's start before its log is first looked at (its run)
    done_not_before_s: float = 0.0


@dataclass
class RunOutput:
    server_stdout: str = ""
    server_stderr: str = ""
    client_stdout: str = ""
    client_stderr: str = ""
    client_returncode: int | None = None
    started: datetime | None = None
    ended: datetime | None = None
    quiet: QuietCheck | None = None
    observation: Observation | None = None
    settings: dict[str, Any] = field(default_factory=dict)
    upm_events: list[dict[str, Any]] = field(default_factory=list)
    aborted_sockets: int = 0
    #: the client was ended once its log said it was done (`ToolRun.done_log`)
    client_ended_after_log: bool = False
    #: "sender"/"receiver" -> how much each MPTCP health counter rose during the client's run
    #: (`mptcp_counters.delta`); the receiver's only where this host watches it
    mptcp_counters: dict[str, dict[str, int]] = field(default_factory=dict)


def check_quiet(pair: HostPair) -> QuietCheck | None:
    """Both sites (and the transit namespaces) idle; None for the host's own stack."""
    sites = [ns for ns in (pair.sender_ns, pair.receiver_ns) if ns is not None]
    if not sites:
        return None
    return wait_quiet(sites, sites + list(pair.transit_ns), ignore=pair.shared_qdiscs)


def read_settings(pair: HostPair) -> dict[str, Any]:
    """Both ends' MPTCP settings, as every probe records them (read at once)."""
    sender, receiver = mptcp_settings_of([pair.sender_ns, pair.receiver_ns])
    return {"sender": sender, "receiver": receiver}


def wait_listening(ns: str | None, port: int, proc: subprocess.Popen[str], tool: str,
                   timeout: float = 5) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        out = run_ns(ns, ["ss", "-ltnH", "sport", "=", f":{port}"], check=False).stdout
        if out.strip():
            return
        if proc.poll() is not None:
            err = (proc.stderr.read() if proc.stderr else "") or ""
            out = (proc.stdout.read() if proc.stdout else "") or ""
            raise ProbeError(f"{tool} server exited early: {(err + out).strip()[-300:]}")
        time.sleep(0.01)  # ss takes ~5 ms; every probe waits here once
    raise ProbeError(f"{tool} server not listening on port {port} after {timeout} s")


@dataclass
class Server:
    """The serve half: the receiver's server of one probe, listening; `finish` collects its
    output (killing it if it does not end by itself); `kill` ends it whatever happens."""

    proc: subprocess.Popen[str]
    ns: str | None
    tool: str

    @property
    def pid(self) -> int:
        return self.proc.pid

    def finish(self, wait_s: float) -> tuple[str, str]:
        try:
            stdout, stderr = self.proc.communicate(timeout=wait_s)
        except subprocess.TimeoutExpired:
            kill_pid(self.proc.pid)
            stdout, stderr = self.proc.communicate()
        return stdout or "", stderr or ""

    def kill(self) -> None:
        if self.proc.poll() is None:
            kill_pid(self.proc.pid)
            self.proc.wait()


def serve(receiver_ns: str | None, cmd: ToolRun, argv: list[str] | None = None) -> Server:
    """Start the server of `cmd` in `receiver_ns` (None: this host) and wait until it listens.
    `argv`: the full command (already wrapped for the namespace), default cmd.server_argv there.
    The server runs in its own session so a killed worker's server can be found and ended by
    its process group."""

    proc = subprocess.Popen(  # noqa: S603 - argv from validated values
        argv if argv is not None else in_ns(receiver_ns, cmd.server_argv),
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT if cmd.server_merge_stderr else subprocess.PIPE, text=True,
        start_new_session=True)
    server = Server(proc, receiver_ns, cmd.tool)
    try:
        wait_listening(receiver_ns, cmd.listen_port, proc, cmd.tool)
    except BaseException:
        server.kill()
        raise
    return server


def drive(pair: HostPair, plan: SubflowPlan, cmd: ToolRun, out: RunOutput,
          *, watch_receiver: bool = True,
          control_factory: Callable[..., SubflowControl] = SubflowControl) -> None:
    """The drive half: run the client on the sender under subflow control while ``ss`` watches
    the data port; fills `out` (client output, UPM events, observation). The caller aborts the
    probe's connections afterwards. `watch_receiver` False: the receiver is another host.
    `control_factory(pair, plan, data_port)`: the subflow control (one that also switches
    flags during the run, for phased probes)."""
    control = control_factory(pair, plan, cmd.data_port) if plan.controlled else None
    poller = SsPoller(pair.sender_ns, cmd.data_port, receiver_ns=pair.receiver_ns,
                      watch_receiver=watch_receiver)
    ends = {"sender": pair.sender_ns}
    if watch_receiver:
        ends["receiver"] = pair.receiver_ns
    before = read_counters(list(ends.values()))
    try:
        with control if control is not None else contextlib.nullcontext():
            if control is not None:
                out.settings.setdefault("sender", {})["path_manager_used"] = "userspace"
            _run_client(pair, cmd, poller, out)
    finally:
        if control is not None:
            out.upm_events = control.events
        after = read_counters(list(ends.values()))
        out.mptcp_counters = {end: delta(b, a) for end, b, a in
                              zip(ends, before, after, strict=True)}
    out.observation = observe(poller, pair)
    if out.client_returncode != 0 and not out.client_stdout.strip():
        raise ProbeError(f"{cmd.tool} client exited with status {out.client_returncode}: "
                         f"{(out.client_stderr or '').strip()[-300:]}")


def run_probe(pair: HostPair, plan: SubflowPlan, cmd: ToolRun,
              server: Server | None = None) -> RunOutput:
    """Run one probe on one machine (serve + drive composed); the probe's connections are
    aborted on both ends whatever happens. No `cmd.server_argv`: the receiver's server is a
    long-lived one already listening, left running (its listening sockets too). `server`: this
    probe's own server, started beforehand and listening (ended with the probe as one started
    here is)."""
    out = RunOutput()
    try:
        if server is None and cmd.server_argv:
            # the server before the checks: NetPerfMeter's passive side takes a new data
            # connection only at its flow manager's next one-second tick, counted from its
            # start, so what runs between its start and the client's (the quiet check, the
            # settings read) shortens that wait instead of adding to the probe
            server = serve(pair.receiver_ns, cmd, pair.receiver(cmd.server_argv))
        out.quiet = check_quiet(pair)
        out.settings = read_settings(pair)
        out.started = utcnow()
        drive(pair, plan, cmd, out)
        if server is not None:
            out.server_stdout, out.server_stderr = server.finish(cmd.server_wait_s)
    finally:
        if server is not None:
            server.kill()
        out.ended = utcnow()
        out.aborted_sockets += abort_connections(pair.sender_ns, cmd.ports)
        if pair.receiver_ns != pair.sender_ns:
            out.aborted_sockets += abort_connections(pair.receiver_ns, cmd.ports,
                                                     listeners=bool(cmd.server_argv))
    return out


def _run_client(pair: HostPair, cmd: ToolRun, poller: SsPoller, out: RunOutput) -> None:
    poller.start()
    try:
        if cmd.done_log:
            _run_until_logged(pair.sender(cmd.client_argv), cmd, out)
            return
        cp = subprocess.run(  # noqa: S603 - argv from validated values
            pair.sender(cmd.client_argv), capture_output=True, text=True,
            timeout=cmd.client_timeout_s, check=False, cwd=cmd.client_cwd)
    except subprocess.TimeoutExpired:
        raise ProbeError(f"{cmd.tool} client: no end after {cmd.client_timeout_s:g} s") from None
    finally:
        poller.stop()
    out.client_stdout, out.client_stderr = cp.stdout, cp.stderr
    out.client_returncode = cp.returncode


def _why_fallback(seen: str | None, out: RunOutput) -> str | None:
    """What `ss` saw (a fallback), with what the sender's counters say caused it."""
    if seen is None:
        return None
    causes = fallback_causes(out.mptcp_counters.get("sender", {}))
    return f"{seen}: {'; '.join(causes)}" if causes else seen


#: how often a client's log is looked at once its run is over
DONE_POLL_S = 0.01


def logged_done(path: str, marker: str) -> bool:
    """The log at `path` ends with a line that is `marker` (colours and blanks aside)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            f.seek(max(0, f.tell() - 256))
            tail = f.read().decode(errors="replace")
    except OSError:
        return False
    lines = [ln.strip() for ln in re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", tail).splitlines()]
    lines = [ln for ln in lines if ln]
    return bool(lines) and lines[-1].endswith(marker)


def _run_until_logged(argv: list[str], cmd: ToolRun, out: RunOutput) -> None:
    """Run the client until it exits or its log says it is done (`ToolRun.done_log`); ended
    there, it is taken as exited with 0, which is what it returns after that line."""
    assert cmd.done_log is not None
    start = time.monotonic()
    proc = subprocess.Popen(  # noqa: S603 - argv from validated values
        argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, cwd=cmd.client_cwd)
    stdout, stderr = "", ""
    try:
        # the run itself: nothing looked at, nothing woken, until it is over
        wait_s = cmd.done_not_before_s
        while True:
            try:
                stdout, stderr = proc.communicate(timeout=max(DONE_POLL_S, wait_s))
                out.client_returncode = proc.returncode
                break
            except subprocess.TimeoutExpired:
                wait_s = 0.0
            if logged_done(cmd.done_log, cmd.done_marker):
                proc.kill()
                stdout, stderr = proc.communicate()
                out.client_returncode = 0
                out.client_ended_after_log = True
                break
            if time.monotonic() - start > cmd.client_timeout_s:
                raise ProbeError(f"{cmd.tool} client: no end after {cmd.client_timeout_s:g} s")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    out.client_stdout, out.client_stderr = stdout or "", stderr or ""


def assemble(request: MeasurementRequest, pair: HostPair, plan: SubflowPlan, out: RunOutput,
             *, tool: str, version: str, series: list[tuple[float, float]],
             total_mbps: float, bytes_received: int, kernel_extra: dict[str, Any],
             raw: dict[str, Any], buffers_set: dict[str, int] | None = None
             ) -> MeasurementResult:
    """The result every backend returns; goodput_mbps excludes the request's warm-up.
    `buffers_set`: what the tool says it set per end (0 = left alone), for the buffer check."""
    obs = out.observation
    if obs is None or out.started is None or out.ended is None:
        raise ProbeError(f"{tool}: the run did not complete")
    after = mean_after_warmup(series, request.warmup_s)
    raw = {**raw, **obs.raw, "upm_events": out.upm_events,
           # read by the service today; observed_subflows has the same and more
           "subflow_rtt_ms": {o.name: o.rtt_ms for o in obs.subflows if o.rtt_ms is not None},
           "backup_flag_seen": obs.backup_seen,
           "aborted_sockets": out.aborted_sockets, "buffers_largest_seen": obs.buffers,
           "plan": {
               "allowed": plan.allowed, "excluded": plan.excluded, "bind": plan.bind_addr,
               "server": plan.server_addr, "leave_active": plan.leave_active}}
    result = MeasurementResult(
        request=request, tool=tool, tool_version=version, goodput_series=series,
        goodput_mbps=after if after is not None else 0.0, goodput_mbps_total=total_mbps,
        warmup_s=request.warmup_s, bytes_received=bytes_received,
        subflow_bytes=obs.subflow_bytes,
        backup_subflows=sorted(set(plan.excluded) | set(obs.backup_seen)),
        expected_subflows=plan.all, observed_subflows=obs.subflows,
        effective_buffers=obs.buffers_for(request.buffer_bytes),
        buffers_set=dict(buffers_set or {}),
        quiet_check=out.quiet, mptcp_counters=out.mptcp_counters,
        kernel={**kernel_info(pair.sender_ns), **kernel_extra}, mptcp_settings=out.settings,
        started_at=out.started, ended_at=out.ended, mptcp_ok=obs.fallback_reason is None,
        subflow_count=len(obs.subflows), fallback_reason=_why_fallback(obs.fallback_reason, out),
        raw=raw)
    result.subflow_problems = result.subflow_set_problems()
    return result

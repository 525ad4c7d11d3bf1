"""The paper's single-connection impact method (its Fig. 3): one long MPTCP connection whose
subflows are switched to backup and back in phases, each phase measured after a settle time.

Separate probes pay a connection setup and a slow start per subset; here only the first phase
does. One iperf3 run lasts ``first_settle + settle x (phases - 1) + measure x phases`` (and a
1 s tail, so that the last window has whole intervals); the
userspace path manager (``probes/tools/upm.py``) creates every subflow, then at each phase boundary
sets the kernel's backup flag (MPTCP_PM_CMD_SET_FLAGS, an MP_PRIO to the peer) on the subflows the
phase excludes and clears it on the others. A phase's goodput is the mean of the receiver's
intervals inside its measurement window; ``ss`` is sampled at each window's start and end so the
per-subflow bytes show that an excluded subflow really carried (almost) nothing in it.

The phase clock starts when iperf3's data connection (its second connection to the data port)
is established; iperf3's own clock starts about one RTT later, so a window's last interval can
hold up to one RTT of the next phase.
"""

from __future__ import annotations

import json
import math
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from probes import cc_users
from probes.base import MeasurementRequest, ProbeError, utcnow
from probes.netns import run_ns
from probes.tools.context import HostPair
from probes.tools.hygiene import abort_connections
from probes.tools.iperf3 import Iperf3Backend, build_commands, parse_server_json
from probes.tools.ports import choose_port_triple
from probes.tools.runner import RunOutput, ToolRun, check_quiet, drive, serve
from probes.tools.sstats import parse_ss_subflows
from probes.tools.subflowctl import SubflowControl, SubflowPlan, plan_subflows

#: iperf3's data connection is the second one to the data port (the control connection first)
DATA_CONNECTION = 2
#: the run goes on this long past the last window: iperf3's last interval is often a stub of a
#: few ms (dropped from the series), which would cut the last phase's window short
TAIL_S = 1.0


@dataclass(frozen=True)
class PhasedRequest:
    """One long connection; ``phases``: the subflows allowed to carry payload in each phase."""

    sender: str
    receiver: str
    phases: list[list[str]]
    cc: str = "cubic"
    buffer_bytes: int | None = None
    settle_s: float = 3.0
    measure_s: float = 5.0
    #: the first phase also covers the connection's slow start (default: settle_s)
    first_settle_s: float | None = None

    def __post_init__(self) -> None:
        if not self.phases or any(not p for p in self.phases):
            raise ValueError("phases: at least one, each with at least one allowed subflow")
        for name, v in (("settle_s", self.settle_s), ("measure_s", self.measure_s),
                        ("first_settle_s", self.first_settle_s)):
            if v is not None and not (math.isfinite(v) and v >= 0):
                raise ValueError(f"{name}: a non-negative number of seconds")
        if self.measure_s < 1:
            raise ValueError("measure_s: at least one 1 s interval")

    @property
    def first_settle(self) -> float:
        return self.settle_s if self.first_settle_s is None else self.first_settle_s

    def boundaries(self) -> list[float]:
        """Start of every phase (s after the data connection), and the end of the last."""
        out, t = [0.0], self.first_settle + self.measure_s
        for _ in self.phases[1:]:
            out.append(t)
            t += self.settle_s + self.measure_s
        return [*out, t]

    def window(self, k: int) -> tuple[float, float]:
        """Phase k's measurement window (s): after its settle time, up to its end."""
        b = self.boundaries()
        return b[k + 1] - self.measure_s, b[k + 1]

    @property
    def duration_s(self) -> float:
        return self.boundaries()[-1]


@dataclass
class PhaseResult:
    allowed: list[str]
    excluded: list[str]
    window_s: tuple[float, float]
    goodput_mbps: float | None  #: receiver's mean over the window's intervals
    intervals: int
    #: bytes acknowledged per subflow during the window (ss at its start and end)
    subflow_bytes: dict[str, int] = field(default_factory=dict)
    #: excluded subflows that carried more than ``excluded_max_bytes`` in the window
    leaks: list[str] = field(default_factory=list)
    #: both of the window's samples saw the data connection's subflows; when False,
    #: ``subflow_bytes`` is empty and ``leaks`` says nothing
    sampled: bool = False


@dataclass
class PhasedResult:
    request: PhasedRequest
    phases: list[PhaseResult]
    series: list[tuple[float, float]]
    upm_events: list[dict[str, Any]]
    flag_errors: list[str]
    started_at: str
    ended_at: str
    raw: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def impact_phases(subflows: list[str]) -> list[list[str]]:
    """The impact phase as phases: every subflow (TP_0), then each subflow excluded (TP_i)."""
    return [list(subflows)] + [[s for s in subflows if s != x] for x in subflows]


class PhasedControl(SubflowControl):
    """The userspace path manager with a schedule of backup flags (see ``probes/tools/upm.py``)."""

    def __init__(self, pair: HostPair, plan: SubflowPlan, dport: int,
                 request: PhasedRequest) -> None:
        super().__init__(pair, plan, dport)
        self.request = request

    def config(self) -> dict[str, Any]:
        cfg = super().config()
        starts = self.request.boundaries()[:-1]
        phases = []
        for k, allowed in enumerate(self.request.phases):
            if k == 0:
                continue  # the first phase's flags are set when the subflows are created
            backup = [[self.pair.sender_addrs[s.split("-")[0]],
                       self.pair.receiver_addrs[s.split("-")[1]]]
                      for s in self.plan.all if s not in allowed]
            phases.append({"phase": k, "at_s": starts[k], "backup": backup})
        return {**cfg, "anchor_connection": DATA_CONNECTION, "phases": phases}


class _WindowSampler(threading.Thread):
    """Per-subflow bytes_acked of the data port's connections at each window's start and end,
    timed from the path manager's anchor (its ``phases_anchor`` event)."""

    def __init__(self, pair: HostPair, dport: int, control: SubflowControl,
                 request: PhasedRequest) -> None:
        super().__init__(daemon=True)
        self.pair, self.dport, self.control, self.request = pair, dport, control, request
        self.samples: list[dict[tuple[str, str, str], int]] = []
        self._stop_ev = threading.Event()

    def _anchor(self) -> float | None:
        path = self.control.dir / "events.jsonl"
        while not self._stop_ev.is_set():
            try:
                for ln in path.read_text(errors="replace").splitlines():
                    if '"phases_anchor"' in ln:
                        return float(json.loads(ln)["t"])
            except (OSError, ValueError):
                pass
            time.sleep(0.01)
        return None

    def _sample(self, tries: int = 3) -> dict[tuple[str, str, str], int]:
        # a loaded machine can make `ip netns exec ss` fail or print nothing: an empty sample
        # would turn the window's bytes into {} and the leak check into a vacuous pass
        found: dict[tuple[str, str, str], int] = {}
        for _ in range(tries):
            res = run_ns(self.pair.sender_ns, ["ss", "-tinmH", "state", "established"],
                         check=False)
            found = {(sf["token"], sf["local"], sf["remote"]): sf["bytes_acked"]
                     for sf in parse_ss_subflows(res.stdout)
                     if sf["rport"] == self.dport and sf["token"]}
            if res.returncode == 0 and found:
                break
        return found

    def run(self) -> None:
        t0 = self._anchor()
        if t0 is None:
            return
        for k in range(len(self.request.phases)):
            for at in self.request.window(k):
                delay = t0 + at - 0.1 - time.time()  # just before a boundary's flag switch
                if self._stop_ev.wait(max(0.0, delay)):
                    return
                self.samples.append(self._sample())

    def stop(self) -> None:
        self._stop_ev.set()


def _window_bytes(pair: HostPair, before: dict, after: dict) -> dict[str, int]:
    """Bytes per subflow name between two samples, on the connection that moved the most."""
    moved: dict[str, dict[str, int]] = {}
    for key, acked in after.items():
        token, lo, re_ = key
        name = pair.subflow_name(lo, re_) or f"{lo}-{re_}"
        moved.setdefault(token, {})[name] = acked - before.get(key, 0)
    if not moved:
        return {}
    return max(moved.values(), key=lambda d: sum(d.values()))


def _mean_in(series: list[tuple[float, float]], lo: float, hi: float,
             step: float) -> tuple[float | None, int]:
    vals = [v for t, v in series if t - step >= lo - 0.05 and t <= hi + 0.05]
    return (sum(vals) / len(vals) if vals else None), len(vals)


def measure_phased(bed: Any, request: PhasedRequest, *, binary: str = "iperf3",
                   excluded_max_bytes: int = 64 * 1024) -> PhasedResult:
    """Run `request` on a running testbed (``probes.testbed.lifecycle.Testbed``): one iperf3
    connection, flags switched at the phase boundaries. `excluded_max_bytes`: what an excluded
    subflow may carry in a window (in-flight data of the moment it was switched is still
    acknowledged)."""
    interval = 1.0
    duration = request.duration_s
    if abs(duration - round(duration)) > 1e-9:
        raise ValueError(f"phases last {duration:g} s: iperf3 runs whole seconds")
    probe = MeasurementRequest(sender=request.sender, receiver=request.receiver, cc=request.cc,
                               buffer_bytes=request.buffer_bytes, duration_s=duration + TAIL_S,
                               allowed_subflows=None)
    what = f"phased probe {request.sender}->{request.receiver} on testbed {bed.name}"
    with bed.lock(), cc_users.using([request.cc], what):
        bed.set_direction(request.sender, request.receiver)
        pair: HostPair = bed.context(probe)
        all_sf = pair.all_subflows()
        for allowed in request.phases:
            unknown = sorted(set(allowed) - set(all_sf))
            if unknown:
                raise ProbeError(f"phases: unknown subflow(s) {unknown} (have {all_sf})")
        first = request.phases[0]
        plan = plan_subflows(pair, probe.model_copy(update={
            "allowed_subflows": None if set(first) == set(all_sf) else list(first)}))
        backend = Iperf3Backend(pair, binary=binary)
        version = backend.check_request(probe)
        port = choose_port_triple([pair.sender_ns, pair.receiver_ns])
        server_argv, client_argv = build_commands(
            probe, binary=binary, version=version, port=port, server_addr=plan.server_addr,
            bind_addr=plan.bind_addr, interval_s=interval)
        cmd = ToolRun(tool="iperf3", server_argv=server_argv, client_argv=client_argv,
                      data_port=port, listen_port=port, ports=[port - 1, port, port + 1],
                      client_timeout_s=duration + 30)
        out = RunOutput(quiet=check_quiet(pair))
        out.started = utcnow()
        sampler: list[_WindowSampler] = []

        class _Started(PhasedControl):  # start the sampler once the helper is running
            def __enter__(self) -> PhasedControl:
                super().__enter__()
                sampler[-1].start()
                return self

        def factory(p: HostPair, pl: SubflowPlan, dport: int) -> PhasedControl:
            c = _Started(p, pl, dport, request)
            sampler.append(_WindowSampler(p, dport, c, request))
            return c

        server = None
        try:
            server = serve(pair.receiver_ns, cmd, pair.receiver(cmd.server_argv))
            drive(pair, plan, cmd, out, control_factory=factory)
            out.server_stdout, out.server_stderr = server.finish(cmd.server_wait_s)
        finally:
            if sampler:
                sampler[-1].stop()
            if server is not None:
                server.kill()
            out.ended = utcnow()
            for ns in {pair.sender_ns, pair.receiver_ns}:
                abort_connections(ns, cmd.ports)
    try:
        srv = parse_server_json(json.loads(out.server_stdout))
    except ValueError as exc:
        raise ProbeError(f"iperf3: unreadable server JSON ({exc}): "
                         f"{out.client_stderr.strip()[:300]}") from None
    samples = sampler[-1].samples if sampler else []
    phases = []
    for k, allowed in enumerate(request.phases):
        lo, hi = request.window(k)
        mean, n = _mean_in(srv["series"], lo, hi, interval)
        sampled = len(samples) >= 2 * k + 2 and bool(samples[2 * k]) and bool(samples[2 * k + 1])
        moved = _window_bytes(pair, samples[2 * k], samples[2 * k + 1]) if sampled else {}
        excluded = [s for s in all_sf if s not in allowed]
        leaks = [s for s in excluded if moved.get(s, 0) > excluded_max_bytes]
        phases.append(PhaseResult(allowed=list(allowed), excluded=excluded, window_s=(lo, hi),
                                  goodput_mbps=mean, intervals=n, subflow_bytes=moved,
                                  leaks=leaks, sampled=sampled))
    errors = [f"{e.get('local')}-{e.get('remote')} phase {e.get('phase')}: {e['errors']}"
              for e in out.upm_events if e.get("action") == "phase_flags" and e.get("errors")]
    return PhasedResult(request=request, phases=phases, series=srv["series"],
                        upm_events=out.upm_events, flag_errors=errors,
                        started_at=out.started.isoformat(), ended_at=out.ended.isoformat(),
                        raw={"client_argv": client_argv, "server_argv": server_argv,
                             "total_mbps": srv["mbps"], "samples": len(samples)})

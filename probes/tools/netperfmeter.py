"""NetPerfMeter backend: command lines for 2.x and legacy 1.9, and the parsers of its output.

- 2.x (upstream MPTCP): passive ``netperfmeter PORT --control-over-tcp --nodisplay``; active
  ``netperfmeter ADDR:PORT --control-over-tcp --nodisplay --runtime N --config F --scalar F
  --vector F --mptcp FLOWSPEC``.
- 1.9 (out-of-tree MPTCP kernels, e.g. the paper's 0.95): passive ``netperfmeter PORT`` (needs
  kernel SCTP); active ``netperfmeter ADDR:PORT -control-over-tcp -runtime=N -config=F -scalar=F
  -vector=F -tcp FLOWSPEC:cmt=mptcp``.

FLOWSPEC: ``const<rate>:const<size>:const0:0:cc=<cc>:sndbuf=B:rcvbuf=B:description=<d>``;
bulk is rate 0 (saturated) with 1400-byte frames. ``sndbuf``/``rcvbuf`` are always given: a flow
without them gets NetPerfMeter's own per-flow default of 233,016 bytes on both ends
(``FlowTrafficSpec::reset``), which Linux doubles to 466,032 and which turns autotuning off; a
value of 0 makes its ``setBufferSizes`` leave the socket alone (it calls setsockopt only for a
size > 0, 2.0.10's ``src/flowmanager.cc``), on the active side and on the passive side, which
applies the flow's sizes it gets over the control connection to its accepted socket.

Ports (2.x, checked live with 2.0.10 and in the fixtures' ``active.log``): the passive side
started with ``P`` listens for TCP/UDP/SCTP/DCCP data on P, for **MPTCP data on P-1** and for
control on P+1; the active side's MPTCP data connection goes to P-1, so that is the port the
observer and the userspace path manager watch (``data_port``).

Goodput is the *passive* (receiving) side's: ``netPerfMeter.passive.flow[N]`` "Received Bytes"
and the per-second rows of ``run-passive.vec``. Files may be plain or ``.bz2``.
"""

from __future__ import annotations

import bz2
import contextlib
import itertools
import math
import re
import shlex
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from probes import environment
from probes.base import CapabilityError, MeasurementRequest, MeasurementResult, ProbeError
from probes.frames import FRAMES_ARTIFACT, FrameRecord, frame_stats, frames_csv
from probes.netns import run
from probes.tools import binver, npm_spare
from probes.tools.capabilities import NETPERFMETER_VERSION, check_host, require, require_pair
from probes.tools.context import HostPair
from probes.tools.ports import choose_port_triple
from probes.tools.runner import ToolRun, assemble, run_probe
from probes.tools.subflowctl import plan_subflows

BULK_FRAME_SIZE = 1400
#: Added to the active side's runtime: the passive side writes a second's "Received" row on its
#: own timer, started when the start message reached it; the stop message travels as long, so
#: without slack the last full second's row was missing about one probe in ten (a 3 s probe
#: then had no interval after its 1.5 s warm-up).
RUNTIME_SLACK_S = 0.2
#: The active side's log file (2.x) and its last line. 2.0.10 writes "Logging finished." once
#: it has stopped the measurement, downloaded the passive side's results and closed its own
#: files, right before `main` returns 0; then its exit joins the flow manager's thread, which
#: sleeps in poll() until its next one-second statistics tick: 0-1 s (0.99 s measured on
#: uit-haw) of every probe. The active side is ended at that line instead (`runner.ToolRun`).
ACTIVE_LOG = "active.log"
ACTIVE_DONE = "Logging finished."
_SCALAR = re.compile(r'^scalar\s+"([^"]+)"\s+"([^"]+)"\s+(\S+)\s*$')


def parse_version(text: str) -> str | None:
    m = re.search(NETPERFMETER_VERSION, text)
    return m.group(1) if m else None


def is_legacy(version: str) -> bool:
    major = int(version.split(".")[0])
    return major < 2


def data_port(port: int, version: str) -> int:
    """Where the MPTCP data connection goes for a passive side started on ``port``."""
    return port if is_legacy(version) else port - 1


_CONNECT = re.compile(r"connecting (\w+) socket to ([0-9.]+|\[[0-9a-fA-F:]+\]):(\d+)")
_CONTROL = re.compile(r"Control Address\s*=\s*([0-9.]+|\[[0-9a-fA-F:]+\]):(\d+)")
_BUFFER = re.compile(r"-\s*(Send|Receive) Buffer Size:\s*(\d+)")


def parse_active_log(text: str) -> dict[str, Any]:
    """Data connections ``[(protocol, address, port)]`` and the control address the active
    side's log names (ANSI colours are ignored)."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", text)
    ctrl = _CONTROL.search(text)
    sizes: dict[str, int] = {}
    for m in _BUFFER.finditer(text):  # the flow as prepared (printed again at the end)
        sizes.setdefault("sndbuf" if m.group(1) == "Send" else "rcvbuf", int(m.group(2)))
    return {
        "data": [(m.group(1), m.group(2), int(m.group(3))) for m in _CONNECT.finditer(text)],
        "control": (ctrl.group(1), int(ctrl.group(2))) if ctrl else None,
        "version": parse_version(text),
        "buffers": sizes,
    }


def buffers_set(log_buffers: dict[str, int]) -> dict[str, int]:
    """What NetPerfMeter set on each end (0 = left alone): the flow's sizes, which the passive
    side applies to its accepted socket as the active side does to its own."""
    snd, rcv = log_buffers.get("sndbuf"), log_buffers.get("rcvbuf")
    out: dict[str, int] = {}
    for end in ("sender", "receiver"):
        if snd is not None:
            out[f"{end}_sndbuf"] = snd
        if rcv is not None:
            out[f"{end}_rcvbuf"] = rcv
    return out


def flowspec(request: MeasurementRequest, description: str | None = None) -> str:
    p = request.profile
    if p.kind == "paced":
        rate, size = p.frame_rate_hz, p.frame_size_bytes
        rate_s = f"{rate:g}"
    else:
        rate_s, size = "0", BULK_FRAME_SIZE
    # 0 = no buffer asked: leave the sockets to the kernel's autotuning (see the module doc)
    buf = request.buffer_bytes or 0
    parts = [f"const{rate_s}", f"const{size}", "const0", "0", f"cc={request.cc}",
             f"sndbuf={buf}", f"rcvbuf={buf}"]
    parts.append(f"description={description or p.kind}")
    return ":".join(parts)


def _host_port(address: str, port: int) -> str:
    """``ADDR:PORT``, an IPv6 address in brackets (``[fd00:2::1]:9000``), as the tool parses it."""
    return f"[{address}]:{port}" if ":" in address else f"{address}:{port}"


def build_commands(
    request: MeasurementRequest,
    *,
    version: str,
    address: str,
    port: int,
    outdir: str,
    binary: str = "netperfmeter",
    compress: bool = False,
    local: str | None = None,
) -> tuple[list[str], list[str]]:
    """(passive argv, active argv), chosen by the tool's version. ``local``: the active side's
    data address (the connection's first subflow), given before the flow as 2.x requires."""
    runtime = f"{max(1, math.ceil(request.duration_s)) + RUNTIME_SLACK_S:g}"
    ext = ".bz2" if compress else ""
    cfg, sca, vec = f"{outdir}/run.config", f"{outdir}/run.sca{ext}", f"{outdir}/run.vec{ext}"
    spec = flowspec(request)
    passive = passive_argv(binary, port, version)
    if is_legacy(version):
        active = [
            binary,
            _host_port(address, port),
            "-control-over-tcp",
            f"-runtime={runtime}",
            f"-config={cfg}",
            f"-scalar={sca}",
            f"-vector={vec}",
            *([f"-local={local}"] if local else []),
            "-tcp",
            f"{spec}:cmt=mptcp",
        ]
    else:
        active = [
            binary,
            _host_port(address, port),
            "--control-over-tcp",
            "--nodisplay",
            "--runtime",
            runtime,
            "--config",
            cfg,
            "--scalar",
            sca,
            "--vector",
            vec,
            # the log in a file of its own, at a level that ends it with "Logging finished.":
            # the run is over there (`ACTIVE_DONE`)
            "--loglevel",
            "1",
            "--logcolor",
            "off",
            "--logfile",
            f"{outdir}/{ACTIVE_LOG}",
            *(["--local", local] if local else []),
            "--mptcp",
            spec,
        ]
    return passive, active


def passive_argv(binary: str, port: int, version: str) -> list[str]:
    """The passive side on `port` (the same for every probe it serves)."""
    if is_legacy(version):
        return [binary, str(port)]
    return [binary, str(port), "--control-over-tcp", "--nodisplay"]


# ---- parsers ------------------------------------------------------------------------------
def read_text(path: str | Path) -> str:
    """A result file, plain or bzip2-compressed (by suffix or by magic)."""
    p = Path(path)
    if not p.exists() and Path(str(p) + ".bz2").exists():
        p = Path(str(p) + ".bz2")
    data = p.read_bytes()
    if p.suffix == ".bz2" or data[:3] == b"BZh":
        data = bz2.decompress(data)
    return data.decode("utf-8", errors="replace")


def parse_scalars(text: str) -> dict[str, dict[str, float]]:
    """``{object: {name: value}}`` from a .sca file."""
    out: dict[str, dict[str, float]] = {}
    for line in text.splitlines():
        m = _SCALAR.match(line.strip())
        if m:
            try:
                out.setdefault(m.group(1), {})[m.group(2)] = float(m.group(3))
            except ValueError:
                continue
    return out


def parse_config(text: str) -> dict[str, str]:
    """Shell-style KEY=VALUE lines of run.config (values unquoted)."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        k, v = line.split("=", 1)
        try:
            vals = shlex.split(v)
            out[k.strip()] = vals[0] if vals else ""
        except ValueError:
            out[k.strip()] = v.strip().strip('"')
    return out


def parse_flow_vector(text: str) -> list[dict[str, Any]]:
    """Rows of run-<side>.vec: the header names the columns; each row has a leading row number."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if not lines:
        return []
    header = lines[0].split()
    rows = []
    for ln in lines[1:]:
        fields = ln.split("\t")
        if len(fields) == len(header) + 1:
            fields = fields[1:]
        if len(fields) != len(header):
            continue
        row: dict[str, Any] = {}
        for k, v in zip(header, fields, strict=True):
            v = v.strip().strip('"')
            try:
                row[k] = float(v) if any(c in v for c in ".eE") else int(v)
            except ValueError:
                row[k] = v
        rows.append(row)
    return rows


def goodput_series(rows: list[dict[str, Any]], flow: int = -1) -> list[tuple[float, float]]:
    """(RelTime s, Mbit/s) of "Received" rows of one flow (-1 = total)."""
    out = []
    for r in rows:
        if r.get("Action") == "Received" and int(r.get("FlowID", -99)) == flow:
            iv = float(r.get("Interval", 0.0))
            if iv > 0:
                out.append((round(float(r["RelTime"]), 6), float(r["RelBytes"]) * 8 / iv / 1e6))
    return out


def parse_results(directory: str | Path, prefix: str = "run") -> dict[str, Any]:
    """Everything a NetPerfMeter run wrote in ``directory`` (plain or .bz2 files)."""
    d = Path(directory)

    def find(name: str) -> Path | None:
        for cand in (d / name, d / f"{name}.bz2"):
            if cand.exists():
                return cand
        return None

    sca_p, vec_p, cfg_p = (
        find(f"{prefix}-passive.sca"),
        find(f"{prefix}-passive.vec"),
        find(f"{prefix}.config"),
    )
    if sca_p is None:
        raise ProbeError(f"netperfmeter: no {prefix}-passive.sca[.bz2] in {d}")
    scalars = parse_scalars(read_text(sca_p))
    active_sca = find(f"{prefix}-active.sca")
    active = parse_scalars(read_text(active_sca)) if active_sca else {}
    config = parse_config(read_text(cfg_p)) if cfg_p else {}
    rows = parse_flow_vector(read_text(vec_p)) if vec_p else []
    flows = sorted(k for k in scalars if re.fullmatch(r"netPerfMeter\.passive\.flow\[\d+\]", k))
    total_bytes = sum(int(scalars[f].get("Received Bytes", 0)) for f in flows)
    rate_bps = sum(scalars[f].get("Received Bit Rate", 0.0) for f in flows)
    first = [
        scalars[f].get("First Reception", 0) for f in flows if scalars[f].get("First Reception")
    ]
    last = [scalars[f].get("Last Reception", 0) for f in flows if scalars[f].get("Last Reception")]
    protocols = [
        config.get(f"FLOW{i}_PROTOCOL", "") for i in range(int(config.get("NUM_FLOWS", 0)))
    ]
    log = d / "active.log"
    version = parse_version(log.read_text(errors="replace")) if log.exists() else None
    sent = sum(
        int(v.get("Transmitted Bytes", 0))
        for k, v in active.items()
        if re.fullmatch(r"netPerfMeter\.active\.flow\[\d+\]", k)
    )
    return {
        "received_bytes": total_bytes,
        "goodput_mbps": rate_bps / 1e6,
        "first_reception_us": min(first) if first else None,
        "last_reception_us": max(last) if last else None,
        "series": goodput_series(rows, -1),
        "flows": {f: scalars[f] for f in flows},
        "config": config,
        "protocols": protocols,
        "cc": [config.get(f"FLOW{i}_CC") for i in range(int(config.get("NUM_FLOWS", 0)))],
        "active_transmitted_bytes": sent,
        "version": version,
    }


RANDOM_CONSTANT = 0  #: NetPerfMeter's RNG id of a constant distribution (``src/tools.h``)


def constant_frame_size(config: dict[str, str], flow: int = 0) -> int | None:
    """The flow's outbound frame size when it is constant (CBR), else None (VBR: ``exp`` etc.)."""
    rng = config.get(f"FLOW{flow}_OUTBOUND_FRAME_SIZE_RNG")
    value = config.get(f"FLOW{flow}_OUTBOUND_FRAME_SIZE_VALUE1")
    if rng is None or value is None or int(float(rng)) != RANDOM_CONSTANT:
        return None
    size = int(float(value))
    return size if size > 0 else None


def message_frames(rows: list[dict[str, Any]], frame_size: int | None,
                   frames_sent: int | None = None) -> tuple[list[FrameRecord], str]:
    """Per-frame records from a per-message vector (``run-passive-<flow>-<stream>.vec``) and
    the unit they are in ("frame" or "message").

    Each row is one received message: AbsTime (receive, µs), Delay (ms, receive minus the
    message's send time stamp), AbsBytes (payload received so far). A frame is split into
    messages of at most ``maxmsgsize`` (16,000) bytes, so with a constant frame size the
    message whose last byte is byte b belongs to frame (b - 1) // frame_size; a frame's send
    time is its earliest message's send time, its receive time its last message's, once all its
    bytes are in. The counters run from the start of the flow while rows are written only from
    NetPerfMeter's first statistics event, so a first message can have no row (2.0.10's video
    fixture starts at SeqNumber 1): a frame without any row is left out. NetPerfMeter's own
    "Received Frames" counts 124 of the fixture's 249 frames, so frames are counted here.
    Frames the active side sent (``frames_sent``) that never completed are lost, their send
    time spaced at the flow's frame interval after the last frame seen. Without a constant
    frame size (VBR) frame boundaries are unknown and each message is a record.
    """
    msgs = [r for r in rows if isinstance(r.get("AbsTime"), int) and "Delay" in r]
    if frame_size is None:
        return [FrameRecord(i, int(r["AbsTime"] - round(float(r["Delay"]) * 1000)),
                            int(r["AbsTime"]), int(r.get("RelBytes", 0)))
                for i, r in enumerate(msgs)], "message"
    first_send: dict[int, int] = {}
    last_recv: dict[int, int] = {}
    received_bytes = 0
    for r in msgs:
        end = int(r["AbsBytes"])
        k = (end - 1) // frame_size
        send = int(r["AbsTime"] - round(float(r["Delay"]) * 1000))
        first_send[k] = min(send, first_send.get(k, send))
        last_recv[k] = max(int(r["AbsTime"]), last_recv.get(k, 0))
        received_bytes = max(received_bytes, end)
    complete = received_bytes // frame_size
    out = [FrameRecord(k, first_send[k], last_recv[k] if k < complete else None, frame_size)
           for k in sorted(first_send)]
    if frames_sent is not None and out:
        spacing = _median_spacing(out)
        last = out[-1]
        out += [FrameRecord(k, last.send_us + round((k - last.seq) * spacing), None, frame_size)
                for k in range(last.seq + 1, frames_sent)]
    return out, "frame"


def _median_spacing(records: list[FrameRecord]) -> float:
    gaps = sorted((b.send_us - a.send_us) / (b.seq - a.seq)
                  for a, b in itertools.pairwise(records))
    return gaps[len(gaps) // 2] if gaps else 0.0


def parse_frames(directory: str | Path, prefix: str = "run", flow: int = 0,
                 ) -> tuple[list[FrameRecord], str] | None:
    """Frame records of one flow of a run's directory (None: no per-message vector)."""
    d = Path(directory)
    vec = next((c for c in (d / f"{prefix}-passive-{flow:08d}-0000.vec",
                            d / f"{prefix}-passive-{flow:08d}-0000.vec.bz2") if c.exists()), None)
    if vec is None:
        return None
    cfg = next((c for c in (d / f"{prefix}.config", d / f"{prefix}.config.bz2") if c.exists()),
               None)
    config = parse_config(read_text(cfg)) if cfg else {}
    sca = next((c for c in (d / f"{prefix}-active.sca", d / f"{prefix}-active.sca.bz2")
                if c.exists()), None)
    active = parse_scalars(read_text(sca)) if sca else {}
    sent = active.get(f"netPerfMeter.active.flow[{flow}]", {}).get("Transmitted Frames")
    return message_frames(parse_flow_vector(read_text(vec)), constant_frame_size(config, flow),
                          int(sent) if sent is not None else None)


#: What a NetPerfMeter run leaves in its directory that is worth keeping (plain or .bz2).
ARTIFACT_FILE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*\.(sca|vec|config|log)(\.bz2)?$")


def add_result_artifacts(result: MeasurementResult, directory: str | Path) -> None:
    """The run's .sca/.vec/.config files and the two sides' logs, as written (a .bz2 file stays
    compressed: it is downloaded as the tool wrote it)."""
    for p in sorted(Path(directory).iterdir()):
        if p.is_file() and ARTIFACT_FILE.match(p.name):
            result.add_artifact(p.name, p.read_bytes())


def default_binary() -> str:
    """``MPCOA_NETPERFMETER`` (a path or a name on PATH), else ``netperfmeter``."""
    return environment.get("netperfmeter") or "netperfmeter"


#: The passive side never ends by itself and its results came back over the control connection
#: before the active side ended: it is ended at once (waiting a second for it was a second of
#: every probe).
PASSIVE_WAIT_S = 0.0


class NetPerfMeterBackend:
    """``compress``: the vectors bzip2'd: the passive side's per-message vector comes back over
    the control connection, across the probed path (about 2.7 s of a 3 s probe's 6.9 s on
    UNIS-HiN's uplinks plain)."""

    name = "netperfmeter"

    def __init__(self, pair: HostPair, binary: str | None = None, compress: bool = True,
                 leave_active: tuple[str, ...] = (), spare: bool = False) -> None:
        """``spare``: each probe's passive side started when the probe before it ended
        (`probes.tools.npm_spare`: it has been up a while when the active side connects)."""
        self.pair = pair
        self.binary = binary or default_binary()
        self.compress = compress
        self.leave_active = tuple(leave_active)
        self.spare = spare

    def version(self) -> str:
        return binver.cached(self.binary, self._read_version)

    def _read_version(self) -> str:
        if shutil.which(self.binary) is None:
            raise CapabilityError(
                f"netperfmeter: binary {self.binary!r} not found (NetPerfMeter 2.x is not packaged "
                "by Debian 12; build it and give its path in MPCOA_NETPERFMETER)"
            )
        cp = run([self.binary, "--version"], check=False, timeout=10)
        v = parse_version(cp.stdout + cp.stderr)
        if v is None:
            cp = run([self.binary, "-version"], check=False, timeout=10)
            v = parse_version(cp.stdout + cp.stderr)
        if v is None:
            raise CapabilityError(f"netperfmeter: cannot read the version of {self.binary!r}")
        return v

    def capabilities(self) -> dict[str, Any]:
        v = self.version()
        s, r = check_host(self.pair.sender_ns), check_host(self.pair.receiver_ns)
        require(s)
        require(r, sctp=is_legacy(v))  # 1.9's passive side refuses to start without SCTP
        return {"tool": "netperfmeter", "version": v, "legacy": is_legacy(v),
                "sender": s, "receiver": r}

    def tool_run(self, request: MeasurementRequest, version: str, port: int, outdir: str,
                 server_addr: str, bind_addr: str | None) -> ToolRun:
        passive, active = build_commands(
            request, version=version, address=server_addr, port=port, outdir=outdir,
            binary=self.binary, compress=self.compress, local=bind_addr)
        return ToolRun(
            tool="netperfmeter", server_argv=passive, client_argv=active,
            data_port=data_port(port, version), listen_port=port + 1,
            ports=[port - 1, port, port + 1], client_timeout_s=request.duration_s + 60,
            client_cwd=outdir, server_merge_stderr=True, server_wait_s=PASSIVE_WAIT_S,
            **done_when_logged(version, outdir, request))

    def measure(self, request: MeasurementRequest) -> MeasurementResult:
        caps = self.capabilities()
        require_pair(caps, request.cc)
        version = caps["version"]
        plan = plan_subflows(self.pair, request, self.leave_active)
        key = (self.pair.sender_ns, self.pair.receiver_ns, self.binary)
        spare = npm_spare.take(key) if self.spare else None
        port = spare.port if spare is not None else choose_port_triple(
            [self.pair.sender_ns, self.pair.receiver_ns])
        with run_folder(self.pair.workdir) as outdir:
            cmd = self.tool_run(request, version, port, outdir, plan.server_addr, plan.bind_addr)
            try:
                out = run_probe(self.pair, plan, cmd,
                                server=spare.server if spare is not None else None)
            finally:
                if self.spare:  # this probe's connections are aborted: nothing is measured now
                    # no spare (a port or the start failed) is only the wait it would have saved
                    with contextlib.suppress(ProbeError, OSError):
                        npm_spare.prepare(key, lambda p: passive_argv(self.binary, p, version))
            return finish_result(request, self.pair, plan, out, cmd, outdir, version,
                                 floor_ms=self.pair.delay_floor_ms())


@contextlib.contextmanager
def run_folder(parent: str | None = None) -> Iterator[str]:
    """A folder for one run's files, removed once the run is read: the result keeps them as
    artifacts (bytes), so nothing on disk outlives the probe."""
    outdir = tempfile.mkdtemp(prefix="mpcoa-npm-", dir=parent)
    try:
        yield outdir
    finally:
        shutil.rmtree(outdir, ignore_errors=True)


def done_when_logged(version: str, outdir: str, request: MeasurementRequest) -> dict[str, Any]:
    """`ToolRun` fields that end a 2.x active side at its log's last line (`ACTIVE_DONE`);
    none for 1.9, whose command line has no log file."""
    if is_legacy(version):
        return {}
    return {"done_log": f"{outdir}/{ACTIVE_LOG}", "done_marker": ACTIVE_DONE,
            "done_not_before_s": request.duration_s}


def finish_result(request: MeasurementRequest, pair: HostPair, plan: Any, out: Any,
                  cmd: ToolRun, outdir: str, version: str, *, floor_ms: float | None,
                  extra_raw: dict[str, Any] | None = None) -> MeasurementResult:
    """The result of a run whose active side wrote its files to `outdir` (the passive side's
    results come back to the active side over the control connection: run-passive.*)."""
    own_log = Path(outdir) / ACTIVE_LOG  # 2.x writes its log there; 1.9 to its output
    log = ((own_log.read_text(errors="replace") if own_log.exists() else "")
           + out.client_stdout + out.client_stderr)
    own_log.write_text(log)
    if out.client_returncode != 0:
        raise ProbeError(f"netperfmeter active side failed ({out.client_returncode}): "
                         f"{log[-500:]}")
    res = parse_results(outdir)
    connected = parse_active_log(log)
    watched = [p for proto, _a, p in connected["data"] if proto == "MPTCP"]
    if watched and cmd.data_port not in watched:
        raise ProbeError(f"netperfmeter: MPTCP data went to port(s) {watched}, the observer "
                         f"watched {cmd.data_port}")
    raw = {"passive_argv": cmd.server_argv, "active_argv": cmd.client_argv,
           "outdir": outdir, "active_log": log, "passive_log": out.server_stdout,
           "results": res, "connections": connected,
           "active_ended_after_log": bool(getattr(out, "client_ended_after_log", False)),
           **(extra_raw or {})}
    result = assemble(request, pair, plan, out, tool="netperfmeter", version=version,
                      series=res["series"], total_mbps=res["goodput_mbps"],
                      bytes_received=res["received_bytes"],
                      kernel_extra={"cc_requested": res["cc"]}, raw=raw,
                      buffers_set=buffers_set(connected["buffers"]))
    if out.server_stdout:
        (Path(outdir) / "passive.log").write_text(out.server_stdout)
    add_result_artifacts(result, outdir)
    if request.profile.kind == "paced":
        add_frames(result, outdir, floor_ms=floor_ms)
    return result


def add_frames(result: MeasurementResult, directory: str | Path,
               floor_ms: float | None = None) -> None:
    """A paced probe's frame figures and its per-frame file, from the per-message vector;
    `floor_ms`: the paths' least one-way delay, where known."""
    parsed = parse_frames(directory)
    if parsed is None:
        raise ProbeError(f"netperfmeter: no per-message vector in {directory} for a paced probe")
    records, unit = parsed
    result.frames = frame_stats(records, budget_ms=result.request.profile.delay_budget_ms,
                                unit="frame" if unit == "frame" else "message",
                                warmup_s=result.request.warmup_s, floor_ms=floor_ms)
    result.add_artifact(FRAMES_ARTIFACT, frames_csv(records))

"""iperf3 backend: MPTCP through ``mptcpize run`` (Debian 12's iperf3 3.12 has no MPTCP flag) or
iperf3's own ``--mptcp`` where the version has it (3.16+); ``-C`` congestion control, ``-w``
buffer (both ends: iperf3 passes it to the server), JSON intervals.

Goodput is the receiver's (the server's JSON intervals); per-subflow bytes come from ``ss -ti``
samples on the sender (bytes_acked of each subflow of the data connection).
"""

from __future__ import annotations

import contextlib
import json
import math
import random
import re
import shutil
import subprocess
import time
from typing import Any

from probes.base import (
    CapabilityError,
    MeasurementRequest,
    MeasurementResult,
    ProbeError,
    utcnow,
)
from probes.context import HostPair, SsPoller, SubflowControl, kernel_info, mptcp_settings
from probes.netns import kill_pid, run, run_ns

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
                 interval_s: float = 1.0) -> None:
        self.pair = pair
        self.binary = binary
        self.mptcpize = mptcpize
        self.interval_s = interval_s

    # ---- capabilities ------------------------------------------------------------------------
    def version(self) -> str:
        if shutil.which(self.binary) is None:
            raise CapabilityError(f"iperf3: binary {self.binary!r} not found")
        cp = run([self.binary, "--version"], check=False)
        v = parse_version(cp.stdout + cp.stderr)
        if not v:
            raise CapabilityError(f"iperf3: cannot read the version of {self.binary!r}")
        return v

    def capabilities(self) -> dict[str, Any]:
        from probes.capabilities import check_host

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
    def _wait_listening(self, port: int, proc: subprocess.Popen[str], timeout: float = 5) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            out = run_ns(self.pair.receiver_ns, ["ss", "-ltnH", "sport", "=", f":{port}"],
                         check=False).stdout
            if out.strip():
                return
            if proc.poll() is not None:
                err = proc.stderr.read() if proc.stderr else ""
                raise ProbeError(f"iperf3 server exited early: {err}")
            time.sleep(0.05)
        raise ProbeError(f"iperf3 server not listening on port {port} after {timeout} s")

    def measure(self, request: MeasurementRequest) -> MeasurementResult:
        caps = self.capabilities()
        for side in ("sender", "receiver"):
            if not caps[side]["mptcp_enabled"]:
                raise CapabilityError(f"{side}: kernel MPTCP is not enabled (net.mptcp.enabled)")
            if request.cc not in caps[side]["congestion_controls"]:
                raise CapabilityError(
                    f"{side}: congestion control {request.cc!r} not available "
                    f"(have: {', '.join(caps[side]['congestion_controls'])})")
        version = caps["version"]
        pair = self.pair
        all_sf = pair.all_subflows()
        allowed = request.allowed_subflows or all_sf
        unknown = [s for s in allowed if s not in all_sf]
        if unknown:
            raise ProbeError(f"allowed_subflows: unknown subflow(s) {unknown} (have {all_sf})")
        backups = [s for s in all_sf if s not in allowed]
        port = random.randint(20000, 39999)  # noqa: S311 - not for security
        control: SubflowControl | None = None
        if backups:
            if not pair.userspace_pm:
                raise CapabilityError("subflow control needs the userspace path manager on the "
                                      "sender (not permitted for this host pair)")
            lo, re_ = allowed[0].split("-")
            bind, server_addr = pair.sender_addrs[lo], pair.receiver_addrs[re_]
            ids = {lbl: i + 1 for i, lbl in enumerate(pair.sender_addrs)}
            pairs = [(pair.sender_addrs[s.split("-")[0]], ids[s.split("-")[0]],
                      pair.receiver_addrs[s.split("-")[1]], s in backups) for s in all_sf]
            control = SubflowControl(pair, pairs, port)
        else:
            bind, server_addr = None, next(iter(pair.receiver_addrs.values()))
        server_argv, client_argv = build_commands(
            request, binary=self.binary, version=version, port=port, server_addr=server_addr,
            bind_addr=bind, interval_s=self.interval_s, mptcpize=self.mptcpize)
        settings = {"sender": mptcp_settings(pair.sender_ns),
                    "receiver": mptcp_settings(pair.receiver_ns)}
        poller = SsPoller(pair.sender_ns, port)
        started = utcnow()
        server = subprocess.Popen(  # noqa: S603 - argv from validated values
            pair.receiver(server_argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True)
        client_out = client_err = ""
        try:
            self._wait_listening(port, server)
            with control if control is not None else contextlib.nullcontext():
                if control is not None:
                    settings["sender"]["path_manager_used"] = "userspace"
                poller.start()
                try:
                    cp = subprocess.run(  # noqa: S603
                        pair.sender(client_argv), capture_output=True, text=True,
                        timeout=request.duration_s + 30, check=False)
                    client_out, client_err = cp.stdout, cp.stderr
                except subprocess.TimeoutExpired:
                    raise ProbeError(f"iperf3 client: no end after {request.duration_s + 30} s"
                                     ) from None
                finally:
                    poller.stop()
            if cp.returncode != 0 and not client_out.strip():
                # The client died before it connected: the one-shot server would wait for ever.
                raise ProbeError(f"iperf3 client exited with status {cp.returncode}: "
                                 f"{client_err.strip()[:300]}")
            try:
                server_out, server_err = server.communicate(timeout=15)
            except subprocess.TimeoutExpired:
                raise ProbeError("iperf3 server: no result 15 s after the client ended") from None
        finally:
            if server.poll() is None:
                kill_pid(server.pid)
                server.wait()
        ended = utcnow()
        raw: dict[str, Any] = {
            "server_argv": server_argv, "client_argv": client_argv,
            "server_stdout": server_out, "server_stderr": server_err,
            "client_stdout": client_out, "client_stderr": client_err,
            "ss_last": poller.last_raw, "ss_samples": poller.samples,
        }
        if control is not None:
            raw["upm_events"] = control.events
        try:
            srv = parse_server_json(json.loads(server_out))
            cli = parse_client_json(json.loads(client_out))
        except ValueError as exc:
            raise ProbeError(f"iperf3: unreadable JSON output ({exc}); stderr: "
                             f"{client_err.strip()[:300]} {server_err.strip()[:300]}") from None
        token, sfs = poller.data_connection()
        subflow_bytes: dict[str, int] = {}
        backup_seen: list[str] = []
        for sf in sfs:
            name = pair.subflow_name(sf["local"], sf["remote"]) or f"{sf['local']}-{sf['remote']}"
            subflow_bytes[name] = subflow_bytes.get(name, 0) + sf["bytes_acked"]
            if sf["backup"]:
                backup_seen.append(name)
        raw["backup_flag_seen"] = sorted(set(backup_seen))
        raw["subflow_rtt_ms"] = {
            pair.subflow_name(sf["local"], sf["remote"]) or f"{sf['local']}-{sf['remote']}":
            sf["rtt_ms"] for sf in sfs if sf["rtt_ms"] is not None
        }
        msk = poller.msk.get(token or "", {})
        fallback_reason = None
        if token is None:
            fallback_reason = "no MPTCP subflow seen on the sender (plain TCP)"
        elif msk.get("fallback"):
            fallback_reason = "MPTCP connection fell back to TCP"
        return MeasurementResult(
            request=request,
            tool="iperf3",
            tool_version=version,
            goodput_series=srv["series"],
            goodput_mbps=srv["mbps"],
            bytes_received=srv["bytes"],
            subflow_bytes=subflow_bytes,
            backup_subflows=sorted(set(backups) | set(backup_seen)),
            effective_buffers={"sender_sndbuf": cli["sndbuf"], "sender_rcvbuf": cli["rcvbuf"],
                               "receiver_sndbuf": srv["sndbuf"], "receiver_rcvbuf": srv["rcvbuf"]},
            kernel={**kernel_info(pair.sender_ns), "sender_cc_used": cli["cc"],
                    "receiver_cc_used": srv["cc"]},
            mptcp_settings=settings,
            started_at=started,
            ended_at=ended,
            mptcp_ok=fallback_reason is None,
            subflow_count=len(sfs),
            fallback_reason=fallback_reason,
            raw=raw,
        )

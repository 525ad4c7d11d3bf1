"""RFC 6356's three goals for the coupled BPF congestion controls, measured on the testbed.

Three small scenarios (rates of a few Mbit/s, 10 ms one-way delay on every path), each an
emulated testbed of its own (``probes.testbed.lifecycle``), data always from site A to site B:

- ``shared``: A has one ISP (U, 4 Mbit/s up), B has two (D, O, 40 Mbit/s down). The MPTCP
  connection's two subflows U-D and U-O both cross A's 4 Mbit/s uplink (one shared bottleneck),
  as does one single-path TCP flow U-D of the base CC. *Do no harm*: the coupled connection
  should take about the TCP flow's share (ratio ~1); uncoupled MPTCP (reno or vegas on every
  subflow) takes about twice.
- ``disjoint``: A has U (6 Mbit/s up) and T (3 Mbit/s up), B one ISP D (40 Mbit/s): subflows
  U-D and T-D have disjoint bottlenecks. *Improve throughput*: the connection gets at least
  about what single-path TCP gets on the better path (measured in the same testbed, one TCP
  flow per path at once).
- ``balance``: as ``disjoint`` with U and T both 4 Mbit/s, plus two reno TCP flows on T-D.
  *Balance congestion*: the fraction of the connection's bytes sent over the congested path T
  (per-subflow ``tcpi_bytes_acked`` from ``MPTCP_TCPINFO``) is lower for the coupled controls
  than for uncoupled reno.

Flows are small Python programs run with ``ip netns exec`` (argv lists, no shell): the sink
listens on an MPTCP socket (which also accepts plain TCP) and records its received byte count
every 0.2 s; the sender opens an MPTCP (IPPROTO_MPTCP) or TCP socket, sets TCP_CONGESTION (on an
MPTCP socket the kernel applies it to every subflow), sends for the duration, and before closing
reads each subflow's addresses and bytes_acked with getsockopt(SOL_MPTCP, MPTCP_SUBFLOW_ADDRS /
MPTCP_TCPINFO). Goodput is the receiver's, over the run after a warm-up.
"""

from __future__ import annotations

import contextlib
import json
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from probes import cc_users
from probes.base import CC_PATTERN
from probes.bpf import cc as bpf_cc
from probes.netns import kill_pid
from probes.testbed import lifecycle as tbmod
from probes.testbed.spec import TestbedSpec, parse_spec

DELAY_MS = 20
DURATION_S = 12.0
WARMUP_S = 3.0
#: the uncoupled base of each coupled control (what it is on a plain TCP socket)
BASE_CC = {"lia": "reno", "olia": "reno", "balia": "reno", "wvegas": "vegas", "ewtcp": "reno",
           "cs218": "reno"}

FLOW_SCRIPT = r"""
import ctypes, json, socket, struct, sys, time
IPPROTO_MPTCP, SOL_MPTCP, MPTCP_TCPINFO, MPTCP_SUBFLOW_ADDRS = 262, 284, 2, 3
TCP_CONGESTION = 13
if sys.argv[1] == "sink":
    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM, IPPROTO_MPTCP)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("0.0.0.0", int(sys.argv[2])))
    ls.listen(1)
    ls.settimeout(float(sys.argv[3]))
    print("ready", flush=True)
    t_accept = time.monotonic()
    c, peer = ls.accept()
    c.settimeout(1.0)
    stop_after = float(sys.argv[4])  # seconds after the first byte: never wait for a drain
    n, t0, nxt, series = 0, None, 0.0, []
    while True:
        try:
            b = c.recv(1 << 20)
        except TimeoutError:
            b = None
        except ConnectionResetError:  # the sender aborts its connection when done
            break
        now = time.monotonic()
        if t0 is None and b:
            t0 = now
        if t0 is not None and now - t0 > stop_after or b == b"":
            break
        if t0 is None and now - t_accept > float(sys.argv[3]):
            break
        if not b:
            continue
        n += len(b)
        if now - t0 >= nxt:
            series.append((round(now - t0, 3), n))
            nxt += 0.2
    series.append((round(time.monotonic() - (t0 or 0), 3), n))
    print(json.dumps({"bytes": n, "series": series, "peer": peer[0]}), flush=True)
    sys.exit(0)
src, dst, port, cc, duration, mptcp = (sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5],
                                       float(sys.argv[6]), sys.argv[7] == "1")
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM, IPPROTO_MPTCP if mptcp else 0)
s.setsockopt(socket.IPPROTO_TCP, TCP_CONGESTION, cc.encode())
s.bind((src, 0))
deadline = time.monotonic() + 5
while True:
    try:
        s.connect((dst, port))
        break
    except ConnectionRefusedError:
        if time.monotonic() > deadline:
            raise
        time.sleep(0.05)
used = s.getsockopt(socket.IPPROTO_TCP, TCP_CONGESTION, 16).split(b"\0")[0].decode()
buf = b"\0" * 65536
t0 = time.monotonic()
s.settimeout(0.5)
while time.monotonic() < t0 + duration:
    try:
        s.send(buf)
    except TimeoutError:
        pass
    except (BrokenPipeError, ConnectionResetError):
        break
subflows = []
if mptcp:
    libc = ctypes.CDLL(None, use_errno=True)
    def sfdata(opt, elem):
        raw = ctypes.create_string_buffer(struct.pack("4I", 16, 0, 0, elem) + bytes(elem * 8))
        ln = ctypes.c_int(len(raw))
        if libc.getsockopt(s.fileno(), SOL_MPTCP, opt, raw, ctypes.byref(ln)) != 0:
            raise OSError(ctypes.get_errno(), "getsockopt SOL_MPTCP")
        _, num, ksize, usize = struct.unpack_from("4I", raw.raw)
        return [raw.raw[16 + i * usize: 16 + (i + 1) * usize] for i in range(min(num, 8))]
    infos, addrs = sfdata(MPTCP_TCPINFO, 232), sfdata(MPTCP_SUBFLOW_ADDRS, 256)
    for info, ad in zip(infos, addrs):
        subflows.append({
            "local": socket.inet_ntoa(ad[4:8]), "remote": socket.inet_ntoa(ad[128 + 4:128 + 8]),
            "bytes_acked": struct.unpack_from("Q", info, 120)[0],
            "cwnd": struct.unpack_from("I", info, 8 + 18 * 4)[0],
            "rtt_us": struct.unpack_from("I", info, 8 + 15 * 4)[0]})
# abortive close (RST / MP_FASTCLOSE): no drain of the send buffer, no orphan connection
s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
s.close()
print(json.dumps({"cc": used, "subflows": subflows}), flush=True)
"""


@dataclass(frozen=True)
class Flow:
    """One flow A.src -> B.dst; ``mptcp`` flows get every subflow the path manager opens."""

    src: str
    dst: str
    cc: str
    mptcp: bool
    port: int


@dataclass
class FlowResult:
    flow: Flow
    cc_used: str
    received: int
    series: list[tuple[float, int]]
    subflows: list[dict[str, Any]] = field(default_factory=list)
    ss_cc: set[str] = field(default_factory=set)   # CC names ss showed on its sockets mid-run

    def goodput_mbps(self, start: float = WARMUP_S, end: float | None = None) -> float:
        """Receiver goodput between ``start`` and ``end`` seconds after the first byte."""
        pts = self.series
        if end is None:
            end = pts[-1][0]
        a = min(pts, key=lambda p: abs(p[0] - start))
        b = min(pts, key=lambda p: abs(p[0] - end))
        if b[0] <= a[0]:
            return 0.0
        return (b[1] - a[1]) * 8 / (b[0] - a[0]) / 1e6


Isps = list[tuple[str, float]]


def _spec(name: str, a_isps: Isps, b_isps: Isps) -> TestbedSpec:
    def isps(items: list[tuple[str, float]]) -> list[dict[str, Any]]:
        return [{"name": f"isp{lab}", "label": lab, "down_kbps": kb, "up_kbps": kb}
                for lab, kb in items]
    return parse_spec({
        "name": name,
        "sites": [{"name": "A", "isps": isps(a_isps)}, {"name": "B", "isps": isps(b_isps)}],
        "defaults": {"delay_ms": DELAY_MS},
    })


def shared_spec(name: str) -> TestbedSpec:
    """Two subflows (U-D, T-D) through B's one 4 Mbit/s downlink (shaped in the core)."""
    return _spec(name, [("U", 40000), ("T", 40000)], [("D", 6000)])


def disjoint_spec(name: str, d_kbps: float = 6000, o_kbps: float = 3000) -> TestbedSpec:
    """Two subflows (U-D, U-O) with disjoint bottlenecks: B's two downlinks."""
    return _spec(name, [("U", 40000)], [("D", d_kbps), ("O", o_kbps)])


def balance_spec(name: str) -> TestbedSpec:
    return disjoint_spec(name, 4000, 4000)


@contextlib.contextmanager
def testbed(spec: TestbedSpec) -> Iterator[tbmod.Testbed]:
    """Up, yield, and down even on failure (namespaces and the delay line go)."""
    try:
        yield tbmod.up(spec)
    finally:
        tbmod.down(spec.name)


def _popen(ns: str, args: list[str]) -> subprocess.Popen[str]:
    return subprocess.Popen(  # noqa: S603 - argv list, validated names, no shell
        ["ip", "netns", "exec", ns, sys.executable, "-c", FLOW_SCRIPT, *args],  # noqa: S607
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)


_SS_LINE = re.compile(r"^\S+\s+\S+\s+\S+\s+(\S+):(\d+)\s+(\S+):(\d+)")


def _ss_ccs(ns: str, ports: set[int]) -> dict[int, set[str]]:
    """dport -> CC names (``ss -tin``) of the sender's TCP sockets/subflows to that port."""
    cp = subprocess.run(["ip", "netns", "exec", ns, "ss", "-tinH"],  # noqa: S603,S607
                        capture_output=True, text=True, timeout=10, check=False)
    out: dict[int, set[str]] = {}
    lines = cp.stdout.splitlines()
    for i, line in enumerate(lines):
        m = _SS_LINE.match(line)
        if not m or int(m.group(4)) not in ports:
            continue
        info = lines[i + 1] if i + 1 < len(lines) and not _SS_LINE.match(lines[i + 1]) else line
        for tok in info.split():
            if re.fullmatch(CC_PATTERN, tok) and tok in set(bpf_cc.SUPPORTED) | {
                    "reno", "cubic", "bbr"}:
                out.setdefault(int(m.group(4)), set()).add(tok)
    return out


#: struct_ops map ids this process registered (cc -> id), for ``unload(map_ids=...)``
LOADED: dict[str, int] = {}


def ensure_loaded(ccs: list[str] | set[str]) -> None:
    """Make the BPF controls among ``ccs`` available now. Registrations are host-wide and other
    users may unregister theirs at any time, so this is re-checked right before every run; what
    we register is remembered in ``LOADED``."""
    want = sorted({c for c in ccs if c in bpf_cc.SUPPORTED})
    if want:
        LOADED.update(bpf_cc.load(want))


def run_flows(bed: tbmod.Testbed, flows: list[Flow], duration: float = DURATION_S
              ) -> list[FlowResult]:
    """Run ``flows`` at the same time from site A to site B; every process is reaped. One retry
    when a control vanished between ``ensure_loaded`` and the socket (someone unloaded it)."""
    for f in flows:
        if not re.fullmatch(CC_PATTERN, f.cc):
            raise ValueError(f"congestion control {f.cc!r}: not a valid name")
    for attempt in (0, 1):
        ensure_loaded({f.cc for f in flows})
        try:
            with cc_users.using({f.cc for f in flows}, f"coupling flows on testbed {bed.name}"):
                return _run_flows(bed, flows, duration)
        except CcVanished:
            if attempt:
                raise
    raise AssertionError("unreachable")


class CcVanished(RuntimeError):
    """TCP_CONGESTION failed with ENOENT: the control was unregistered under us."""


def _run_flows(bed: tbmod.Testbed, flows: list[Flow], duration: float) -> list[FlowResult]:
    bed.set_direction("A", "B")
    procs: list[subprocess.Popen[str]] = []
    try:
        sinks = []
        for f in flows:
            p = _popen(bed.ns("B"), ["sink", str(f.port), f"{duration + 15:g}",
                                     f"{duration + 1:g}"])
            procs.append(p)
            sinks.append(p)
        for p in sinks:
            assert p.stdout is not None
            line = p.stdout.readline().strip()
            if line != "ready":
                raise RuntimeError(f"sink did not start: {p.stderr.read() if p.stderr else ''}")
        senders = []
        for f in flows:
            p = _popen(bed.ns("A"), ["send", bed.address("A", f.src), bed.address("B", f.dst),
                                     str(f.port), f.cc, f"{duration:g}", "1" if f.mptcp else "0"])
            procs.append(p)
            senders.append(p)
        seen: dict[int, set[str]] = {}

        def sample_ss() -> None:
            time.sleep(duration / 2)
            seen.update(_ss_ccs(bed.ns("A"), {f.port for f in flows}))

        th = threading.Thread(target=sample_ss, daemon=True)
        th.start()
        results = []
        for f, snd, snk in zip(flows, senders, sinks, strict=True):
            out, err = snd.communicate(timeout=duration + 30)
            if snd.returncode != 0 and "FileNotFoundError" in err:
                raise CcVanished(f"{f.cc}: {err[-300:]}")
            if snd.returncode != 0:
                raise RuntimeError(f"sender {f} failed ({snd.returncode}): {err[-800:]}")
            so, se = snk.communicate(timeout=30)
            if snk.returncode != 0:
                raise RuntimeError(f"sink {f} failed ({snk.returncode}): {se[-800:]}")
            s_out, k_out = json.loads(out), json.loads(so)
            results.append(FlowResult(flow=f, cc_used=s_out["cc"], received=k_out["bytes"],
                                      series=[tuple(x) for x in k_out["series"]],
                                      subflows=s_out["subflows"]))
        th.join(timeout=duration)
        for r in results:
            r.ss_cc = seen.get(r.flow.port, set())
        return results
    finally:
        for p in procs:
            if p.poll() is None:
                kill_pid(p.pid)
            with contextlib.suppress(Exception):
                p.communicate(timeout=5)


# --------------------------------------------------------------------------- the three goals


def do_no_harm(bed: tbmod.Testbed, cc: str, base: str, duration: float = DURATION_S,
               port: int = 5400) -> dict[str, Any]:
    """MPTCP (cc, two subflows through one bottleneck) against one TCP flow of ``base``."""
    mp, tcp = run_flows(bed, [Flow("U", "D", cc, True, port), Flow("U", "D", base, False,
                                                                    port + 1)], duration)
    g_mp, g_tcp = mp.goodput_mbps(end=duration), tcp.goodput_mbps(end=duration)
    return {"cc": cc, "base": base, "mptcp_mbps": round(g_mp, 3), "tcp_mbps": round(g_tcp, 3),
            "ratio": round(g_mp / g_tcp, 3) if g_tcp > 0 else float("inf"),
            "subflows": len(mp.subflows), "cc_used": mp.cc_used, "ss_cc": sorted(mp.ss_cc),
            "tcp_cc_used": tcp.cc_used}


def improve_throughput(bed: tbmod.Testbed, cc: str, base: str, duration: float = DURATION_S,
                       port: int = 5410, tcp_duration: float = 8.0) -> dict[str, Any]:
    """Single-path TCP (base) on each path at once, then the MPTCP connection alone."""
    td, to = run_flows(bed, [Flow("U", "D", base, False, port), Flow("U", "O", base, False,
                                                                      port + 1)], tcp_duration)
    best = max(td.goodput_mbps(end=tcp_duration), to.goodput_mbps(end=tcp_duration))
    (mp,) = run_flows(bed, [Flow("U", "D", cc, True, port + 2)], duration)
    g = mp.goodput_mbps(end=duration)
    return {"cc": cc, "base": base, "mptcp_mbps": round(g, 3), "best_tcp_mbps": round(best, 3),
            "tcp_d_mbps": round(td.goodput_mbps(end=tcp_duration), 3),
            "tcp_o_mbps": round(to.goodput_mbps(end=tcp_duration), 3),
            "ratio": round(g / best, 3) if best > 0 else float("inf"),
            "subflows": len(mp.subflows), "cc_used": mp.cc_used, "ss_cc": sorted(mp.ss_cc)}


def balance(bed: tbmod.Testbed, cc: str, duration: float = DURATION_S, port: int = 5420,
            cross: int = 2) -> dict[str, Any]:
    """MPTCP over D and O while ``cross`` reno TCP flows load O: share of bytes sent over O."""
    flows = [Flow("U", "D", cc, True, port)]
    flows += [Flow("U", "O", "reno", False, port + 1 + i) for i in range(cross)]
    mp, *others = run_flows(bed, flows, duration)
    o_addr = bed.address("B", "O")
    on_t = sum(s["bytes_acked"] for s in mp.subflows if s["remote"] == o_addr)
    total = sum(s["bytes_acked"] for s in mp.subflows)
    return {"cc": cc, "frac_congested": round(on_t / total, 3) if total else float("nan"),
            "mptcp_mbps": round(mp.goodput_mbps(end=duration), 3),
            "cross_mbps": round(sum(o.goodput_mbps(end=duration) for o in others), 3),
            "subflows": len(mp.subflows), "cc_used": mp.cc_used, "ss_cc": sorted(mp.ss_cc)}

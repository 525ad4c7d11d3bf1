"""Field conditions on a running testbed: the namespaces and processes behind ``cross`` and
``schedule`` (``loss_burst`` lives in the delay line), their status, and their teardown.

Competing traffic of an ISP link runs between two hosts outside the sites:

    mpcoa-NAME-xSL (near host, 10.S.100+i.2) ==veth== site S (x-L, forwards) -> isp-L (tbf up)
        -> core sS-L -> delay line -> far -> mpcoa-NAME-far (10.250.0.1)
    and back the same way, so "down" traffic queues in the core's sS-L tbf (the downlink).

So the competing flows share the ISP's bottleneck queue in the direction they send, get the
delay of the link's fastest path each way (they come from as far away as the other site), and
never touch a probe's sockets: the near host forwards through the site namespace, it is not in it.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from probes.base import ProbeError
from probes.netns import ip, ip_batch, kill_pid, pid_alive, pid_cmdline, run, sysctl_set
from probes.testbed.queues import link_queue

# `bed` is a probes.testbed.lifecycle.Testbed and `link` one of its SiteLinks: not imported, since
# the testbed imports this module (imports flow one way)
Testbed = SiteLink = Any

FAR_ADDR = "10.250.0.1"
FAR_GW = "10.250.0.254"
FAR_DEV = "far"
NEAR_DEV = "xh"
CROSS_PORT_BASE = 41000
MODULES = ("probes.testbed.crossgen", "probes.testbed.linksched")


def near_ns(testbed: str, link: SiteLink) -> str:
    return f"mpcoa-{testbed}-x{link.site_index}{link.label}"


def far_ns(testbed: str) -> str:
    return f"mpcoa-{testbed}-far"


def near_addr(link: SiteLink, host: int) -> str:
    return f"10.{link.site_index + 1}.{100 + link.index}.{host}"


def site_dev(link: SiteLink) -> str:
    return f"x-{link.label}"


def cross_links(bed: Testbed) -> list[tuple[SiteLink, list[Any]]]:
    out = []
    for lk in bed.links:
        isp = bed.spec.sites[lk.site_index].isp(lk.label)
        if isp.cross:
            out.append((lk, list(isp.cross)))
    return out


def expected_namespaces(bed: Testbed) -> list[str]:
    links = cross_links(bed)
    if not links:
        return []
    return [far_ns(bed.name)] + [near_ns(bed.name, lk) for lk, _ in links]


def shared_qdiscs(bed: Testbed) -> dict[str, list[str]]:
    """Namespace -> devices whose queue competing traffic keeps busy: a probe cannot wait for
    them to drain (its own leftovers still show as busy sockets in the sites)."""
    out: dict[str, list[str]] = {}
    for lk, _ in cross_links(bed):
        out.setdefault(bed.ns(lk.site), []).append(lk.site_dev)
        out.setdefault(bed.core_ns, []).append(lk.core_dev)
    if out:
        out[bed.core_ns].append("dline")  # every packet, competing ones too, passes it
    return out


def _link_delay_ms(bed: Testbed, lk: SiteLink) -> float:
    mine = [p.delay_ms for p in bed.spec.resolved_paths()
            if (p.a_label if lk.site_index == 0 else p.b_label) == lk.label]
    return min(mine, default=0.0)


def delayline_paths(bed: Testbed) -> list[dict[str, Any]]:
    """The competing flows' paths through the delay line: the link's fastest path's delay."""
    out = []
    for lk, _ in cross_links(bed):
        d = _link_delay_ms(bed, lk)
        out.append({"src": near_addr(lk, 2), "dst": FAR_ADDR, "delay_ms": d})
        out.append({"src": FAR_ADDR, "dst": near_addr(lk, 2), "delay_ms": d})
    return out


def build_network(bed: Testbed) -> None:
    links = cross_links(bed)
    if not links:
        return
    core, far = bed.core_ns, far_ns(bed.name)
    quiet = {"net.ipv4.conf.all.rp_filter": 0, "net.ipv4.conf.default.rp_filter": 0,
             "net.ipv6.conf.all.disable_ipv6": 1, "net.ipv6.conf.default.disable_ipv6": 1}
    run(["ip", "netns", "add", far])
    ip(far, "link", "set", "lo", "up")
    sysctl_set(far, quiet)
    ip(far, "link", "add", "net", "type", "veth", "peer", "name", FAR_DEV, "netns", core)
    ip_batch(far, [["addr", "add", f"{FAR_ADDR}/24", "dev", "net"], ["link", "set", "net", "up"],
                   ["route", "add", "default", "via", FAR_GW]])
    ip_batch(core, [["addr", "add", f"{FAR_GW}/24", "dev", FAR_DEV],
                    ["link", "set", FAR_DEV, "up"],
                    ["rule", "add", "iif", FAR_DEV, "lookup", "100", "pref", "100"]])
    sysctl_set(core, {f"net.ipv4.conf.{FAR_DEV}.rp_filter": 0})
    for lk, _ in links:
        sns, nns = bed.ns(lk.site), near_ns(bed.name, lk)
        run(["ip", "netns", "add", nns])
        ip(nns, "link", "set", "lo", "up")
        sysctl_set(nns, quiet)
        ip(nns, "link", "add", NEAR_DEV, "type", "veth", "peer", "name", site_dev(lk),
           "netns", sns)
        ip_batch(nns, [["addr", "add", f"{near_addr(lk, 2)}/24", "dev", NEAR_DEV],
                       ["link", "set", NEAR_DEV, "up"],
                       ["route", "add", "default", "via", near_addr(lk, 1)]])
        # the site forwards the near host's traffic out of (and back in through) this ISP only
        ip_batch(sns, [["addr", "add", f"{near_addr(lk, 1)}/24", "dev", site_dev(lk)],
                       ["link", "set", site_dev(lk), "up"],
                       ["rule", "add", "iif", site_dev(lk), "lookup", str(100 + lk.index),
                        "pref", "90"]])
        sysctl_set(sns, {"net.ipv4.ip_forward": 1,
                         f"net.ipv4.conf.{site_dev(lk)}.rp_filter": 0})
        ip(core, "route", "add", f"{near_addr(lk, 0)}/24", "via", lk.address4, "dev", lk.core_dev)


def spawn(module: str, cfg: dict[str, Any], ns: str | None, state_dir: Path, tag: str) -> int:
    """Start ``python -m module CONFIG`` (inside ``ns``), wait for its ready file; its pid."""
    cfg_path = state_dir / f"{tag}.json"
    ready = state_dir / f"{tag}.ready"
    ready.unlink(missing_ok=True)
    cfg = {**cfg, "ready_file": str(ready)}
    cfg_path.write_text(json.dumps(cfg, indent=1))
    env = dict(os.environ)
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
    argv = [sys.executable, "-m", module, str(cfg_path)]
    if ns is not None:
        argv = ["ip", "netns", "exec", ns, *argv]
    with open(state_dir / f"{tag}.log", "ab") as log:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log,  # noqa: S603
                                stderr=log, env=env, start_new_session=True)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if ready.exists():
            return proc.pid
        if proc.poll() is not None:
            text = (state_dir / f"{tag}.log").read_text(errors="replace")
            raise ProbeError(f"{tag} exited ({proc.returncode}): {text[-500:]}")
        time.sleep(0.02)
    kill_pid(proc.pid)
    raise ProbeError(f"{tag} did not start within 10 s")


def start_cross(bed: Testbed, available_ccs: list[str]) -> list[dict[str, Any]]:
    """Sink and source of every ``cross`` entry; [{pid, what}] of the processes started."""
    started: list[dict[str, Any]] = []
    k = 0
    for lk, entries in cross_links(bed):
        for entry in entries:
            cc = getattr(entry, "cc", None)
            if cc is not None and cc not in available_ccs:
                raise ProbeError(f"{lk.site}.{lk.label} cross: congestion control {cc!r} is not "
                                 f"available (kernel offers {' '.join(available_ccs)})")
            near, far = near_ns(bed.name, lk), far_ns(bed.name)
            up = entry.direction == "up"
            src_ns, dst_ns = (near, far) if up else (far, near)
            src_addr, dst_addr = ((near_addr(lk, 2), FAR_ADDR) if up
                                  else (FAR_ADDR, near_addr(lk, 2)))
            base = {"kind": entry.kind, "port": CROSS_PORT_BASE + k}
            params = entry.model_dump(mode="json")
            if "mbps" in params:
                params["mbps"] = params["mbps"] * bed.spec.rate_scale
            tag = f"cross{k}"
            for role, ns, extra in (
                ("sink", dst_ns, {"listen": dst_addr}),
                ("source", src_ns, {"bind": src_addr, "connect": dst_addr, "seed": k}),
            ):
                cfg = {**params, **base, **extra, "role": role,
                       "netns_file": f"/run/netns/{ns}",
                       "stats_file": str(bed.state_dir / f"{tag}.{role}.stats.json")}
                pid = spawn("probes.testbed.crossgen", cfg, ns, bed.state_dir, f"{tag}.{role}")
                started.append({"pid": pid, "what": f"{tag} {role}"})
            k += 1
    return started


def start_schedule(bed: Testbed) -> list[dict[str, Any]]:
    links = []
    for lk in bed.links:
        isp = bed.spec.sites[lk.site_index].isp(lk.label)
        if isp.schedule is None:
            continue
        scale = bed.spec.rate_scale
        steps = [[t, up * scale, down * scale] for t, up, down in isp.schedule.steps]

        def limits(col: int, steps=steps, lk=lk) -> list[int]:
            return [link_queue(bed.spec, lk.site_index, lk.label, st[col])["bytes"]
                    for st in steps]

        links.append({"site": lk.site, "isp": lk.label, "period_s": isp.schedule.period_s,
                      "steps": steps,
                      "up": {"ns": bed.ns(lk.site), "dev": lk.site_dev, "limits": limits(1)},
                      "down": {"ns": bed.core_ns, "dev": lk.core_dev, "limits": limits(2)}})
    if not links:
        return []
    cfg = {"start": time.time(), "links": links, "netns_file": f"/run/netns/{bed.core_ns}",
           "state_file": str(bed.state_dir / "schedule.state.json")}
    pid = spawn("probes.testbed.linksched", cfg, None, bed.state_dir, "schedule")
    return [{"pid": pid, "what": "schedule"}]


def ours(pid: int) -> bool:
    cmd = " ".join(pid_cmdline(pid))
    return pid_alive(pid) and any(m in cmd for m in MODULES)


def all_alive(procs: list[dict[str, Any]]) -> bool:
    return all(ours(p["pid"]) for p in procs)


def stop(procs: list[dict[str, Any]]) -> list[str]:
    removed = []
    for p in procs:
        if ours(p["pid"]):
            kill_pid(p["pid"])
            removed.append(f"process {p['pid']} ({p['what']})")
    return removed


def _read(path: Path) -> dict[str, Any]:
    with contextlib.suppress(OSError, ValueError):
        return json.loads(path.read_text())
    return {}


def status(state_dir: Path, spec_data: dict[str, Any], procs: list[dict[str, Any]]
           ) -> dict[str, Any]:
    """What runs: competing traffic (with its last second's rate), schedules (the step in
    force), bursty-loss paths (with the delay line's counters)."""
    alive = {p["what"]: ours(p["pid"]) for p in procs}
    cross, k = [], 0
    for site in spec_data.get("sites", []):
        for isp in site["isps"]:
            for entry in isp.get("cross") or []:
                sink = _read(state_dir / f"cross{k}.sink.stats.json")
                cross.append({"site": site["name"], "isp": isp["label"], **entry,
                              "alive": alive.get(f"cross{k} source", False)
                              and alive.get(f"cross{k} sink", False),
                              "received_mbps": sink.get("mbps"),
                              "received_bytes": sink.get("bytes")})
                k += 1
    sched = _read(state_dir / "schedule.state.json")
    schedules = [{**lk, "alive": alive.get("schedule", False),
                  "period_s": isp["schedule"]["period_s"]}
                 for lk in sched.get("links", [])
                 for site in spec_data.get("sites", []) if site["name"] == lk["site"]
                 for isp in site["isps"] if isp["label"] == lk["isp"] and isp.get("schedule")]
    counters = _read(state_dir / "delayline.stats.json").get("paths", {})
    return {"cross": cross, "schedules": schedules,
            "schedule_errors": sched.get("errors", []), "loss_counters": counters}

"""What an operator gets, beside what users keep: the accuracy benchmark's applied answer and its
Linux-default baseline (`benchmarks/accuracy.py`).

**Linux's default** is a host nobody tuned: FullMesh on the in-kernel path manager (the
testbed's own endpoints: every sender address ``subflow fullmesh``, the receiver's others
``signal``), the kernel's own default congestion control (``net.ipv4.tcp_congestion_control``
as the testbed namespace has it, which a namespace inherits from the host: bbr on this host)
and stock ``tcp_rmem`` / ``tcp_wmem`` (the host's root-namespace values, or Debian's defaults)
in place of the testbed's 64 MiB ceilings, the latter only in the testbed's namespaces and
only for the probe. The probe is a plain MPTCP application that sets no socket buffer
(`probes.site.mptcpapp`).

**The applied answer** is the product's own apply (`mpcoa apply ID`, the CLI on the campaign's
database, onto the testbed's namespaces, which hold the stock values first, as an operator's
hosts would), then fresh probes of that same plain application on the hosts as the plan left
them, then `mpcoa apply ID --rollback`; the sites must read as before the apply
(`applied_rollback_ok`, with what differs). `applied_ratio` is their mean over the oracle
best's fresh mean; `applied_inside` the share of them inside the interval the answer states for
the regime the apply serves (`autotune_interval_mbps` when it has one, else the locked-buffer
interval: `applied_interval_regime` says which).
"""

from __future__ import annotations

import contextlib
import json
import os
import statistics
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.oracle import capped, stated_interval, timed

RMEM, WMEM = "net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem"
#: Debian's (and the kernel's) defaults for a host with enough memory
DEBIAN_BUFFERS = {RMEM: "4096 131072 6291456", WMEM: "4096 16384 4194304"}
BUFFER_SOURCES = ("host", "debian")
CC_KEY = "net.ipv4.tcp_congestion_control"
APP_WARMUP_S = 3.0  # the apply's own confirmation's warm-up (`apply_confirm.CONFIRM_WARMUP_S`)


def parse_triple(key: str, text: str | None) -> str:
    """A tcp_rmem / tcp_wmem value as three integers min <= default <= max, each at least 1,
    normalised to single spaces (sysctl prints tabs); ValueError saying what is wrong."""
    parts = (text or "").split()
    try:
        lo, default, hi = (int(p) for p in parts)
    except ValueError:
        raise ValueError(f"{key}: {text!r} is not three integers (min default max)") from None
    if not 1 <= lo <= default <= hi:
        raise ValueError(f"{key}: {text!r} is not min <= default <= max, all positive")
    return f"{lo} {default} {hi}"


def stock_buffers(source: str, read: Callable[[str], str | None]) -> dict[str, Any]:
    """The stock tcp_rmem / tcp_wmem the baseline and the applied answer run under, and where
    they came from. `source` "host": `read(key)` (the root namespace's value), Debian's for a
    key the host has no valid value for (said in `fallback`); "debian": Debian's."""
    if source not in BUFFER_SOURCES:
        raise ValueError(f"baseline buffers: {source!r} is not one of {', '.join(BUFFER_SOURCES)}")
    values, fallback = dict(DEBIAN_BUFFERS), []
    if source == "host":
        for key in (RMEM, WMEM):
            try:
                values[key] = parse_triple(key, read(key))
            except ValueError as exc:
                fallback.append(f"{exc}: Debian's {DEBIAN_BUFFERS[key]}")
    return {"source": source, "values": values, "fallback": fallback}


def default_cc(namespace_value: str | None, host_value: str | None) -> str:
    """The kernel's own default CC: the namespace's (inherited from the host when it was
    made), else the host's; ValueError when neither names one."""
    for value in (namespace_value, host_value):
        if value and value.strip() and value.strip().isidentifier():
            return value.strip()
    raise ValueError(f"{CC_KEY}: no default congestion control read "
                     f"(namespace {namespace_value!r}, host {host_value!r})")


def regime_interval(outputs: dict[str, Any]) -> tuple[str | None, list[float] | None]:
    """The interval the answer states for an application that sets no buffer under the applied
    ceiling, and its regime: ("autotune", `autotune_interval_mbps`) when the answer measured
    that regime, else ("locked_buffer", the OTP interval of the locked-buffer probes), else
    (None, None)."""
    auto = outputs.get("autotune_interval_mbps")
    if (isinstance(auto, list | tuple) and len(auto) == 2
            and all(isinstance(v, int | float) and not isinstance(v, bool) for v in auto)
            and auto[0] <= auto[1]):
        return "autotune", [float(auto[0]), float(auto[1])]
    locked = stated_interval(outputs)
    return ("locked_buffer", locked) if locked is not None else (None, None)


def inside_fraction(values: list[float], interval: list[float] | None) -> float | None:
    """The share of `values` inside [low, high]; None without an interval or values."""
    if interval is None or not values:
        return None
    lo, hi = interval
    return round(sum(lo <= v <= hi for v in values) / len(values), 3)


def applied_ratio(applied_runs: list[float], fresh_best_runs: list[float]) -> float | None:
    """The applied answer's fresh mean over the oracle best's fresh mean (None when either is
    missing or the best read nothing)."""
    if not applied_runs or not fresh_best_runs:
        return None
    best = statistics.fmean(fresh_best_runs)
    return round(statistics.fmean(applied_runs) / best, 4) if best > 0 else None


def over(mbps: float | None, baseline_mbps: float | None) -> float | None:
    """`mbps` as a multiple of the baseline (None when either is missing or it read nothing)."""
    if mbps is None or not baseline_mbps or baseline_mbps <= 0:
        return None
    return round(mbps / baseline_mbps, 3)


def state_differences(before: dict[str, dict], after: dict[str, dict]) -> list[str]:
    """What differs between two reads of the sites (`probes.site.config.read_state`): their
    endpoints, limits and sysctls; the available CCs are the host's list and left out."""
    out = []
    for site, was in before.items():
        now = after.get(site) or {}
        for part in ("endpoints", "limits", "sysctls"):
            a, b = was.get(part), now.get(part)
            if part == "sysctls" and isinstance(a, dict) and isinstance(b, dict):
                out += [f"{site} {k}: {a.get(k)!r} -> {b.get(k)!r}"
                        for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]
            elif a != b:
                out.append(f"{site} {part}: {json.dumps(a)} -> {json.dumps(b)}")
    return out


# ---- on the testbed --------------------------------------------------------------------------
def _sites_state(bed, sites) -> dict[str, dict]:
    from probes.site import config as sc

    return {s: sc.read_state(bed.ns(s)) for s in sites}


def app_probe(bed, sender, receiver, source, destination, subflows, duration) -> dict:
    """One plain MPTCP application transfer (no buffer set, no CC chosen, the namespaces' own
    endpoints), timed as the campaign times an autotuned probe of those subflows, read as the
    campaign reads a probe (`capped`)."""
    from probes.site import mptcpapp
    from probes.tools.ports import choose_port_triple

    getattr(bed, "pause", lambda: None)()  # a random phase of the field conditions, if any
    length, warmup = timed(bed.spec, sender, receiver, subflows, 0.0, duration)
    warmup = warmup if warmup is not None else min(APP_WARMUP_S, length / 3)
    ns = [bed.ns(sender), bed.ns(receiver)]
    for attempt in range(3):  # as the probes: one that could not run is run again
        try:
            got = mptcpapp.confirm(sender_ns=ns[0], receiver_ns=ns[1], source=source,
                                   destination=destination, port=choose_port_triple(ns),
                                   seconds=length, warmup_s=warmup)
            break
        except (RuntimeError, OSError, subprocess.TimeoutExpired, ValueError):
            if attempt == 2:
                raise
    names = bed.spec.subflow_names(sender, receiver)
    got["mbps"] = capped(bed.spec, sender, receiver, names, got["goodput_mbps"])
    return got


def linux_default(bed, sender: str, receiver: str, stock: dict[str, Any], runs: int,
                  duration: float, log) -> dict[str, Any]:
    """The baseline: `runs` plain application transfers on the in-kernel FullMesh path manager,
    the kernel's default CC, under the stock buffers (then the testbed's own, checked)."""
    from probes.netns import sysctl_get

    sites = (sender, receiver)
    cc = default_cc(sysctl_get(bed.ns(sender), CC_KEY), sysctl_get(None, CC_KEY))
    names = bed.spec.subflow_names(sender, receiver)
    source = bed.site_links(sender)[0].address
    destination = bed.site_links(receiver)[0].address
    before = _sites_state(bed, sites)
    got, seen_ccs, fallbacks = [], set(), 0
    with bed.lock():
        bed.set_direction(sender, receiver)  # the in-kernel endpoints of this direction
        with bed.tcp_memory(sites, stock["values"]):
            for _ in range(runs):
                r = app_probe(bed, sender, receiver, source, destination, names, duration)
                got.append(r["mbps"])
                seen_ccs.add(r.get("cc"))
                fallbacks += bool(r.get("fallback"))
    differs = state_differences(before, _sites_state(bed, sites))
    log(f"  Linux default (in-kernel FullMesh, {cc}, {stock['source']} buffers "
        f"{stock['values'][RMEM]} / {stock['values'][WMEM]}): "
        f"{statistics.fmean(got):.2f} Mbit/s")
    return {"mbps": round(statistics.fmean(got), 3), "runs": [round(v, 3) for v in got],
            "pm": "FullMesh (in-kernel)", "cc": cc, "ccs_used": sorted(c for c in seen_ccs if c),
            "fallbacks": fallbacks, "buffers": stock, "restored": not differs,
            "not_restored": differs}


def _mpcoa(env: dict[str, str], *args: str, timeout: float = 600) -> dict[str, Any]:
    """`mpcoa ARGS --json`, its JSON output (the error in `error` when it has none)."""
    cp = subprocess.run([str(Path(sys.executable).parent / "mpcoa"), *args, "--json"], env=env,
                        capture_output=True, text=True, timeout=timeout, check=False)
    try:
        out = json.loads(cp.stdout)
    except ValueError:
        return {"error": (cp.stderr or cp.stdout).strip()[-400:], "returncode": cp.returncode}
    return out if isinstance(out, dict) else {"output": out, "returncode": cp.returncode}


def _plan_of(apply_id: int) -> dict[str, Any]:
    from service.db import session_scope
    from service.store import applied

    with session_scope() as s:
        return applied.get_apply(s, apply_id=apply_id).plan


ALLOWED_CCS = Path("/proc/sys/net/ipv4/tcp_allowed_congestion_control")


@contextlib.contextmanager
def host_allows(cc: str | None, out: dict[str, Any], log):
    """The operator's step the apply asks for when the answer's CC is not in the host's
    `tcp_allowed_congestion_control` (a namespace may default only to one of those): added for
    the apply's duration, the list as it was afterwards (`applied_host_changes` says so)."""
    before = ALLOWED_CCS.read_text().split()
    if not cc or cc in before:
        yield
        return
    ALLOWED_CCS.write_text(" ".join([*before, cc]))
    out["applied_host_changes"] = [{"key": "net.ipv4.tcp_allowed_congestion_control",
                                    "before": " ".join(before),
                                    "during": " ".join([*before, cc])}]
    log(f"  applied: {cc} added to the host's allowed congestion controls for the apply")
    try:
        yield
    finally:
        ALLOWED_CCS.write_text(" ".join(before))
        out["applied_host_changes"][0]["restored"] = ALLOWED_CCS.read_text().split() == before


def applied_answer(bed, sender: str, receiver: str, rec: dict[str, Any], stock: dict[str, Any],
                   runs: int, duration: float, scratch: Path, log, *,
                   lower_ceilings: bool = False, allow_cc: bool = False) -> dict[str, Any]:
    """The answer applied by `mpcoa apply` onto the testbed's namespaces (under the stock
    buffers, as an operator's hosts have them), `runs` fresh plain-application probes on the
    hosts as it left them, rolled back; the figures and whether every value came back."""
    sites = (sender, receiver)
    env = {**os.environ, "MPCOA_TESTBED": bed.name,
           "MPCOA_APPLY_STATE": str(scratch / "apply")}
    tid = str(rec["topology_id"])
    out: dict[str, Any] = {"applied_runs": [], "applied_state": None}
    found = _sites_state(bed, sites)
    cc = rec.get("cc") if allow_cc else None
    with host_allows(cc, out, log), bed.tcp_memory(sites, stock["values"]):
        before = _sites_state(bed, sites)
        flags = ["--no-confirm", "--no-watch", *(["--lower-ceilings"] if lower_ceilings else [])]
        done = _mpcoa(env, "apply", tid, *flags)
        out["applied_state"] = done.get("state")
        try:
            if done.get("state") == "applied":
                _probe_applied(bed, sender, receiver, rec, int(done["apply"]), runs, duration,
                               out)
            else:
                out["applied_error"] = done.get("error") or json.dumps(done)[-400:]
                log(f"  applied: not applied ({out['applied_error']})")
        finally:
            # a failed apply may have left one site applied: the rollback undoes that too
            back = _mpcoa(env, "apply", tid, "--rollback") if done.get("apply") else {}
            out["rollback_state"] = back.get("state")
            differs = state_differences(before, _sites_state(bed, sites))
    differs += [f"after the stock buffers and the host's list: {d}"
                for d in state_differences(found, _sites_state(bed, sites))]
    out["applied_rollback_ok"] = not differs
    out["applied_not_restored"] = differs
    if out["applied_runs"]:
        log(f"  applied {out['applied_settings']}: fresh {out['applied_runs']} Mbit/s; "
            + ("rollback restored every value" if not differs
               else "rollback DIFFERS: " + "; ".join(differs)))
    return out


def _probe_applied(bed, sender, receiver, rec, apply_id, runs, duration, out) -> None:
    """The fresh plain-application probes of an applied plan, into `out`."""
    plan = _plan_of(apply_id)
    out["applied_settings"] = {
        s["site"]: {k: s["target"]["sysctls"].get(k) for k in (CC_KEY, RMEM, WMEM)}
        for s in plan["sites"]}
    out["applied_ceiling_mib"] = (plan.get("answer") or {}).get("autotune_max_mib")
    subflows = rec.get("subflows") or bed.spec.subflow_names(sender, receiver)
    ccs, fallbacks = [], 0
    for _ in range(runs):
        r = app_probe(bed, sender, receiver, plan["connect"]["source"],
                      plan["connect"]["destination"], subflows, duration)
        out["applied_runs"].append(round(r["mbps"], 3))
        ccs.append(r.get("cc"))
        fallbacks += bool(r.get("fallback"))
    out["applied_ccs"], out["applied_fallbacks"] = sorted(set(filter(None, ccs))), fallbacks


def applied_figures(applied: dict[str, Any], fresh_best: list[float],
                    outputs: dict[str, Any]) -> dict[str, Any]:
    """`applied_ratio` and `applied_inside` (with the interval and its regime) of an applied
    answer's fresh probes, beside the oracle best's fresh runs."""
    regime, interval = regime_interval(outputs)
    runs = applied.get("applied_runs") or []
    return {"applied_ratio": applied_ratio(runs, fresh_best),
            "applied_inside": inside_fraction(runs, interval),
            "applied_interval_mbps": interval, "applied_interval_regime": regime,
            "applied_measured_mbps": round(statistics.fmean(runs), 3) if runs else None}

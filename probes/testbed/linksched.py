"""Capacity schedules of the emulated testbed's links: one process changes the links' tbf rates
at the scheduled times while the testbed is up.

    python -m probes.testbed.linksched CONFIG.json

CONFIG: ``{"start": <time.time() of step 0>, "netns_file": ..., "state_file": ...,
"links": [{"site", "isp", "period_s", "steps": [[t_s, up, down], ...],
"up": {"ns", "dev", "limits": [bytes per step]}, "down": {...}}]}`` with rates already scaled.
``tc qdisc change`` keeps the tbf's queue (checked on this kernel: the backlog survives a rate
and limit change), so a step changes the rate without dropping what is queued.

It runs in the host's namespace (``tc -n``), writes ``state_file`` at every step (which step each
link is in, since when) and exits on SIGTERM/SIGINT or when the core namespace disappears.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time


def burst_bytes(rate_kbps: float) -> int:
    """As the testbed's own tbf: 2 ms at the rate, at least two full frames."""
    return max(2 * 1514, int(rate_kbps * 1000 / 8 * 0.002))


def step_index(steps: list[list[float]], period_s: float, elapsed_s: float) -> int:
    phase = elapsed_s % period_s
    idx = 0
    for i, st in enumerate(steps):
        if st[0] <= phase:
            idx = i
    return idx


def next_change(steps: list[list[float]], period_s: float, elapsed_s: float) -> float:
    """Seconds from ``elapsed_s`` to the next step boundary."""
    phase = elapsed_s % period_s
    later = [st[0] for st in steps if st[0] > phase]
    return (later[0] if later else period_s) - phase


def tc_argv(ns: str, dev: str, rate_kbps: float, limit: int) -> list[str]:
    return ["tc", "-n", ns, "qdisc", "change", "dev", dev, "root", "tbf",
            "rate", f"{max(1, round(rate_kbps))}kbit", "burst", str(burst_bytes(rate_kbps)),
            "limit", str(limit)]


def apply(link: dict, idx: int) -> list[str]:
    """Set both directions of ``link`` to step ``idx``; returns the errors."""
    errors = []
    _t, up, down = link["steps"][idx]
    for key, rate in (("up", up), ("down", down)):
        side = link[key]
        cp = subprocess.run(tc_argv(side["ns"], side["dev"], rate, side["limits"][idx]),  # noqa: S603
                            capture_output=True, text=True, check=False, timeout=10)
        if cp.returncode != 0:
            errors.append(f"{link['site']}.{link['isp']} {key}: {cp.stderr.strip()}")
    return errors


def run(config: dict) -> int:
    stop = False

    def _stop(_sig, _frm):
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    start = config["start"]
    links = config["links"]
    current = [-1] * len(links)
    since = [0.0] * len(links)
    errors: list[str] = []
    while not stop:
        if config.get("netns_file") and not os.path.exists(config["netns_file"]):
            break
        elapsed = time.time() - start
        changed = False
        for i, link in enumerate(links):
            idx = step_index(link["steps"], link["period_s"], elapsed)
            if idx != current[i]:
                errors = (errors + apply(link, idx))[-20:]
                current[i], since[i], changed = idx, time.time(), True
        if changed and config.get("state_file"):
            state = {"pid": os.getpid(), "errors": errors, "links": [
                {"site": lk["site"], "isp": lk["isp"], "step": current[i], "since": since[i],
                 "up_kbps": lk["steps"][current[i]][1], "down_kbps": lk["steps"][current[i]][2]}
                for i, lk in enumerate(links)]}
            tmp = config["state_file"] + ".tmp"
            with open(tmp, "w", encoding="ascii") as f:
                json.dump(state, f)
            os.replace(tmp, config["state_file"])
        if changed and config.get("ready_file") and not os.path.exists(config["ready_file"]):
            with open(config["ready_file"], "w", encoding="ascii") as f:
                f.write(str(os.getpid()))  # the first steps are in force
        elapsed = time.time() - start
        wait = min(next_change(lk["steps"], lk["period_s"], elapsed) for lk in links)
        time.sleep(min(max(wait, 0.001), 0.5))
    return 0


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m probes.testbed.linksched CONFIG.json", file=sys.stderr)
        return 2
    with open(argv[0], encoding="utf-8") as f:
        return run(json.load(f))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

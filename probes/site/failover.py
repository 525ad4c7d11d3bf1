"""The failover watcher of a site with an applied answer: when the link under a selected
(non-backup) endpoint fails, the next standby endpoint whose link is up is promoted (its backup
flag cleared); when the link is back and has stayed up for `hold_s` (hysteresis), the standby
goes back to backup. The failed endpoint itself is left alone: its subflows stall while the
link is down and carry on when it returns. Every change is an event.

`Policy` decides (pure, clocked by its caller); `watch` polls link state (`ip -j link show`:
operational state UP, or a carrier loss such as an ISP's modem going away) and applies the
decisions by replacing the endpoint with the new flag (`siteconfig.readd_endpoint`: new
subflows on every live connection).
``python -m probes.site.failover --ns NS --config FILE --events FILE`` runs it in its own process;
its first line is ``watching`` (what it watches), then one line per decision. With
``--parent-pid`` it is a site worker's child and never outlives it: the kernel sends it
SIGTERM when its parent dies (PR_SET_PDEATHSIG, even on SIGKILL), and it also stops when its
parent pid changes (the window before the prctl). SIGTERM and SIGINT stop it between polls.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from probes.netns import ip
from probes.site import config as sc

HOLD_S = 10.0
INTERVAL_S = 0.2


@dataclass
class Policy:
    """`used`: the endpoint ids selected by the answer (non-backup); `standbys`: backup ids in
    failover order; `hold_s`: how long a returned link must stay up before it is used again."""

    used: list[int]
    standbys: list[int]
    hold_s: float = HOLD_S
    failed: dict[int, int | None] = field(default_factory=dict)  # failed id -> its stand-in
    up_since: dict[int, float] = field(default_factory=dict)

    def step(self, now: float, up: dict[int, bool]) -> list[dict[str, Any]]:
        """Decisions for this tick: [{"kind": failover|restored, "endpoint", "promoted" ...}];
        each carries the backup flags to set (`set`: id -> backup)."""
        out: list[dict[str, Any]] = []
        for eid in self.used:
            if not up.get(eid, True):
                self.up_since.pop(eid, None)
                if eid not in self.failed:
                    busy = set(self.failed.values())
                    spare = next((s for s in self.standbys
                                  if up.get(s, True) and s not in busy), None)
                    self.failed[eid] = spare
                    sets = {} if spare is None else {spare: False}
                    out.append({"kind": "failover", "endpoint": eid, "promoted": spare,
                                "set": sets})
            elif eid in self.failed:
                since = self.up_since.setdefault(eid, now)
                if now - since >= self.hold_s:
                    spare = self.failed.pop(eid)
                    sets = {} if spare is None else {spare: True}
                    out.append({"kind": "restored", "endpoint": eid, "demoted": spare,
                                "set": sets})
        # a stand-in whose own link fails is replaced by the next one
        for eid, spare in list(self.failed.items()):
            if spare is not None and not up.get(spare, True):
                busy = set(self.failed.values())
                nxt = next((s for s in self.standbys if up.get(s, True) and s not in busy),
                           None)
                self.failed[eid] = nxt
                sets = {spare: True, **({nxt: False} if nxt is not None else {})}
                out.append({"kind": "failover", "endpoint": spare, "promoted": nxt,
                            "set": sets})
        return out


def link_up(ns: str | None) -> dict[str, bool]:
    """Interface -> operationally up (a carrier loss reads as down)."""
    cp = ip(ns, "-j", "link", "show", check=False)
    return {link["ifname"]: link.get("operstate") in ("UP", "UNKNOWN")
            for link in json.loads(cp.stdout or "[]")}


def endpoint_devices(ns: str | None) -> dict[int, dict[str, Any]]:
    """Endpoint id -> the endpoint, with its device (its own, else its address's)."""
    from probes.site.local import host_addresses

    addrs = host_addresses(ns)
    out = {}
    for ep in sc.read_endpoints(ns):
        dev = ep.get("dev") or next((d for d, a in addrs.items() if ep["address"] in a), None)
        out[ep["id"]] = {**ep, **({"dev": dev} if dev else {})}
    return out


def watch(ns: str | None, policy: Policy, events: Path, *, interval: float = INTERVAL_S,
          stop=lambda: False) -> None:
    eps = endpoint_devices(ns)
    with open(events, "a") as log:
        while not stop():
            links = link_up(ns)
            up = {eid: links.get(e.get("dev"), True) for eid, e in eps.items()}
            for decision in policy.step(time.monotonic(), up):
                for eid, backup in decision["set"].items():
                    sc.readd_endpoint(ns, eps[eid], backup)
                log.write(json.dumps({"at": time.time(), **decision,
                                      "set": {str(k): v for k, v in decision["set"].items()}})
                          + "\n")
                log.flush()
            time.sleep(interval)


PR_SET_PDEATHSIG = 1


def die_with_parent(parent_pid: int) -> bool:
    """Ask the kernel for SIGTERM when the parent dies; False when it already has (this
    process was re-parented before the request took effect)."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG)")
    return os.getppid() == parent_pid


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m probes.site.failover")
    p.add_argument("--ns", default=None)
    p.add_argument("--config", required=True, help='JSON: {"used": [ids], "standbys": [ids], '
                   '"hold_s": s}')
    p.add_argument("--events", required=True)
    p.add_argument("--parent-pid", type=int, default=None,
                   help="stop when this process (the site worker) is gone")
    a = p.parse_args(argv)
    cfg = json.loads(Path(a.config).read_text())
    ids = [*cfg["used"], *cfg["standbys"]]
    if not all(isinstance(i, int) and 1 <= i <= 255 for i in ids):
        p.error("endpoint ids: integers 1..255")
    hold_s = float(cfg.get("hold_s", HOLD_S))
    if not 0 <= hold_s <= 3600:
        p.error("hold_s: 0..3600 seconds")
    stopping: list[int] = []
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda signum, _frame: stopping.append(signum))
    if a.parent_pid is not None and not die_with_parent(a.parent_pid):
        return 0
    orphaned = (lambda: False) if a.parent_pid is None else \
        (lambda: os.getppid() != a.parent_pid)
    with open(a.events, "a") as log:
        log.write(json.dumps({"at": time.time(), "kind": "watching", "used": cfg["used"],
                              "standbys": cfg["standbys"], "hold_s": hold_s,
                              "pid": os.getpid()}) + "\n")
    watch(a.ns, Policy(cfg["used"], cfg["standbys"], hold_s), Path(a.events),
          stop=lambda: bool(stopping) or orphaned())
    reason = (f"signal {signal.Signals(stopping[0]).name}" if stopping
              else "its parent (the site worker) is gone")
    with open(a.events, "a") as log:
        log.write(json.dumps({"at": time.time(), "kind": "stopping", "reason": reason}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The failover watcher of a site with an applied answer: when the link under a selected
(non-backup) endpoint fails, the next standby endpoint whose link is up is promoted (its backup
flag cleared); when the link is back and has stayed up for `hold_s` (hysteresis), the standby
goes back to backup. The failed endpoint itself is left alone: its subflows stall while the
link is down and carry on when it returns. Every change is an event.

`Policy` decides (pure, clocked by its caller); `watch` polls link state (`ip -j link show`:
operational state UP, or a carrier loss such as an ISP's modem going away) and applies the
decisions by replacing the endpoint with the new flag (`siteconfig.readd_endpoint`: new
subflows on every live connection).
``python -m probes.failover --ns NS --config FILE --events FILE`` runs it in its own process.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from probes import siteconfig as sc
from probes.netns import ip

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
    from probes.localsite import host_addresses

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


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m probes.failover")
    p.add_argument("--ns", default=None)
    p.add_argument("--config", required=True, help='JSON: {"used": [ids], "standbys": [ids], '
                   '"hold_s": s}')
    p.add_argument("--events", required=True)
    a = p.parse_args(argv)
    cfg = json.loads(Path(a.config).read_text())
    ids = [*cfg["used"], *cfg["standbys"]]
    if not all(isinstance(i, int) and 1 <= i <= 255 for i in ids):
        p.error("endpoint ids: integers 1..255")
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(1))
    Path(a.events).touch()
    watch(a.ns, Policy(cfg["used"], cfg["standbys"], float(cfg.get("hold_s", HOLD_S))),
          Path(a.events), stop=lambda: bool(stopping))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The failover watcher of an applied answer, one per site, started by the site's own worker.

Once an apply is ``applied`` each site's worker (`mpcoa.apply_site` with action ``watch`` on
the site's queue; on the embedded default the API process, or ``mpcoa apply --watch`` in the
foreground) starts `probes.site.failover` for its site as a child process, with the plan's used and
standby endpoints and ``hold_s``. A thread of the worker starts it, relays its lines into the
apply's ``events`` (`store.applied.append_event`, under the row's lock) and reaps it; the
child dies with that thread's process (PR_SET_PDEATHSIG: the "parent" the kernel watches is the
thread that forked, so it must be this long-lived one, never a short task thread).

A ``failover`` also queues a recalibration of the topology
(`path_change.queue_after_path_change`): its new answer is applied where the apply asked for it
(``auto_reapply``).

Events: ``watching``, ``failover``, ``restored`` (the watcher's own lines), ``watch_stopped``
with its reason (written by whoever stopped it), ``watch_failed`` (it exited on its own, with
its status and the end of its stderr), ``not_watching`` (nothing to watch, or nobody to do it).

Any process stops it (a new apply, a rollback) through the site's pidfile, which names the
watcher by pid and start time (`probes.pidfile`); the worker's SIGINT/SIGTERM stop every
watcher it started (`stop_all`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from probes import pidfile
from probes.base import ProbeError
from probes.site import apply as siteapply

from ...db import session_scope
from ...settings import get_settings
from ...store import applied
from .path_change import queue_after_path_change

log = logging.getLogger(__name__)

HOLD_S = 10.0
HOLD_S_RANGE = (0.5, 600.0)  # the API's and the CLI's bounds for hold_s
RELAYED = ("watching", "failover", "restored")
ROOT_DIR = Path(__file__).resolve().parents[2]


def pidfile_path(ns: str | None) -> Path:
    return siteapply.state_dir(ns) / "watcher.json"


def watch_config(plan: dict[str, Any], site: str) -> dict[str, Any]:
    """The site's watcher config from the stored plan: its non-backup endpoints (the answer's
    selection), its standbys in failover order, the hold time."""
    entry = next((s for s in plan["sites"] if s["site"] == site), None)
    if entry is None:
        raise ProbeError(f"site {site!r} is not in this apply's plan")
    used = [e["id"] for e in entry.get("endpoints", []) if "backup" not in e["flags"]
            and ("subflow" in e["flags"] or "signal" in e["flags"])]
    return {"used": used, "standbys": list(entry.get("standby_endpoints") or []),
            "hold_s": float((plan.get("watch") or {}).get("hold_s", HOLD_S))}


def wanted(plan: dict[str, Any]) -> bool:
    return bool((plan.get("watch") or {}).get("wanted", True))


def _event(apply_id: int, kind: str, site: str, detail: dict[str, Any]) -> None:
    with session_scope() as s:
        applied.append_event(s, apply_id=apply_id, kind=kind, site=site, detail=detail)


def _recalibrate(apply_id: int, what: dict[str, Any]) -> None:
    """A used path died: its topology is recalibrated now (`queue_after_path_change`), the
    campaign dispatched once committed; a failure is logged, the watcher carries on."""
    try:
        with session_scope() as s:
            topology_id = applied.get_apply(s, apply_id=apply_id).topology_id
            queue_after_path_change(s, topology_id=topology_id, what=what,
                                    settings=get_settings())
    except Exception:
        log.exception("apply %s: the recalibration after a failover could not start", apply_id)


def not_watching(apply_id: int, site: str, reason: str) -> None:
    _event(apply_id, "not_watching", site, {"reason": reason})


@dataclass
class Watcher:
    """A watcher this process started (its relay thread owns the child)."""

    apply_id: int
    site: str
    ns: str | None
    config: dict[str, Any]
    started: threading.Event = field(default_factory=threading.Event)
    proc: subprocess.Popen | None = None
    thread: threading.Thread | None = None
    ended: str | None = None  # the watcher's own word on why it stopped

    @property
    def directory(self) -> Path:
        return siteapply.state_dir(self.ns)

    def run(self) -> None:
        """The relay thread: start the child, copy its lines into the apply's events until it
        exits, then say how it ended unless a stopper already did."""
        events = self.directory / "watcher-events.jsonl"
        config = self.directory / "watcher-config.json"
        self.directory.mkdir(parents=True, exist_ok=True)
        config.write_text(json.dumps(self.config))
        events.write_text("")
        args = [sys.executable, "-m", "probes.site.failover", "--config", str(config),
                "--events", str(events), "--parent-pid", str(os.getpid()),
                *(["--ns", self.ns] if self.ns else [])]
        stderr = self.directory / "watcher-stderr.log"
        try:
            with open(stderr, "w") as err:
                # a session of its own: a terminal's Ctrl-C or a signal to the worker's process
                # group is the worker's to handle (it stops its watchers and says why)
                self.proc = subprocess.Popen(  # noqa: S603 -- our own module, an argument list
                    args, stdout=subprocess.DEVNULL, stderr=err, cwd=ROOT_DIR,
                    env={**os.environ, "PYTHONPATH": str(ROOT_DIR)}, start_new_session=True)
        except OSError as exc:  # no interpreter, no room for its files: said, not hidden
            _running.pop(self.key, None)
            _event(self.apply_id, "watch_failed", self.site, {"error": str(exc)})
            self.started.set()
            return
        record = pidfile.write(pidfile_path(self.ns), self.proc.pid, apply_id=self.apply_id,
                               site=self.site, worker_pid=os.getpid())
        self.started.set()
        with open(events, "rb") as lines:
            while True:
                exited = self.proc.poll() is not None
                self._relay(lines)
                if exited:
                    break
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.proc.wait(timeout=0.1)  # the poll's pace, ended early by an exit
        _running.pop(self.key, None)
        if pidfile.read(pidfile_path(self.ns)) != record:
            return  # stopped on purpose: the stopper wrote `watch_stopped` with its reason
        pidfile_path(self.ns).unlink(missing_ok=True)
        rc = self.proc.returncode
        if rc == 0:
            _event(self.apply_id, "watch_stopped", self.site,
                   {"reason": self.ended or "the watcher exited"})
        else:
            _event(self.apply_id, "watch_failed", self.site,
                   {"returncode": rc, "stderr": stderr.read_text()[-800:]})

    def _relay(self, lines) -> None:
        while True:
            start = lines.tell()
            line = lines.readline()
            if not line.endswith(b"\n"):  # nothing more, or a line still being written:
                lines.seek(start)  # it is read whole on the next pass
                return
            try:
                item = json.loads(line)
            except ValueError:
                continue
            kind = item.pop("kind", None)
            if kind == "stopping":  # signalled by someone else than a stopper of ours
                self.ended = item.get("reason")
            if kind in RELAYED:
                item["seen_at"] = item.pop("at", None)  # the watcher's own clock, epoch s
                _event(self.apply_id, kind, self.site, item)
            if kind == "failover":
                _recalibrate(self.apply_id, {**item, "site": self.site})

    @property
    def key(self) -> str:
        return self.ns or "host"


_running: dict[str, Watcher] = {}


def start(apply_id: int, site: str, *, namespace: str | None = "plan",
          this_site_only: bool = False) -> Watcher | None:
    """Start the site's watcher in this process (`namespace` as for
    `flows.applying.apply.apply_site`: "plan" = the plan's namespace, None = this host). Any watcher
    of the site is stopped first. None, with a `not_watching` event, when there is nothing to watch.
    The apply must be `applied`; `this_site_only` (an operator's `mpcoa apply --site NAME --watch`):
    this site's side applied is enough, the other host may not have had its turn yet."""
    with session_scope() as s:
        row = applied.get_apply(s, apply_id=apply_id)
        plan, state = row.plan, row.state
        if this_site_only:
            state = (row.sites.get(site) or {}).get("state", "not applied")
    entry = next((e for e in plan["sites"] if e["site"] == site), None)
    if entry is None:
        raise ProbeError(f"site {site!r} is not in this apply's plan")
    ns = entry.get("namespace") if namespace == "plan" else namespace
    if ns is None and namespace == "plan":
        raise ProbeError(f"site {site!r} is a real host: only its own worker watches it")
    if state != "applied":
        not_watching(apply_id, site, f"the apply is {state}")
        return None
    if not wanted(plan):
        not_watching(apply_id, site, "not asked (watch: false)")
        return None
    cfg = watch_config(plan, site)
    if not cfg["used"] or not cfg["standbys"]:
        not_watching(apply_id, site, "no standby endpoint to promote" if cfg["used"]
                     else "no selected endpoint of its own")
        return None
    stop(ns, reason=f"apply {apply_id} starts its own watcher")
    watcher = Watcher(apply_id, site, ns, cfg)
    watcher.thread = threading.Thread(target=watcher.run, name=f"mpcoa-watch-{watcher.key}",
                                      daemon=True)
    _running[watcher.key] = watcher
    watcher.thread.start()
    if not watcher.started.wait(30):
        raise ProbeError(f"site {site!r}: the failover watcher did not start")
    return watcher if watcher.proc is not None else None


def stop(ns: str | None, *, reason: str) -> bool:
    """Stop the site's watcher, whichever process started it; records `watch_stopped` with
    `reason` in the apply it watched. False when none was running."""
    record = pidfile.stop(pidfile_path(ns))
    if record is None:
        return False
    if record.get("apply_id") is not None and record.get("site"):
        detail = {"reason": reason, "pid": record["pid"]}
        if not record.get("was_running"):
            detail["already_gone"] = True  # its worker died and took it along
        _event(record["apply_id"], "watch_stopped", record["site"], detail)
    return bool(record.get("was_running"))


def stop_all(reason: str) -> None:
    """Every watcher this process started (its worker or server is stopping)."""
    for watcher in list(_running.values()):
        try:
            stop(watcher.ns, reason=reason)
        except Exception:  # a stop must not keep the others running
            log.exception("stopping the watcher of %s", watcher.site)
        if watcher.thread is not None:
            watcher.thread.join(15)


def running_here() -> list[Watcher]:
    return list(_running.values())

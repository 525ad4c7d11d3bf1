"""Applying an answer on one site, journaled: the site ends either as it was or as planned.

The journal (`STATE_DIR/<namespace or "host">/journal.json`, replaced atomically and fsynced) is
written *before* anything changes: every step with the value it replaces and the value it sets.
Each step is marked done after it was applied and read back. A process that dies on the way
leaves a journal in phase ``applying``; the next apply, rollback or ``recover`` finds it and rolls
back (default) or forward, and says which. Every step is idempotent (set the value; converge the
endpoint table), so redoing a step that had already taken effect is harmless.

Host-wide settings (`net.core.*mem_max`, a BPF congestion control's registration) are changed
only when the applier runs on the host itself (no namespace) and is allowed to (`allow_host`);
inside a namespace a value too low is reported as ``needs_host`` and left alone.

``python -m probes.siteapply apply|rollback|recover|status ...`` runs one of these in its own
process (the interrupted-apply test kills it between steps for real).
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from probes import siteconfig as sc

STATE_ROOT = Path(os.environ.get("MPCOA_APPLY_STATE", "/run/mpcoa/apply"))
PHASES = ("applying", "applied", "rolling_back", "rolled_back")


def state_dir(ns: str | None, root: Path | None = None) -> Path:
    return (root or STATE_ROOT) / (ns or "host")


def read_journal(directory: Path) -> dict[str, Any] | None:
    try:
        return json.loads((directory / "journal.json").read_text())
    except (OSError, ValueError):
        return None


def _write_journal(directory: Path, journal: dict[str, Any]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    tmp = directory / "journal.json.tmp"
    with open(tmp, "w") as f:
        json.dump(journal, f, indent=1)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, directory / "journal.json")
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextlib.contextmanager
def _locked(directory: Path) -> Iterator[None]:
    """One applier per site at a time (a redelivered task waits for the first)."""
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / "lock", "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _steps(target: dict[str, Any], current: dict[str, Any], ns: str | None,
           allow_host: bool, originals: dict[str, Any]) -> tuple[list[dict], list[dict]]:
    """(steps to run, host-wide settings left alone), in the order they are applied: the CC's
    registration before the CC, the path manager before endpoints."""
    steps: list[dict] = []
    skipped: list[dict] = []

    def add(kind: str, key: str, before: Any, after: Any) -> None:
        ident = f"{kind}:{key}"
        steps.append({"kind": kind, "key": key, "before": originals.get(ident, before),
                      "after": after, "done": False})

    if target["bpf_cc"] and target["bpf_cc"] not in current["available_ccs"]:
        if ns is None and allow_host:
            add("bpf_cc", target["bpf_cc"], None, target["bpf_cc"])
        else:
            skipped.append({"kind": "bpf_cc", "key": target["bpf_cc"], "action": "needs_host"})
    cur_sys = current["sysctls"]
    cc = target["sysctls"].get("net.ipv4.tcp_congestion_control")
    allowed = cur_sys.get(sc.ALLOWED_CCS, "").split()
    if cc and cc not in allowed:
        if not (ns is None and allow_host):  # refused before anything changed
            raise sc.SiteConfigError(
                f"congestion control {cc}: not in the host's {sc.ALLOWED_CCS} "
                f"({' '.join(allowed)}); a network namespace may default only to those. "
                "Add it on the host first (host-wide), or apply on the host itself")
        add("sysctl", sc.ALLOWED_CCS, cur_sys.get(sc.ALLOWED_CCS), " ".join([*allowed, cc]))
    for key, value in target["sysctls"].items():
        add("sysctl", key, cur_sys.get(key), value)
    for key, minimum in target["host_minimums"].items():
        have = cur_sys.get(key)
        if have is not None and int(have) >= minimum:
            continue
        if ns is None and allow_host:
            add("sysctl", key, have, str(minimum))
        else:
            skipped.append({"kind": "sysctl", "key": key, "before": have, "minimum": minimum,
                            "action": "needs_host"})
    if target["limits"]:
        add("limits", "mptcp", current["limits"], {**current["limits"], **target["limits"]})
    add("endpoints", "mptcp", current["endpoints"], target["endpoints"])
    return steps, skipped


def _do(ns: str | None, step: dict[str, Any], value: Any, journal: dict[str, Any]) -> None:
    kind, key = step["kind"], step["key"]
    if kind == "sysctl":
        if value is not None:
            sc.set_sysctl(ns, key, str(value))
    elif kind == "limits":
        sc.set_limits(ns, value)
    elif kind == "endpoints":
        sc.set_endpoints(ns, [sc.check_endpoint(e) for e in value])
    elif kind == "bpf_cc":
        from probes import bpf_cc

        if value is None:  # rolling back: unregister only what this apply registered
            bpf_cc.unload([key], map_ids=journal.get("bpf_map_ids", {}).get(key, []))
        else:
            ids = bpf_cc.load([key])
            journal.setdefault("bpf_map_ids", {})[key] = list(ids.values())


def _run(ns: str | None, directory: Path, journal: dict[str, Any], forward: bool,
         hold_after: int | None = None) -> None:
    steps = journal["steps"] if forward else list(reversed(journal["steps"]))
    for n, step in enumerate(steps, 1):
        if step["done"] == forward:  # applied already / never applied
            continue
        _do(ns, step, step["after"] if forward else step["before"], journal)
        step["done"] = forward
        _write_journal(directory, journal)
        if hold_after is not None and n >= hold_after:
            (directory / "held").write_text(str(os.getpid()))
            while True:  # the interrupted-apply test kills this process here
                time.sleep(1)


def apply(target: dict[str, Any], *, ns: str | None, root: Path | None = None,
          allow_host: bool = False, label: str = "", hold_after: int | None = None
          ) -> dict[str, Any]:
    """Bring the site to `target`; returns the journal (phase ``applied``) with what it did."""
    target = sc.check_target(target)
    directory = state_dir(ns, root)
    with _locked(directory):
        recovered = _recover_locked(ns, directory, forward=False)
        old = read_journal(directory)
        # A site already applied keeps its values from before the first apply: a rollback
        # restores the site as it was before mpcoa touched it, not the previous answer.
        originals = {}
        if old and old["phase"] == "applied":
            originals = {f"{s['kind']}:{s['key']}": s["before"] for s in old["steps"]}
        current = sc.read_state(ns)
        steps, skipped = _steps(target, current, ns, allow_host, originals)
        journal = {"version": 1, "namespace": ns, "label": label, "phase": "applying",
                   "target": target, "steps": steps, "skipped": skipped,
                   "started_at": time.time(), "recovered": recovered,
                   "bpf_map_ids": (old or {}).get("bpf_map_ids", {})}
        _write_journal(directory, journal)
        try:
            _run(ns, directory, journal, forward=True, hold_after=hold_after)
        except Exception:
            # a step the site refused: undo every step (the refused one may be half done;
            # redoing a value is harmless), so the site is as it was
            journal["phase"] = "rolling_back"
            for step in journal["steps"]:
                step["done"] = True
            _write_journal(directory, journal)
            _run(ns, directory, journal, forward=False)
            journal["phase"] = "rolled_back"
            journal["recovered"] = "rolled_back"
            journal["finished_at"] = time.time()
            _write_journal(directory, journal)
            raise
        journal["phase"] = "applied"
        journal["finished_at"] = time.time()
        _write_journal(directory, journal)
        return journal


def rollback(*, ns: str | None, root: Path | None = None) -> dict[str, Any]:
    """Restore every value the journal replaced; a site with nothing applied is left alone."""
    directory = state_dir(ns, root)
    with _locked(directory):
        journal = read_journal(directory)
        if journal is None or journal["phase"] == "rolled_back":
            return journal or {"phase": "nothing applied", "namespace": ns}
        journal["phase"] = "rolling_back"
        for step in journal["steps"]:
            step["done"] = True  # undo every step: redoing a value is harmless
        _write_journal(directory, journal)
        _run(ns, directory, journal, forward=False)
        journal["phase"] = "rolled_back"
        journal["finished_at"] = time.time()
        _write_journal(directory, journal)
        return journal


def _recover_locked(ns: str | None, directory: Path, forward: bool) -> str | None:
    journal = read_journal(directory)
    if journal is None or journal["phase"] in ("applied", "rolled_back"):
        return None
    if journal["phase"] == "applying" and forward:
        _run(ns, directory, journal, forward=True)
        journal["phase"] = "applied"
        outcome = "rolled_forward"
    else:
        journal["phase"] = "rolling_back"
        for step in journal["steps"]:
            step["done"] = True
        _write_journal(directory, journal)
        _run(ns, directory, journal, forward=False)
        journal["phase"] = "rolled_back"
        outcome = "rolled_back"
    journal["recovered"] = outcome
    journal["finished_at"] = time.time()
    _write_journal(directory, journal)
    return outcome


def recover(*, ns: str | None, root: Path | None = None, forward: bool = False) -> dict[str, Any]:
    """After a crash: finish an interrupted apply (`forward`) or undo it (default), finish an
    interrupted rollback. Returns ``{"outcome": rolled_back | rolled_forward | None, ...}``."""
    directory = state_dir(ns, root)
    with _locked(directory):
        outcome = _recover_locked(ns, directory, forward)
        journal = read_journal(directory) or {}
        return {"outcome": outcome, "phase": journal.get("phase"), "namespace": ns}


def status(*, ns: str | None, root: Path | None = None) -> dict[str, Any]:
    journal = read_journal(state_dir(ns, root))
    return {"namespace": ns, "journal": journal, "current": sc.read_state(ns)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m probes.siteapply")
    p.add_argument("command", choices=("apply", "rollback", "recover", "status"))
    p.add_argument("--ns", default=None)
    p.add_argument("--root", default=None)
    p.add_argument("--target", default=None, help="JSON file with the site's target")
    p.add_argument("--forward", action="store_true", help="recover: finish the apply")
    p.add_argument("--hold-after", type=int, default=None, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    root = Path(a.root) if a.root else None
    try:
        if a.command == "apply":
            if not a.target:
                p.error("apply needs --target")
            out = apply(json.loads(Path(a.target).read_text()), ns=a.ns, root=root,
                        hold_after=a.hold_after)
        elif a.command == "rollback":
            out = rollback(ns=a.ns, root=root)
        elif a.command == "recover":
            out = recover(ns=a.ns, root=root, forward=a.forward)
        else:
            out = status(ns=a.ns, root=root)
    except sc.SiteConfigError as exc:
        print(json.dumps({"error": str(exc)}))
        return 2
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())

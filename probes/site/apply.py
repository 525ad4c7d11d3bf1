"""Applying an answer on one site, journaled: the site ends either as it was or as planned.

The journal (`STATE_DIR/<namespace or "host">/journal.{0,1}`, `probes.site.journal_file`: two slots
allocated before anything changes and overwritten in place, so an undo can be recorded on a full
`/run`) is written *before* anything changes: every step with the value it replaces and the
value it sets. Each step is marked done after it was applied. A process that dies on the way
leaves a journal in phase ``applying``; the next apply, rollback or ``recover`` finds it and
undoes it (default) or finishes it, and says which. Every step is idempotent (set the value;
converge the endpoint table), so redoing a step that had already taken effect is harmless.

Applies chain: the journal of an apply made while another is in force carries the earlier one
whole (``previous``) and, for every value any of them changed, the value from before the first
(``originals``). So:

* a rollback restores the site as it was before the first apply, whatever came between;
* an apply that fails (or is interrupted and recovered backwards) undoes its own steps and
  leaves the previous apply in force, journaled and rollback-able (its journal again, with a
  ``failed`` note naming the apply that failed);
* a rollback names the apply it belongs to (``label``, ``"apply N"``): the journal of another
  apply is never undone by it.

The kernel's implicit endpoints (made for an address a subflow used that no endpoint names) are
not configuration: an apply leaves them alone unless it configures the same address or id (the
configured endpoint takes its place, ``implicit_replaced``), and a rollback never creates one:
such an address is left unconfigured, as it was.

A BPF congestion control's registration is host-wide: the journal records the intent before
``bpf_cc.load`` runs, so an undo after a crash between the two still unregisters it.

Host-wide settings (`net.core.*mem_max`, a BPF congestion control's registration) are changed
only when the applier runs on the host itself (no namespace) and is allowed to (`allow_host`);
inside a namespace a value too low is reported as ``needs_host`` and left alone.

``python -m probes.site.apply apply|rollback|recover|status ...`` runs one of these in its own
process (the interrupted-apply test kills it between steps for real).
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import re
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from probes import environment
from probes.base import ProbeError
from probes.site import config as sc
from probes.site import journal_file

DEFAULT_STATE_ROOT = Path("/run/mpcoa/apply")
STATE_ROOT: Path | None = None  # a fixed folder (tests); else MPCOA_APPLY_STATE or the default
# reverting: an apply that failed or was interrupted is being undone back to the previous one
PHASES = ("applying", "applied", "reverting", "rolling_back", "rolled_back")
#: the order values are restored in: the endpoints first, a BPF registration last (after the
#: namespace's default no longer names it)
_UNDO_RANK = {"endpoints": 0, "limits": 1, "sysctl": 2, "bpf_cc": 5}
LEGACY_FILE = "journal.json"


#: a network namespace's name as `ip netns` makes them (no path separator, never . or ..): the
#: name comes from the database and becomes a folder under the state root
NAMESPACE_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


def state_dir(ns: str | None, root: Path | None = None) -> Path:
    if ns is not None and not NAMESPACE_PATTERN.fullmatch(ns):
        raise ProbeError(f"{ns[:80]!r} is not a network namespace's name")
    return (root or STATE_ROOT or Path(environment.get("apply_state", DEFAULT_STATE_ROOT))) / (
        ns or "host")


def read_journal(directory: Path) -> dict[str, Any] | None:
    journal = journal_file.read(directory)
    if journal is not None:
        return journal
    try:  # written by an earlier version (one file, replaced on each write)
        legacy = json.loads((directory / LEGACY_FILE).read_text())
    except (OSError, ValueError):
        return None
    return {**legacy, "version": 2,
            "originals": [{"kind": s["kind"], "key": s["key"], "value": s["before"]}
                          for s in legacy.get("steps", [])],
            "bpf": {k: {"before": [], "map_ids": v}
                    for k, v in legacy.get("bpf_map_ids", {}).items()}}


def _write_journal(directory: Path, journal: dict[str, Any]) -> None:
    need = len(json.dumps(journal, separators=(",", ":")))
    if need > journal_file.capacity(directory):
        journal_file.reserve(directory, 2 * need)  # allocates: only when the slots are short
    journal_file.write(directory, journal)
    with contextlib.suppress(FileNotFoundError):
        (directory / LEGACY_FILE).unlink()


@contextlib.contextmanager
def _locked(directory: Path) -> Iterator[None]:
    """One applier per site at a time (a redelivered task waits for the first)."""
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / "lock", "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _ident(entry: dict[str, Any]) -> str:
    return f"{entry['kind']}:{entry['key']}"


def _steps(target: dict[str, Any], current: dict[str, Any], ns: str | None,
           allow_host: bool) -> tuple[list[dict], list[dict]]:
    """(steps to run, host-wide settings left alone), in the order they are applied: the CC's
    registration before the CC, the path manager before endpoints. A step's ``before`` is the
    value right before this apply (what undoing this apply alone restores)."""
    steps: list[dict] = []
    skipped: list[dict] = []

    def add(kind: str, key: str, before: Any, after: Any) -> None:
        steps.append({"kind": kind, "key": key, "before": before, "after": after,
                      "done": False})

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
            continue  # an earlier apply's raise stays journaled in `originals`
        if ns is None and allow_host:
            add("sysctl", key, have, str(minimum))
        else:
            skipped.append({"kind": "sysctl", "key": key, "before": have, "minimum": minimum,
                            "action": "needs_host"})
    if target["limits"]:
        add("limits", "mptcp", current["limits"], {**current["limits"], **target["limits"]})
    add("endpoints", "mptcp", current["endpoints"], target["endpoints"])
    return steps, skipped


def _originals(in_force: dict[str, Any] | None, steps: list[dict]) -> list[dict]:
    """Every value the chain of applies changed, as it was before the first of them: the
    earlier journal's whole list, then what this apply touches for the first time."""
    carried = list((in_force or {}).get("originals", []))
    seen = {_ident(o) for o in carried}
    return carried + [{"kind": st["kind"], "key": st["key"], "value": st["before"]}
                      for st in steps if _ident(st) not in seen]


def _undo_order(entry: dict[str, Any]) -> int:
    if entry["kind"] == "sysctl":  # the namespace's default CC before the list allowing it
        return {sc.ALLOWED_CCS: 4}.get(entry["key"], 3 if entry["key"] in sc.HOST_SYSCTLS
                                       else 2)
    return _UNDO_RANK[entry["kind"]]


def _register_cc(name: str, directory: Path, journal: dict[str, Any]) -> None:
    """The intent first (which of our maps of that name existed), then the registration."""
    from probes.bpf import cc as bpf_cc

    journal.setdefault("bpf", {})[name] = {"before": bpf_cc.ours().get(name, []),
                                           "map_ids": None}
    _write_journal(directory, journal)
    ids = bpf_cc.load([name])
    if journal.get("hold_after_register"):
        _hold(directory)  # the crash test kills this process before the ids are recorded
    journal["bpf"][name]["map_ids"] = list(ids.values())


def _unregister_cc(name: str, journal: dict[str, Any]) -> None:
    """Only what this chain registered: the recorded map ids, or (the process died between
    the intent and recording them) our maps of that name that were not there before."""
    from probes.bpf import cc as bpf_cc

    entry = journal.get("bpf", {}).get(name)
    if entry is None:  # never attempted
        return
    ids = entry["map_ids"]
    if ids is None:
        ids = [i for i in bpf_cc.ours().get(name, []) if i not in entry["before"]]
    bpf_cc.unload([name], map_ids=ids)
    del journal["bpf"][name]


def _do(ns: str | None, kind: str, key: str, value: Any, directory: Path,
        journal: dict[str, Any]) -> None:
    if kind == "sysctl":
        if value is not None:
            sc.set_sysctl(ns, key, str(value))
    elif kind == "limits":
        sc.set_limits(ns, value)
    elif kind == "endpoints":
        replaced = sc.set_endpoints(ns, [sc.check_endpoint(e) for e in value])
        # kept in the journal: a rollback leaves these addresses unconfigured, as they were
        # (an implicit endpoint is the kernel's, never configuration to restore)
        known = journal.setdefault("implicit_replaced", [])
        known += [e for e in replaced if e not in known]
    elif kind == "bpf_cc":
        if value is None:
            _unregister_cc(key, journal)
        else:
            _register_cc(key, directory, journal)


def _forward(ns: str | None, directory: Path, journal: dict[str, Any],
             hold_after: int | None = None) -> None:
    for n, step in enumerate(journal["steps"], 1):
        if step["done"]:
            continue
        _do(ns, step["kind"], step["key"], step["after"], directory, journal)
        step["done"] = True
        _write_journal(directory, journal)
        if hold_after is not None and n >= hold_after:
            _hold(directory)


def _hold(directory: Path) -> None:
    """Wait here for ever: the interrupted-apply tests kill this process at this point."""
    (directory / "held").write_text(str(os.getpid()))
    while True:
        time.sleep(1)


def _revert(ns: str | None, directory: Path, journal: dict[str, Any],
            failure: str | None) -> dict[str, Any]:
    """Undo this apply's own steps (the one under way may be half done: redoing a value is
    harmless) and put the previous apply's journal back in force; with none, the site is as
    before any apply (phase ``rolled_back``)."""
    if journal["phase"] != "reverting":
        journal["phase"] = "reverting"
        for step in journal["steps"]:
            step["done"] = True
        if failure is not None:
            journal["error"] = failure
        _write_journal(directory, journal)
    for step in reversed(journal["steps"]):
        if not step["done"]:
            continue
        _do(ns, step["kind"], step["key"], step["before"], directory, journal)
        step["done"] = False
        _write_journal(directory, journal)
    note = {"label": journal.get("label"), "error": journal.get("error"), "at": time.time()}
    previous = journal.get("previous")
    if previous is not None:
        restored = {**previous, "failed": note}
    else:
        restored = {**journal, "phase": "rolled_back", "recovered": "rolled_back",
                    "finished_at": time.time(), "failed": note}
    _write_journal(directory, restored)
    return restored


def _roll_back(ns: str | None, directory: Path, journal: dict[str, Any]) -> dict[str, Any]:
    """Restore every value the chain of applies changed, as before the first of them."""
    if journal["phase"] != "rolling_back":
        journal["phase"] = "rolling_back"
        journal["undo"] = [{**o, "done": False}
                           for o in sorted(journal.get("originals", []), key=_undo_order)]
        _write_journal(directory, journal)
    for entry in journal["undo"]:
        if entry["done"]:
            continue
        _do(ns, entry["kind"], entry["key"], entry["value"], directory, journal)
        entry["done"] = True
        _write_journal(directory, journal)
    journal["phase"] = "rolled_back"
    journal["finished_at"] = time.time()
    _write_journal(directory, journal)
    return journal


def _reserve(directory: Path, journal: dict[str, Any]) -> None:
    """Room for every record this apply and its undo may write, allocated before anything
    changes (an apply refused for want of space has changed nothing)."""
    size = len(json.dumps(journal, separators=(",", ":")))
    try:
        journal_file.reserve(directory, 3 * size + 4096)
    except journal_file.JournalSpaceError as exc:
        raise sc.SiteConfigError(f"{directory}: {exc.strerror}: nothing was changed") from None


def apply(target: dict[str, Any], *, ns: str | None, root: Path | None = None,
          allow_host: bool = False, label: str = "", hold_after: int | None = None,
          hold_after_register: bool = False) -> dict[str, Any]:
    """Bring the site to `target`; returns the journal (phase ``applied``) with what it did.
    On a refused step the site is left as before this apply (the previous one in force, its
    journal back with a ``failed`` note) and the error is raised."""
    target = sc.check_target(target)
    directory = state_dir(ns, root)
    with _locked(directory):
        recovered = _recover_locked(ns, directory, forward=False)
        old = read_journal(directory)
        in_force = old if old and old["phase"] == "applied" else None
        current = sc.read_state(ns)
        steps, skipped = _steps(target, current, ns, allow_host)
        journal = {"version": 2, "namespace": ns, "label": label, "phase": "applying",
                   "target": target, "steps": steps, "skipped": skipped,
                   "originals": _originals(in_force, steps),
                   "bpf": dict((in_force or {}).get("bpf", {})),
                   # the kernel's implicit endpoints before the first apply of the chain
                   "implicit_endpoints": (in_force["implicit_endpoints"] if in_force and
                                          "implicit_endpoints" in in_force
                                          else sc.read_implicit(ns)),
                   "implicit_replaced": list((in_force or {}).get("implicit_replaced", [])),
                   "previous": None if in_force is None else
                   {k: v for k, v in in_force.items() if k not in ("previous", "failed")},
                   "started_at": time.time(), "recovered": recovered}
        if hold_after_register:
            journal["hold_after_register"] = True
        _reserve(directory, journal)
        _write_journal(directory, journal)
        try:
            _forward(ns, directory, journal, hold_after=hold_after)
        except Exception as exc:
            _revert(ns, directory, journal, failure=str(exc))
            raise
        journal["phase"] = "applied"
        journal["finished_at"] = time.time()
        _write_journal(directory, journal)
        return journal


def rollback(*, ns: str | None, root: Path | None = None,
             label: str | list[str] | None = None) -> dict[str, Any]:
    """Restore every value the site's applies changed, as before the first of them. `label`
    (one or several): only if the journal in force is that apply's; another apply's journal is
    left alone (``outcome`` ``not_this_apply``). The answer's ``outcome``: ``rolled_back``,
    ``already_rolled_back``, ``nothing_applied``, ``nothing_in_force`` (another apply's
    journal, rolled back already) or ``not_this_apply``."""
    directory = state_dir(ns, root)
    labels = [label] if isinstance(label, str) else label
    with _locked(directory):
        recovered = _recover_locked(ns, directory, forward=False)
        journal = read_journal(directory)
        if journal is None:
            return {"phase": "nothing applied", "namespace": ns, "outcome": "nothing_applied"}
        mine = labels is None or journal.get("label") in labels
        if journal["phase"] == "rolled_back":
            return {**journal, "outcome": "already_rolled_back" if mine else "nothing_in_force",
                    **({"recovered": recovered} if recovered else {})}
        if not mine:
            return {**journal, "outcome": "not_this_apply"}
        return {**_roll_back(ns, directory, journal), "outcome": "rolled_back"}


def revert(*, ns: str | None, root: Path | None = None, label: str) -> dict[str, Any]:
    """Undo the apply `label` when it is the one in force, putting the previous apply back (or
    the site as before any, if none): another site refused that apply. ``outcome``:
    ``reverted``, ``not_in_force`` (another apply's journal, or this one undone already) or
    ``nothing_applied``."""
    directory = state_dir(ns, root)
    with _locked(directory):
        _recover_locked(ns, directory, forward=False)
        journal = read_journal(directory)
        if journal is None:
            return {"phase": "nothing applied", "namespace": ns, "outcome": "nothing_applied"}
        if journal.get("label") != label or journal["phase"] != "applied":
            return {**journal, "outcome": "not_in_force"}
        restored = _revert(ns, directory, journal, failure="another site refused this apply")
        return {**restored, "outcome": "reverted"}


def _recover_locked(ns: str | None, directory: Path, forward: bool) -> str | None:
    journal = read_journal(directory)
    if journal is None or journal["phase"] in ("applied", "rolled_back"):
        return None
    if journal["phase"] == "applying" and forward:
        _forward(ns, directory, journal)
        journal["phase"] = "applied"
        journal["finished_at"] = time.time()
        outcome = "rolled_forward"
    elif journal["phase"] == "rolling_back":
        journal = _roll_back(ns, directory, journal)
        outcome = "rolled_back"
    else:  # applying (backwards) or reverting: the previous apply back in force
        journal = _revert(ns, directory, journal, failure="interrupted")
        outcome = "rolled_back"
    journal["recovered"] = outcome
    _write_journal(directory, journal)
    return outcome


def recover(*, ns: str | None, root: Path | None = None, forward: bool = False) -> dict[str, Any]:
    """After a crash: finish an interrupted apply (`forward`) or undo it (default: the previous
    apply back in force), finish an interrupted rollback. Returns ``{"outcome": rolled_back |
    rolled_forward | None, ...}``."""
    directory = state_dir(ns, root)
    with _locked(directory):
        outcome = _recover_locked(ns, directory, forward)
        journal = read_journal(directory) or {}
        return {"outcome": outcome, "phase": journal.get("phase"), "namespace": ns,
                "label": journal.get("label")}


def status(*, ns: str | None, root: Path | None = None) -> dict[str, Any]:
    journal = read_journal(state_dir(ns, root))
    return {"namespace": ns, "journal": journal, "current": sc.read_state(ns)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m probes.site.apply")
    p.add_argument("command", choices=("apply", "rollback", "recover", "status"))
    p.add_argument("--ns", default=None)
    p.add_argument("--root", default=None)
    p.add_argument("--target", default=None, help="JSON file with the site's target")
    p.add_argument("--forward", action="store_true", help="recover: finish the apply")
    p.add_argument("--label", default=None,
                   help="apply: the journal's label; rollback: only this apply's journal")
    p.add_argument("--allow-host", action="store_true",
                   help="apply: change host-wide settings too (no --ns: this host)")
    p.add_argument("--hold-after", type=int, default=None, help=argparse.SUPPRESS)
    p.add_argument("--hold-after-register", action="store_true", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    root = Path(a.root) if a.root else None
    try:
        if a.command == "apply":
            if not a.target:
                p.error("apply needs --target")
            out = apply(json.loads(Path(a.target).read_text()), ns=a.ns, root=root,
                        label=a.label or "", allow_host=a.allow_host and a.ns is None,
                        hold_after=a.hold_after, hold_after_register=a.hold_after_register)
        elif a.command == "rollback":
            out = rollback(ns=a.ns, root=root, label=a.label)
        elif a.command == "recover":
            out = recover(ns=a.ns, root=root, forward=a.forward)
        else:
            out = status(ns=a.ns, root=root)
    except (ProbeError, OSError) as exc:  # a refused step: the journal says how it was left
        print(json.dumps({"error": str(exc)}))
        return 2
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())

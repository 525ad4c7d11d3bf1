"""Settling an apply or rollback that nobody will finish, from what the sites' journals say.

A row stays in flight (`action` set) only until its deadline (`apply_deadline_s`): a worker or
the server that died, a broker down throughout, a confirmation that raised. Past it the sweeper
(or the failing runner itself, at once) reads each site's journal (`probes.site.apply`; only the
journal labelled ``apply <id>`` is this apply's: another label means this apply never reached
the site) and settles:

- apply, every site ``applied``: the row is ``applied``; a confirmation that never ran to its
  end says so (``ran: false``) and a rollback is accepted as after any apply;
- apply, anything else: a site in between (``applying``, ``reverting``) is recovered (the
  journal undoes it), a site applied is reverted, so each site is as before this apply (the
  previous apply in force, or as before any); the row is ``failed`` (``unconfirmed`` when the
  confirmation had missed) and says per site what was found and done;
- rollback (the row ``rolling_back``): every site still carrying this apply's journal is rolled
  back; ``rolled_back`` (``failed`` when a site holds another apply's journal).

A real host's journal is on that host: this process cannot read it, so its site's report in
the row is what counts, and the error says which site to roll back by hand
(`mpcoa apply ID --rollback --site NAME`).
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from sqlalchemy import Engine

from models import utcnow
from probes.site import apply as siteapply

from ...db import session_scope
from ...store import applied
from ...store import apply_outbox as outbox

log = logging.getLogger(__name__)

def label(apply_id: int) -> str:
    """The label `flows.applying.apply` gives its journals."""
    return f"apply {apply_id}"


def site_journal(ns: str | None, apply_id: int) -> dict[str, Any] | None:
    """The site's journal if it is this apply's (None: the site holds another one, or none)."""
    journal = siteapply.read_journal(siteapply.state_dir(ns))
    return journal if journal and journal.get("label") == label(apply_id) else None


def _phase(ns: str, apply_id: int) -> str:
    journal = site_journal(ns, apply_id)
    return "untouched" if journal is None else journal["phase"]


def _revert(ns: str, apply_id: int) -> str:
    """Bring a namespace site back to how it was before this apply (the previous apply in
    force, or as before any); what was found and done."""
    found = _phase(ns, apply_id)
    if found in ("untouched", "rolled_back"):
        return "as before" if found == "untouched" else "rolled back"
    if found == "applied":
        siteapply.revert(ns=ns, label=label(apply_id))
    else:  # in between: the journal's own recovery undoes it
        siteapply.recover(ns=ns)
    return f"reverted to before this apply (was {found})"


def _roll_back(ns: str, labels: list[str]) -> str:
    out = siteapply.rollback(ns=ns, label=labels)
    if out["outcome"] == "not_this_apply":
        raise ValueError(f"the site holds {out.get('label') or 'another apply'}'s journal, "
                         "not this apply's: left alone")
    return out["outcome"].replace("_", " ")


def _apply_outcome(row, apply_id: int) -> tuple[str, str, dict[str, Any] | None]:
    """(state, what each site was found in and what was done, confirmation) of an apply."""
    plan, reports = row.plan, row.sites or {}
    conf = row.confirmation or {}
    found = {}
    for entry in plan["sites"]:
        ns = entry["namespace"]
        found[entry["site"]] = (_phase(ns, apply_id) if ns
                                else (reports.get(entry["site"]) or {}).get("state", "no report"))
    if all(p == "applied" for p in found.values()) and conf.get("passed") is not False:
        if "passed" not in conf:
            conf = {"ran": False, "passed": None,
                    "skipped": "the confirmation never ran to its end (settled from the "
                               "sites' journals)"}
        return "applied", ", ".join(f"{s} applied" for s in found), conf
    done = []
    for entry in plan["sites"]:
        name, ns = entry["site"], entry["namespace"]
        if ns:
            done.append(f"{name} {_revert(ns, apply_id)}")
        elif found[name] == "applied":
            done.append(f"{name} applied: a real host, roll it back there (`mpcoa apply "
                        f"{row.topology_id} --rollback --site {name}`)")
        else:
            done.append(f"{name} {found[name]}")
    state = "unconfirmed" if conf.get("passed") is False else "failed"
    return state, "; ".join(done), None


def _rollback_outcome(row, apply_id: int) -> tuple[str, str]:
    plan, reports = row.plan, row.sites or {}
    # this apply's journal and, for a failed one, the previous apply a site kept in force
    labels = [label(apply_id), *dict.fromkeys(
        r["in_force"] for r in reports.values() if isinstance(r, dict) and r.get("in_force"))]
    done, left = [], []
    for entry in plan["sites"]:
        name, ns = entry["site"], entry["namespace"]
        if ns:
            done.append(f"{name} {_roll_back(ns, labels)}")
        elif (reports.get(name) or {}).get("state") == "rolled_back":
            done.append(f"{name} rolled back")
        else:
            left.append(name)
            done.append(f"{name}: no rollback reported (a real host: `mpcoa apply "
                        f"{row.topology_id} --rollback --site {name}` there)")
    # a real host that did not report is still as applied: the row stays rollback-able
    return ("applied" if left else "rolled_back"), "; ".join(done)


def settle(apply_id: int, *, reason: str, deadline_s: float, force: bool = False,
           engine: Engine | None = None, now: datetime | None = None) -> str | None:
    """Settle the row if it is in flight past its deadline (`force`: now); its new state, or
    None when it was not this caller's to settle."""
    now = now or utcnow()
    with session_scope(engine) as s:
        row = outbox.claim_settling(s, apply_id=apply_id, now=now, deadline_s=deadline_s,
                                    force=force)
        if row is None:
            return None
        action = row.action
    log.warning("apply %s: settling the %s from the sites' journals (%s)", apply_id, action,
                reason)
    with session_scope(engine) as s:  # read, then let go: the sites are settled outside it
        row = applied.get_apply(s, apply_id=apply_id)
        s.expunge(row)
    seen = row.sites or {}
    confirmation = None
    try:
        if action == "apply":
            state, said, confirmation = _apply_outcome(row, apply_id)
        else:
            state, said = _rollback_outcome(row, apply_id)
    except Exception as exc:  # a journal the site cannot undo: the row says so, settled
        log.exception("apply %s: settling", apply_id)
        state, said = "failed", f"the sites could not be settled: {exc}"
    with session_scope(engine) as s:
        row = applied.lock_apply(s, apply_id=apply_id)
        if row.action != action:  # finished by its own runner meanwhile
            return row.state
        late = _late_applied(row, seen, action, state)
        if late:
            said += "; " + ", ".join(f"{n} applied meanwhile by a late runner: reverted"
                                     for n in late)
        error = None if state in ("applied", "rolled_back") else \
            f"{reason}; settled from the sites' journals: {said}"
        applied.finish(s, row, state, error=error, confirmation=confirmation)
        row.events = [*(row.events or []), {
            "at": now.isoformat(), "kind": "settled", "site": "*",
            "detail": {"action": action, "state": state, "reason": reason, "sites": said}}]
        outbox.settled(row)
        s.flush()
    # After the commit a late runner's report finds the row settled and reverts its site
    # itself (`apply.apply_site`); one that reported before it is undone here.
    for site, ns in late.items():
        done = _revert(ns, apply_id)
        kept = siteapply.read_journal(siteapply.state_dir(ns)) or {}
        with session_scope(engine) as s:
            applied.report_site(s, apply_id=apply_id, site=site, report={
                "state": "reverted", "namespace": ns, "outcome": done,
                "in_force": kept.get("label") if kept.get("phase") == "applied" else None})
    return state


def _late_applied(row, seen: dict[str, Any], action: str, state: str) -> dict[str, str]:
    """{site: namespace} of the sites a runner reported applied after this settler read the
    row (a worker restarted late on a busy host): the settler may have found them untouched
    or half done before the runner applied them, so a row settled not applied would leave
    them as planned. (A site reported applied before was found applied and reverted.)"""
    if action != "apply" or state == "applied":
        return {}
    now = row.sites or {}

    def applied_in(reports: dict[str, Any], site: str) -> bool:
        return (reports.get(site) or {}).get("state") == "applied"

    return {e["site"]: e["namespace"] for e in row.plan["sites"]
            if e["namespace"] and applied_in(now, e["site"]) and not applied_in(seen, e["site"])}

"""Applying a topology's answer to its sites, confirming it, rolling it back.

`start_apply` stores the plan (`apply_plan.build_plan`) as an `AppliedAnswer` in state
``applying``; after the commit `dispatch` hands it to each site's worker: on Celery the
``mpcoa.apply_site`` task on the site's own queue, embedded a thread of this process that does
both sites. Each site applies its side with `probes.site.apply` (journaled: as it was or as
planned, never half) and reports into the row (`apply_site`). When both sites are applied and
this process reaches both (the emulated testbed), the confirmation runs a plain MPTCP
application connection (`probes.site.mptcpapp`) on the sites' own endpoints and sysctls; below
(1 - delta) x the answer's OTP the sites go back to the previous apply, the row is
``unconfirmed`` and the answer is flagged ``apply_unconfirmed`` with the figures.

A site that refuses its side keeps the previous apply in force; a site that had applied it is
reverted to the previous one (`revert_site`): the failed row says "previous apply N still in
force", and N can still be rolled back. Applies and rollbacks of a topology are serialised
(under its lock; ``rolling_back`` while the sites undo); a site's rollback names its apply.
"""

from __future__ import annotations

import logging
from typing import Any

from sqlalchemy import Engine
from sqlalchemy.orm import Session

from models import AppliedAnswer
from probes.base import ProbeError
from probes.site import apply as siteapply

from ...db import session_scope
from ...errors import Conflict
from ...messaging import broker_client, site_queue
from ...settings import Settings, get_settings
from ...store import applied
from ...store import apply_outbox as outbox_store
from ..campaign import mptcp_gate
from . import apply_outbox, apply_settle, failover_watch
from .apply_confirm import CONFIRM_SECONDS, confirm, confirm_lasts_s
from .apply_plan import build_plan, refuse_unmeasured

log = logging.getLogger(__name__)

APPLY_TASK = apply_outbox.APPLY_TASK
#: a row in one of these states blocks a new apply or rollback of its topology
BUSY = {"applying": "still applying", "rolling_back": "rolling back"}


def start_apply(session: Session, *, topology_id: int, confirm: bool = True,
                seconds: float = CONFIRM_SECONDS, site_hosts: bool = False,
                watch: bool = True, hold_s: float = failover_watch.HOLD_S,
                by_hand: bool = False, allow_unmeasured: bool = False,
                auto_reapply: bool = False, reapply_of: dict | None = None,
                lower_ceilings: bool = False) -> AppliedAnswer:
    """A new apply of the topology's newest answer (409 while another one is applying).

    `site_hosts`: real sites may be in the plan, because their own workers (Celery queues) or
    their operators (`mpcoa apply ID --site NAME` on each host) apply them; without it only
    the testbed's namespaces may be (this process must never change its own host for a site).
    `by_hand`: each site's operator runs its side (`--site`): no hand-over, no deadline.
    `allow_unmeasured`: apply an answer no probe measured (a provisional one) too.
    `lower_ceilings`: lower a site's autotuning ceiling (tcp_rmem/tcp_wmem max) that is higher
    than the planned one (by default it is kept: other connections of the site rely on it).
    `auto_reapply`: a recalibration's new answer is applied the same way, through this function
    (`flows.scheduling.reapply`, which passes `reapply_of`: the campaign and the apply replaced)."""
    applied.lock_topology(session, topology_id=topology_id)
    busy = applied.busy_apply(session, topology_id=topology_id, states=tuple(BUSY))
    if busy is not None:
        raise Conflict(f"topology {topology_id}: apply {busy.id} is {BUSY[busy.state]}")
    health = mptcp_gate.check(session, topology_id)  # 409 while MPTCP cannot work
    plan = build_plan(session, topology_id, lower_ceilings=lower_ceilings)
    refuse_unmeasured(plan, allow_unmeasured=allow_unmeasured)
    plan["mptcp_health"] = health
    plan["allow_unmeasured"] = allow_unmeasured
    if not site_hosts and not _can_confirm(plan):
        raise Conflict("the sites are real hosts: they apply through their workers' queues "
                       "(MPCOA_BROKER_URL) or by `mpcoa apply ID --site NAME` on each host")
    plan["confirm"] = {"wanted": confirm, "seconds": seconds}
    plan["watch"] = {"wanted": watch, "hold_s": hold_s}
    plan["auto_reapply"] = auto_reapply
    if reapply_of is not None:
        plan["reapply"] = reapply_of
    row = applied.add_apply(session, topology_id=topology_id,
                            recommendation_id=plan["recommendation_id"], plan=plan)
    if not by_hand:  # sent once committed (`dispatch`), else by the sweeper
        outbox_store.owe(row, "apply", deadline_s=get_settings().apply_deadline_s)
    return row


def dispatch(apply_id: int, plan: dict[str, Any], action: str, settings: Settings, *,
             engine: Engine | None = None) -> bool:
    """Hand an apply (or a rollback) to the sites' workers, after the row was committed
    (`apply_outbox`: False when the broker is down, the sweeper sends it later); `watch`
    asks each site's Celery worker to start its watcher."""
    if action != "watch":
        return apply_outbox.hand_over(apply_id, plan, action, settings, engine=engine,
                                      runners=RUNNERS)
    if not settings.broker_url:
        raise ValueError("embedded: the watchers start in run_apply, in this process")
    client = broker_client(settings.broker_url)
    for site in plan["sites"]:
        client.send_task(APPLY_TASK, args=[apply_id, site["site"], action],
                         queue=site_queue(site["site"]))
    return True


def _site_entry(plan: dict[str, Any], site: str) -> dict[str, Any]:
    for s in plan["sites"]:
        if s["site"] == site:
            return s
    raise ProbeError(f"site {site!r} is not in this apply's plan")


def _journal(ns: str | None) -> dict[str, Any]:
    """The site's journal as the failed step left it ({}: none, or no place for one)."""
    try:
        return siteapply.read_journal(siteapply.state_dir(ns)) or {}
    except ProbeError:
        return {}


def apply_site(apply_id: int, site: str, *, namespace: str | None = "plan") -> dict[str, Any]:
    """One site's side: apply its target, report the journal's outcome into the row.
    `namespace`: "plan" = where the plan says (the testbed's namespace); None = this host."""
    with session_scope() as s:
        row = applied.get_apply(s, apply_id=apply_id)
        plan, state = row.plan, row.state
    entry = _site_entry(plan, site)
    ns = entry["namespace"] if namespace == "plan" else namespace
    if ns is None and namespace == "plan":
        raise ProbeError(f"site {site!r} is a real host: only its own worker (or `mpcoa apply "
                         f"ID --site {site}` on it) applies there")
    if state not in ("applying", "failed"):  # delivered again after the row was settled
        return {"state": "skipped", "namespace": ns, "why": f"apply {apply_id} is {state}"}
    try:
        mine = apply_settle.site_journal(ns, apply_id)  # refuses a namespace no netns can have
        if mine is not None and mine["phase"] == "applied":
            journal = mine  # delivered again after its worker died: as planned already
        else:
            failover_watch.stop(ns, reason=f"a new apply ({apply_id})")  # it watches the old
            journal = siteapply.apply(entry["target"], ns=ns, allow_host=ns is None,
                                      label=apply_settle.label(apply_id),
                                      hold_after=get_settings().apply_hold_after_steps)
        report = _report(journal, ns, "applied")
    except (ProbeError, OSError) as exc:
        state = _journal(ns)
        report = {"state": "failed", "error": str(exc), "namespace": ns,
                  "left": state.get("phase"), "recovered": state.get("recovered"),
                  "in_force": _in_force(state)}
    to_revert: list[str] = []
    with session_scope() as s:
        # the other site's worker may report at this very moment: under the row's lock
        row = applied.report_site(s, apply_id=apply_id, site=site, report=report)
        if report["state"] == "failed":
            applied.finish(s, row, "failed", error=_failure(site, report))
            to_revert = [e["site"] for e in plan["sites"] if e["site"] != site
                         and (row.sites.get(e["site"]) or {}).get("state") == "applied"]
        elif row.state in ("failed", "unconfirmed"):  # another site failed first, or the
            # row was settled while this site applied: back to the previous apply
            to_revert = [site]
        elif all((row.sites.get(e["site"]) or {}).get("state") == "applied"
                 for e in plan["sites"]) and not _can_confirm(plan):
            applied.finish(s, row, "applied", confirmation={
                "skipped": "the sites are real hosts: run the confirmation from the sender "
                           "(docs/workers.md)"})
    if to_revert == [site]:
        return revert_site(apply_id, site, namespace=namespace)
    if to_revert:
        _revert_elsewhere(apply_id, plan, to_revert)
    return report


def _in_force(journal: dict[str, Any]) -> str | None:
    """The apply the site's journal keeps in force ("apply N"), if any."""
    return journal.get("label") if journal.get("phase") == "applied" else None


def _failure(site: str, report: dict[str, Any]) -> str:
    held = report.get("in_force")
    return (f"{site}: {report['error']}; " + (f"previous {held} still in force" if held else
                                              "the site is as before any apply"))


def _revert_elsewhere(apply_id: int, plan: dict[str, Any], sites: list[str]) -> None:
    """The sites that had applied this apply go back to the previous one: on their own queues
    (Celery), else here (embedded: this process reaches the testbed's namespaces)."""
    from ...settings import get_settings

    settings = get_settings()
    if settings.broker_url:
        dispatch(apply_id, {"sites": [{"site": n} for n in sites]}, "revert", settings)
        return
    for name in sites:
        revert_site(apply_id, name)


def revert_site(apply_id: int, site: str, *, namespace: str | None = "plan") -> dict[str, Any]:
    """Undo this apply on a site that had applied it, putting the previous apply back in force
    (another site refused it). A site whose journal is not this apply's is left alone."""
    with session_scope() as s:
        plan = applied.get_apply(s, apply_id=apply_id).plan
    entry = _site_entry(plan, site)
    ns = entry["namespace"] if namespace == "plan" else namespace
    out = siteapply.revert(ns=ns, label=f"apply {apply_id}")
    # whatever the outcome, this apply is not in force there now
    report = {"state": "reverted", "namespace": ns, "outcome": out["outcome"],
              "in_force": _in_force(out), "at": out.get("finished_at")}
    with session_scope() as s:
        applied.report_site(s, apply_id=apply_id, site=site, report=report)
    return report


def confirm_when_both_applied(apply_id: int) -> None:
    """On Celery, each site's task reports alone: the one that sees both sites applied first
    (claimed by a conditional update) runs the confirmation."""
    with session_scope() as s:
        row = applied.get_apply(s, apply_id=apply_id)
        done = all((row.sites.get(e["site"]) or {}).get("state") == "applied"
                   for e in row.plan["sites"])
        if not (done and _can_confirm(row.plan)
                and applied.claim_confirmation(s, apply_id=apply_id,
                                               stale_after_s=confirm_lasts_s(row.plan))):
            return
    confirm(apply_id)


def _report(journal: dict[str, Any], ns: str | None, state: str) -> dict[str, Any]:
    return {
        "state": state,
        "namespace": ns,
        "changed": [f"{st['kind']} {st['key']}" for st in journal.get("steps", [])
                    if st["before"] != st["after"]],
        "skipped": journal.get("skipped", []),
        "recovered": journal.get("recovered"),
        "at": journal.get("finished_at"),
    }


def _can_confirm(plan: dict[str, Any]) -> bool:
    """This process reaches both sites: the testbed's namespaces."""
    return all(s["namespace"] for s in plan["sites"])


def run_apply(apply_id: int, *, watch_here: bool = True) -> None:
    """Embedded: both sites in turn, then the confirmation (a thread of the API process), then
    the sites' watchers as children of this process (`watch_here`; the CLI without --watch
    exits at once, so nobody would hold them: it says so)."""
    try:
        apply_outbox.running_here(apply_id, "apply")
        with session_scope() as s:
            plan = applied.get_apply(s, apply_id=apply_id).plan
        for entry in plan["sites"]:
            if apply_site(apply_id, entry["site"])["state"] != "applied":
                return
        if _can_confirm(plan):
            with session_scope() as s:
                claimed = applied.claim_confirmation(
                    s, apply_id=apply_id, stale_after_s=confirm_lasts_s(plan))
            if not claimed:  # another runner of this apply (resumed) is confirming it
                return
            confirm(apply_id)
        with session_scope() as s:
            row = applied.claim_watch(s, apply_id=apply_id)
        if row is None:  # not applied (unconfirmed, failed)
            return
        for entry in plan["sites"]:
            if not failover_watch.wanted(plan):
                failover_watch.not_watching(apply_id, entry["site"], "not asked (watch: false)")
            elif watch_here:
                failover_watch.start(apply_id, entry["site"])
            else:
                failover_watch.not_watching(
                    apply_id, entry["site"], "nobody holds a watcher: the CLI returned (run "
                    "`mpcoa apply ID --watch` in the foreground, or apply through the API)")
    except Exception as exc:  # settled from the journals: the sites as before or as planned
        log.exception("apply %s", apply_id)
        apply_outbox.fail_now(apply_id, f"the apply failed: {exc}", get_settings())


def watch_when_applied(apply_id: int, settings: Settings) -> bool:
    """On Celery, once the apply is `applied`: each site's worker is asked (on its own queue)
    to start its watcher, once, by whichever site's task gets here first after that."""
    with session_scope() as s:
        row = applied.claim_watch(s, apply_id=apply_id)
        plan = None if row is None else row.plan
    if plan is None:
        return False
    if not failover_watch.wanted(plan):
        for entry in plan["sites"]:
            failover_watch.not_watching(apply_id, entry["site"], "not asked (watch: false)")
        return True
    dispatch(apply_id, plan, "watch", settings)
    return True


def start_rollback(session: Session, *, topology_id: int, site_hosts: bool = False,
                   by_hand: bool = False) -> AppliedAnswer:
    """The apply in force, in state ``rolling_back`` (dispatch it after the commit): the newest,
    passing over a failed one that left the previous in force everywhere. Any other state
    returned means nothing to do (already rolled back); a rollback under way is returned as it
    is (each site's rollback is idempotent, and it is sent again). 409 while applying.
    `by_hand` as for `start_apply`."""
    applied.lock_topology(session, topology_id=topology_id)
    busy = applied.busy_apply(session, topology_id=topology_id, states=("applying",))
    if busy is not None:
        raise Conflict(f"topology {topology_id}: apply {busy.id} is still applying")
    rows = applied.list_applies(session, topology_id=topology_id, limit=100)
    if not rows:
        raise Conflict(f"topology {topology_id}: nothing to roll back (nothing applied)")
    row = next((r for r in rows if not _superseded_failure(r)), rows[0])
    if row.state not in ("applied", "failed", "rolling_back") or _superseded_failure(row):
        return row  # already rolled back: nothing to do
    if not site_hosts and not _can_confirm(row.plan):
        raise Conflict("the sites are real hosts: they roll back through their workers' "
                       "queues or by `mpcoa apply ID --rollback --site NAME` on each host")
    applied.finish(session, row, "rolling_back")
    if not by_hand:  # sent once committed (`dispatch`), else by the sweeper
        outbox_store.owe(row, "rollback", deadline_s=get_settings().apply_deadline_s)
    return row


def _superseded_failure(row: AppliedAnswer) -> bool:
    """An apply no site holds: unconfirmed, or failed and each site refused or reverted it
    (the previous apply, if any, in force)."""
    return row.state == "unconfirmed" or (row.state == "failed" and all(
        (row.sites.get(e["site"]) or {}).get("state") in ("failed", "reverted")
        for e in row.plan["sites"]))


def _rollback_labels(row: AppliedAnswer) -> list[str]:
    """The journals a site may undo for this row: its own and, for a failed apply, the previous
    apply a site kept in force when it refused this one (the rollback restores both)."""
    held = [(r or {}).get("in_force") for r in (row.sites or {}).values()]
    extra = [h for h in held if h] if row.state == "rolling_back" and any(
        (r or {}).get("state") in ("failed", "reverted") for r in row.sites.values()) else []
    return [f"apply {row.id}", *dict.fromkeys(extra)]


def rollback_site(apply_id: int, site: str, *, namespace: str | None = "plan") -> dict:
    """One site's side of a rollback (the row in ``rolling_back``); a delivery for a row that
    is no longer rolling back (a redelivered task, the other site's report finished it) changes
    nothing and says so."""
    with session_scope() as s:
        row = applied.get_apply(s, apply_id=apply_id)
        plan, state, labels = row.plan, row.state, _rollback_labels(row)
    entry = _site_entry(plan, site)
    ns = entry["namespace"] if namespace == "plan" else namespace
    if ns is None and namespace == "plan":
        raise ProbeError(f"site {site!r} is a real host: only its own worker rolls it back")
    if state != "rolling_back":
        return {"state": state, "namespace": ns, "outcome": f"apply {apply_id} is {state}: "
                "no rollback of it is under way, nothing done"}
    failover_watch.stop(ns, reason="rollback")  # before the endpoints it promotes go away
    journal = siteapply.rollback(ns=ns, label=labels)
    outcome = journal["outcome"]
    if outcome == "not_this_apply":
        report = {"state": "refused", "namespace": ns, "outcome": outcome,
                  "error": f"the site holds {journal.get('label') or 'another apply'}'s journal "
                           f"({journal.get('phase')}), not apply {apply_id}'s: left alone"}
    else:
        report = {**_report(journal, ns, "rolled_back"), "changed": [], "outcome": outcome}
    with session_scope() as s:
        row = applied.report_site(s, apply_id=apply_id, site=site, report=report)
        states = [(row.sites.get(e["site"]) or {}).get("state") for e in plan["sites"]]
        if row.state == "rolling_back" and all(st == "rolled_back" for st in states):
            applied.finish(s, row, "rolled_back")
        elif row.state == "rolling_back" and all(st in ("rolled_back", "refused")
                                                 for st in states):
            applied.finish(s, row, "failed", error="; ".join(
                f"{n}: {r['error']}" for n, r in row.sites.items()
                if r.get("state") == "refused"))
    return report


def run_rollback(apply_id: int) -> None:
    try:
        apply_outbox.running_here(apply_id, "rollback")
        with session_scope() as s:
            plan = applied.get_apply(s, apply_id=apply_id).plan
        for entry in plan["sites"]:
            rollback_site(apply_id, entry["site"])
    except Exception as exc:
        log.exception("rollback of apply %s", apply_id)
        apply_outbox.fail_now(apply_id, f"the rollback failed: {exc}", get_settings())


RUNNERS = {"apply": run_apply, "rollback": run_rollback}  # embedded: the sweeper's too

"""Handing applies and rollbacks to the sites' workers after their row committed, and the
sweeper that keeps none of them in flight for ever.

The row is stored first, with its action owed (`store.apply_outbox`); `hand_over` then sends it:
on Celery one ``mpcoa.apply_site`` task per site on the site's own queue, embedded a thread of
this process (recorded as the row's runner). A broker that is down is not an error: the
hand-over stays owed, the request still answers 202 with the row, and `sweep` sends it later.

`sweep` runs where campaigns are swept (Celery beat's and every worker's start-up
``mpcoa.resume_applies``; the embedded scheduler's tick, whose first one is at start-up):
- the hand-overs owed for `redispatch_after_s` are sent;
- embedded, an action whose runner process is gone (the server restarted mid-apply, a killed
  `mpcoa apply`) is run again here; on Celery at a worker's start every action in flight is
  sent again (the site's task finds its journal already at this apply and goes on from there,
  a confirmation another worker is running is not claimed twice);
- an action in flight past its deadline is settled from the sites' journals (`apply_settle`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Engine

from models import utcnow

from ...db import session_scope
from ...messaging import broker_client, site_queue
from ...settings import Settings
from ...store import apply_outbox as store
from . import apply_settle

log = logging.getLogger(__name__)

APPLY_TASK = "mpcoa.apply_site"
Runners = Mapping[str, Callable[[int], None]]  # action -> runs it in this process


def _record(engine: Engine | None, apply_id: int, action: str,
            runner: dict[str, Any] | None) -> bool:
    with session_scope(engine) as s:
        return store.mark_dispatched(s, apply_id=apply_id, action=action, runner=runner)


def hand_over(apply_id: int, plan: dict[str, Any], action: str, settings: Settings, *,
              engine: Engine | None = None, runners: Runners | None = None) -> bool:
    """Send `action` of apply `apply_id` to its executor now and mark it sent; False when the
    broker refused (the hand-over stays owed for the sweeper). `runners`: embedded, what runs
    each action in a thread (`flows.applying.apply`'s run_apply and run_rollback)."""
    if settings.broker_url:
        try:
            client = broker_client(settings.broker_url)
            for site in plan["sites"]:
                client.send_task(APPLY_TASK, args=[apply_id, site["site"], action],
                                 queue=site_queue(site["site"]))
        except Exception as exc:  # kombu's OperationalError, a refused connection, ...
            log.warning("apply %s: %s not handed to the sites' workers (%s); the sweeper "
                        "sends it", apply_id, action, exc)
            return False
        return _record(engine, apply_id, action, None)
    if runners is None:
        raise ValueError("embedded: an action needs its runner (flows.applying.apply)")
    # the runner first: a sweep must not take the thread about to start for a dead one's
    if not _record(engine, apply_id, action, store.this_process()):
        return False
    threading.Thread(target=runners[action], args=(apply_id,), name=f"mpcoa-{action}-{apply_id}",
                     daemon=True).start()
    return True


def running_here(apply_id: int, action: str) -> None:
    """An embedded runner (the API's thread, `mpcoa apply`) names itself on the row."""
    _record(None, apply_id, action, store.this_process())


def sweep(settings: Settings, *, engine: Engine | None = None, now: datetime | None = None,
          at_start: bool = False, runners: Runners | None = None) -> dict[str, list[int]]:
    """One pass of the applies' sweeper (see the module's docstring); `runners` as for
    `hand_over` (embedded)."""
    now = now or utcnow()
    sent, resumed, settled = [], [], []
    before = now - timedelta(seconds=settings.redispatch_after_s)
    with session_scope(engine) as s:
        owed = store.owed_ids(s, before=before)
        rows = [(r.id, r.action, r.plan, r.runner, r.dispatched_at) for r in store.in_flight(s)]
    if not (settings.broker_url or runners):  # nothing here could run them: settle only
        owed, rows = [], []
    by_id = {r[0]: r for r in rows}
    for apply_id in owed:
        if apply_id in by_id and hand_over(apply_id, by_id[apply_id][2], by_id[apply_id][1],
                                           settings, engine=engine, runners=runners):
            sent.append(apply_id)
    for apply_id, action, plan, runner, dispatched_at in rows:
        if apply_id in owed or dispatched_at is None:
            continue
        again = (at_start if settings.broker_url else store.runner_gone(runner))
        if again and hand_over(apply_id, plan, action, settings, engine=engine, runners=runners):
            resumed.append(apply_id)
    with session_scope(engine) as s:
        overdue = store.overdue_ids(s, now=now, deadline_s=settings.apply_deadline_s)
    for apply_id in overdue:
        state = apply_settle.settle(
            apply_id, reason=f"still in flight after its deadline "
            f"({settings.apply_deadline_s:.0f} s)", deadline_s=settings.apply_deadline_s,
            engine=engine, now=now)
        if state is not None:
            settled.append(apply_id)
    if sent or resumed or settled:
        log.info("applies: sent %s, resumed %s, settled %s", sent, resumed, settled)
    return {"sent": sent, "resumed": resumed, "settled": settled}


def fail_now(apply_id: int, reason: str, settings: Settings) -> str | None:
    """The action's own runner cannot finish it: settle it now, from the journals."""
    return apply_settle.settle(apply_id, reason=reason, force=True,
                               deadline_s=settings.apply_deadline_s)

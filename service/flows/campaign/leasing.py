"""Leasing: one probe in flight per campaign, and a probe holds both of its sites.

`claim` hands out a lease for the campaign's next step under a row lock (`store.probe_lease`)
and refuses a second one until the lease is released or has expired (a killed worker); it also
takes the two sites' locks (`store.sitelocks`), in the order the fleet policy
(`flows.campaign.fleet`) chooses. `lease_heartbeat` renews both while the probe runs, `keep` between
attempts and when a result is stored, each only while the caller still owns the lease.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta

from sqlalchemy import Engine
from sqlalchemy.orm import Session

from models import utcnow

from ...db import session_scope
from ...settings import Settings
from ...store import campaigns as campaign_store
from ...store import probe_lease, sitelocks
from . import budget, fleet
from .plan import ProbeStep

log = logging.getLogger(__name__)


def claim(
    session: Session, *, campaign_id: int, step: ProbeStep, owner: str, settings: Settings
) -> str | None:
    """A lease id for running `step` under `owner`, or None while another live lease holds the
    campaign or another campaign's probe holds one of its two sites. It lasts `lease_ttl_s`;
    `lease_heartbeat` renews it while the probe runs."""
    lasts = timedelta(seconds=settings.lease_ttl_s)
    lease_id = probe_lease.claim_lease(
        session, campaign_id=campaign_id, step_key=list(step.key), owner=owner, lasts=lasts
    )
    if lease_id is None:
        return None
    # A probe also holds both sites' links, across campaigns. Busy sites, or a busier site's
    # campaign that the fleet policy starts first, give the campaign lease back so the executor
    # retries later.
    now = utcnow()
    sites = list(campaign_store.site_names(session, campaign_id=campaign_id))
    rival = _gives_way_to(session, campaign_id=campaign_id, now=now, settings=settings)
    if rival is not None or not sitelocks.acquire_sites(
        session, sites=sites, holder=lease_id, lasts=lasts, now=now
    ):
        if rival is not None:
            log.info("campaign %s: gives its sites way to campaign %s", campaign_id, rival)
        probe_lease.release_lease(session, campaign_id=campaign_id, lease_id=lease_id,
                                  owner=owner)
        campaign_store.mark_site_wait(session, campaign_id=campaign_id, at=now)
        return None
    campaign_store.mark_site_wait(session, campaign_id=campaign_id, at=None)
    return lease_id


def _gives_way_to(
    session: Session, *, campaign_id: int, now: datetime, settings: Settings
) -> str | None:
    """The campaign this one leaves its sites to under the fleet policy (`fleet.gives_way`):
    every active campaign's remaining work counts; those holding a probe lease are running."""
    rows = campaign_store.fleet_rows(session, now=now)
    fresh = now - timedelta(seconds=settings.site_wait_fresh_s)
    pending = [
        fleet.Pending(str(r["campaign_id"]), r["sites"], budget.remaining_s(r["campaign"]))
        for r in rows
        if not r["leased"] or r["campaign_id"] == campaign_id
    ]
    asking = {
        str(r["campaign_id"])
        for r in rows
        if r["site_wait_at"] is not None and r["site_wait_at"] >= fresh
    }
    free = {site for r in rows for site in r["sites"]} - sitelocks.busy_sites(session, now=now)
    return fleet.gives_way(str(campaign_id), pending, free, asking)


def release(session: Session, *, campaign_id: int, lease_id: str, owner: str | None) -> bool:
    """Hand the lease and its sites back if `owner` has it (another execution of the same
    lease may be probing on those sites right now)."""
    if not probe_lease.release_lease(session, campaign_id=campaign_id, lease_id=lease_id,
                                     owner=owner):
        return False
    sitelocks.release_sites(session, holder=lease_id)
    return True


def keep(session: Session, *, campaign_id: int, lease_id: str, owner: str | None,
         lasts: timedelta, hand_to: str | None = None) -> bool:
    """Renew the lease and its sites for `lasts` if `owner` still has it, handing it to
    `hand_to` if given; False when it is another's. The row stays locked to the caller's
    commit: what the caller writes beside it is written under the lease."""
    if not probe_lease.renew_lease(session, campaign_id=campaign_id, lease_id=lease_id,
                                   owner=owner, lasts=lasts, hand_to=hand_to):
        return False
    sitelocks.renew_sites(session, holder=lease_id, lasts=lasts)
    return True


@contextmanager
def lease_heartbeat(
    engine: Engine, *, campaign_id: int, lease_id: str, owner: str, settings: Settings
) -> Iterator[None]:
    """Renew the lease every `lease_heartbeat_s` while the body (a probe) runs and `owner` has
    it, so that a live worker keeps its campaign however long the probe and a killed one loses
    it within `lease_ttl_s`."""
    stop = threading.Event()
    lasts = timedelta(seconds=settings.lease_ttl_s)

    def beat() -> None:
        while not stop.wait(settings.lease_heartbeat_s):
            try:
                with session_scope(engine) as s:
                    if not keep(s, campaign_id=campaign_id, lease_id=lease_id, owner=owner,
                                lasts=lasts):
                        log.warning("campaign %s: lease %s is no longer ours", campaign_id,
                                    lease_id)
                        return  # someone else holds the campaign now
            except Exception as exc:  # a database blip: the next beat tries again
                log.warning("campaign %s: lease renewal failed (%s)", campaign_id, exc)

    thread = threading.Thread(target=beat, name=f"lease-{campaign_id}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=10)

"""The operator's figures, read from the tables at scrape time (api/metrics.py exposes them).

Every count here is a count of rows that every process writes (API processes, Celery workers,
the embedded runner), so one scrape of any API process gives the whole fleet's figures, and a
restart loses nothing: no process has to keep, or share, a counter of its own.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from models import (
    ACTIVE_CAMPAIGN_STATES,
    CAMPAIGN_STATES,
    Campaign,
    Measurement,
    RecalibrationEvent,
    Site,
    SiteLock,
    Topology,
    utcnow,
)

#: a failed probe's stored error -> a short reason label (the first pattern that matches)
FAILURE_REASONS = (
    ("not_quiet", re.compile(r"sites not quiet")),
    ("no_mptcp", re.compile(r"fell back|fallback|no MPTCP", re.I)),
    ("subflow_set", re.compile(r"subflow \S+: ")),
    ("no_interval", re.compile(r"no goodput interval")),
    ("timeout", re.compile(r"timed? ?out", re.I)),
    ("sites_busy", re.compile(r"busy", re.I)),
)


def failure_reason(error: str | None) -> str:
    for label, pattern in FAILURE_REASONS:
        if error and pattern.search(error):
            return label
    return "probe_error"


@dataclass
class Figures:
    now: datetime
    campaigns: dict[str, int] = field(default_factory=dict)  # state -> count
    probes: Counter = field(default_factory=Counter)  # (phase, status, reason) -> count
    probe_seconds: dict[str, float] = field(default_factory=dict)  # phase -> seconds
    calibrations: dict[str, int] = field(default_factory=dict)  # reason -> finished campaigns
    events: dict[str, int] = field(default_factory=dict)  # kind -> recalibration events
    waiting_for_sites: int = 0  # active campaigns waiting for their sites now
    longest_site_wait_s: float = 0.0
    sites_locked: int = 0
    # topology id -> (local site, remote site, finished_at of its last successful calibration)
    last_calibration: dict[int, tuple[str, str, datetime | None]] = field(default_factory=dict)


def figures(session: Session, *, now: datetime | None = None) -> Figures:
    now = now or utcnow()
    out = Figures(now=now)
    states = dict(session.execute(
        select(Campaign.state, func.count()).group_by(Campaign.state)).all())
    out.campaigns = {s: int(states.get(s, 0)) for s in CAMPAIGN_STATES}
    for phase, status, error, n in session.execute(
        select(Measurement.phase, Measurement.status, Measurement.error, func.count())
        .group_by(Measurement.phase, Measurement.status, Measurement.error)
    ):
        reason = failure_reason(error) if status == "failed" else ""
        out.probes[(phase, status, reason)] += int(n)
    out.probe_seconds = {p: float(s or 0.0) for p, s in session.execute(
        select(Measurement.phase, func.sum(Measurement.duration_s)).group_by(Measurement.phase))}
    out.calibrations = {r: int(n) for r, n in session.execute(
        select(Campaign.reason, func.count()).where(Campaign.state == "done")
        .group_by(Campaign.reason))}
    out.events = {k: int(n) for k, n in session.execute(
        select(RecalibrationEvent.kind, func.count()).group_by(RecalibrationEvent.kind))}
    waits = list(session.scalars(select(Campaign.site_wait_at).where(
        Campaign.state.in_(ACTIVE_CAMPAIGN_STATES), Campaign.site_wait_at.is_not(None))))
    out.waiting_for_sites = len(waits)
    out.longest_site_wait_s = max(((now - w).total_seconds() for w in waits), default=0.0)
    out.sites_locked = int(session.scalar(
        select(func.count()).select_from(SiteLock)
        .where(SiteLock.holder.is_not(None), SiteLock.until > now)) or 0)
    last = dict(session.execute(
        select(Campaign.topology_id, func.max(Campaign.finished_at))
        .where(Campaign.state == "done").group_by(Campaign.topology_id)).all())
    local, remote = Site.__table__.alias("l"), Site.__table__.alias("r")
    for tid, lname, rname in session.execute(
        select(Topology.id, local.c.name, remote.c.name)
        .join(local, local.c.id == Topology.local_site_id)
        .join(remote, remote.c.id == Topology.remote_site_id)
    ):
        finished = last.get(tid)
        if finished is not None and finished.tzinfo is None:  # SQLite's aggregate is naive
            finished = finished.replace(tzinfo=now.tzinfo)
        out.last_calibration[tid] = (lname, rname, finished)
    return out


def site_names(session: Session) -> list[str]:
    return list(session.scalars(select(Site.name).order_by(Site.name)))

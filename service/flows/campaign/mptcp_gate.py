"""The MPTCP health gate: a calibration (a campaign started) or an apply is refused (409) when
MPTCP cannot work between the sites, as its probes would all be plain TCP and the applied
answer would change nothing.

Two causes refuse: a site's blackhole lockout in force (its `mptcp_health`: read now in the
running testbed's namespace, or the site worker's latest capability report), and the
topology's newest probes having fallen back to TCP `mptcp_fallback_limit` times in a row within
`mptcp_fallback_window_s` (the probes' own records: `store.measurements.fallback_streak`). What
only warns (a subset needing more subflows than the kernel allows, a setting the plan relies on
that is off) is returned by `warnings` for the plan to show.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from sqlalchemy.orm import Session

from models import utcnow
from probes.base import ProbeError
from probes.site.mptcp_health import mptcp_health, subflow_warning
from probes.testbed import lifecycle as tb

from ...errors import Conflict
from ...settings import Settings, get_settings
from ...store import artifacts
from ...store import measurements as measurement_store
from ..answers.snapshot import TopologySnapshot, snapshot_by_id
from .probing import find_testbed


def site_healths(session: Session, snap: TopologySnapshot,
                 settings: Settings) -> dict[str, dict[str, Any] | None]:
    """Site name -> its `mptcp_health` (None: not known). A running testbed that has both
    sites (the one MPCOA_TESTBED names, else any) is read now; otherwise each site worker's
    latest capability report says it."""
    names = (snap.spec.local.name, snap.spec.remote.name)
    try:
        bed = tb.attach(find_testbed(*names, settings.testbed))
    except ProbeError:
        bed = None
    if bed is not None:
        return {name: mptcp_health(bed.ns(name)) for name in names}
    out: dict[str, dict[str, Any] | None] = {}
    for name in names:
        report = artifacts.worker_report(session, site_name=name) or {}
        health = report.get("mptcp_health")
        out[name] = health if isinstance(health, dict) else None
    return out


def refusal(healths: Mapping[str, Mapping[str, Any] | None], streak: list[str],
            limit: int) -> str | None:
    """Why MPTCP cannot be relied on now (the 409's detail), or None."""
    causes = []
    for name, health in healths.items():
        lockout = (health or {}).get("lockout") or {}
        if lockout.get("in_force"):
            timeout = lockout.get("blackhole_timeout_s")
            causes.append(
                f"site {name!r}: MPTCP blackhole lockout in force (net.mptcp.blackhole_timeout="
                f"{timeout} s, doubling per repeat): the kernel makes every new MPTCP "
                "connection plain TCP after MP_CAPABLE SYNs were dropped on the path; fix the "
                "path, then end the lockout by writing net.mptcp.blackhole_timeout on that host")
    if limit > 0 and len(streak) >= limit:
        causes.append(f"the topology's last {len(streak)} probes fell back to TCP (limit "
                      f"MPCOA_MPTCP_FALLBACK_LIMIT={limit}); the newest: {streak[0]}")
    return "; ".join(causes) or None


def warnings(snap: TopologySnapshot,
             healths: Mapping[str, Mapping[str, Any] | None]) -> list[str]:
    """What the plan relies on that is not so, without refusing."""
    out = [f"site {name!r}: {w}" for name, h in healths.items()
           for w in (h or {}).get("warnings") or []]
    many = subflow_warning(len(snap.spec.local.isps), len(snap.spec.remote.isps))
    return out + ([many] if many else [])


def check(session: Session, topology_id: int,
          settings: Settings | None = None) -> dict[str, Any]:
    """Refuse (409, naming the cause) when MPTCP cannot be relied on between the topology's
    sites; else what the gate saw: each site's health and the warnings."""
    settings = settings or get_settings()
    snap = snapshot_by_id(session, topology_id)
    healths = site_healths(session, snap, settings)
    limit = settings.mptcp_fallback_limit
    streak = measurement_store.fallback_streak(
        session, topology_id=topology_id, limit=max(limit, 1),
        since=utcnow() - timedelta(seconds=settings.mptcp_fallback_window_s)) if limit else []
    why = refusal(healths, streak, limit)
    if why is not None:
        raise Conflict(f"topology {topology_id}: MPTCP health: {why}")
    return {"sites": dict(healths), "warnings": warnings(snap, healths)}

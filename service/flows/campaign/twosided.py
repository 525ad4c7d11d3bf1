"""Two-sided probes across real sites: the meeting of the receiver site's
passive half and the sender site's active half through the `probe_sessions` table.

A session is one attempt of one probe step under one lease: `(campaign, lease, "<step>#<n>")`,
n counting the step's attempts under any lease.
The sender's task opens it by sending the passive task (one per attempt, so a retried probe
gets a fresh server); the passive side starts its server, writes `ready` (port, addresses),
waits for the client to finish — never past the session's deadline nor the probe's lease —
and writes `done` with the receiver's report (or `failed`). The active side waits for `ready`,
runs, waits for `done` and assembles the result. A redelivered passive task of a session finds
its killed predecessor's server (pid, start time and boot, so never a process that got the pid
since) and ends it before anything else. A passive task nobody took (the receiver site has no
worker: it died or restarts) is `ReceiverAbsent`: the step is run again once the site is back,
for `receiver_absent_timeout_s` in all, and not used up by its retries meanwhile.

The probe's tool (`probes.tools.registry`, its name sent with the passive task) starts each
half; its passive half says what `ready` carries and whether a client is still being served.
The paced tool's (a stream's buffer probe: iperf3 measures no frame) is the site's long-lived
receiver, started at its first paced probe and kept: `ready` and `done` are written at once,
since the frames reach the sender on the probe's own control connection. A tool served by a
long-lived node the receiving site names in its report (NetPerfMeter) needs no session
(`node_active_side`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from models import utcnow
from probes import cc_users
from probes.base import MeasurementRequest, MeasurementResult, ProbeError, ReceiverAbsent
from probes.site.local import LocalSite
from probes.testbed.lifecycle import available_congestion_controls
from probes.tools import twosided as ts
from probes.tools.registry import ProbeTool

from ...db import session_scope
from ...settings import Settings
from ...store import campaigns as campaign_store
from ...store import probe_lease
from ...store import probesessions as sessions
from .plan import ProbeStep
from .probe_tool import binaries

log = logging.getLogger(__name__)
POLL_S = 0.2


#: what a session says when no worker of the receiver site opened it (`ReceiverAbsent`)
ABSENT = "no worker of the receiver site took the passive side"


def step_prefix(step: ProbeStep) -> str:
    return "|".join(str(k) for k in step.key)


def next_session_key(campaign_id: int, step: ProbeStep) -> str:
    """The key of the step's next attempt, `<step>#<n>`: n counts the step's sessions so far
    under any lease, so an attempt never meets an earlier one's session (a redelivered copy of
    a task, or a step run again under a new lease after its receiver was away)."""
    with session_scope() as s:
        n = len(sessions.step_sessions(s, campaign_id=campaign_id, step_prefix=step_prefix(step)))
    return f"{step_prefix(step)}#{n}"


def _absent_s(campaign_id: int, key: str, settings: Settings) -> float:
    """How long the step's attempts have waited for a receiver site with no worker."""
    with session_scope() as s:
        rows = sessions.step_sessions(s, campaign_id=campaign_id,
                                      step_prefix=key.rsplit("#", 1)[0])
        return sum(ABSENT in (r.error or "") for r in rows) * settings.passive_ready_timeout_s


def _lease_live(campaign_id: int, lease_id: str) -> bool:
    with session_scope() as s:
        c = campaign_store.get_campaign(s, campaign_id=campaign_id)
        return c.lease_id == lease_id and probe_lease.lease_is_live(s, campaign_id=campaign_id)


def passive_side(*, campaign_id: int, lease_id: str, key: str, request: MeasurementRequest,
                 site: LocalSite, settings: Settings, tool: ProbeTool) -> str:
    """The receiver's half of one session on `tool`; returns its final state."""
    if request.receiver != site.name or not site.isps:
        raise ProbeError(f"passive side of {request.receiver!r} sent to a worker that is not "
                         f"that site's (started with --site NAME --isp LABEL=ADDR)")
    deadline_s = request.duration_s + settings.two_sided_margin_s
    with session_scope() as s:
        row = sessions.open_session(s, campaign_id=campaign_id, lease_id=lease_id, step_key=key,
                                    deadline=utcnow() + timedelta(seconds=deadline_s))
        if row.state in ("done", "failed"):
            return row.state  # a redelivery of a finished session: nothing to do
        if row.server_pid and ts.kill_leftover((row.receiver_report or {}).get("server")):
            log.warning("session %s: ended the server (pid %s) a killed worker left",
                        key, row.server_pid)
        if row.state == "ready":  # the predecessor died mid-probe: the active side gives up
            sessions.mark_failed(s, row=row, error="the passive side's worker died mid-probe")
            return "failed"
        deadline = row.deadline
    if not _lease_live(campaign_id, lease_id):
        return _fail(campaign_id, lease_id, key, "the probe's lease is gone")
    with cc_users.using([request.cc], f"receiving side of probe {key}"):
        return _serve(campaign_id, lease_id, key, request, site, settings, deadline, tool)


def _serve(campaign_id: int, lease_id: str, key: str, request: MeasurementRequest,
           site: LocalSite, settings: Settings, deadline: datetime, tool: ProbeTool) -> str:
    try:
        half = tool.passive_start(request, local_addrs=site.isps,
                                  binary=binaries(settings).get(tool.name))
    except Exception as exc:
        return _fail(campaign_id, lease_id, key, f"passive start: {exc}")
    try:
        with session_scope() as s:
            row = sessions.get_session(s, campaign_id=campaign_id, lease_id=lease_id,
                                       step_key=key, lock=True)
            sessions.mark_ready(s, row=row, port=half.port, receiver_addrs=site.isps,
                                pid=half.pid, report=half.report)
        # wait for the server's one client, never past the deadline nor the lease
        while half.running():
            if utcnow() >= deadline or not _lease_live(campaign_id, lease_id):
                half.stop()
                break
            time.sleep(0.5)
        report = half.finish()
    except Exception as exc:
        half.stop()
        return _fail(campaign_id, lease_id, key, f"passive side: {exc}")
    with session_scope() as s:
        row = sessions.get_session(s, campaign_id=campaign_id, lease_id=lease_id, step_key=key,
                                   lock=True)
        sessions.mark_done(s, row=row, report=report)
    return "done"


def fail_session(*, campaign_id: int, lease_id: str, key: str, error: str) -> str:
    """Mark the session failed (created if missing, so the active side stops waiting)."""
    with session_scope() as s:
        row = sessions.open_session(s, campaign_id=campaign_id, lease_id=lease_id, step_key=key,
                                    deadline=utcnow())
        if row.state != "done":
            sessions.mark_failed(s, row=row, error=error)
    return "failed"


def _fail(campaign_id: int, lease_id: str, key: str, error: str) -> str:
    with session_scope() as s:
        row = sessions.get_session(s, campaign_id=campaign_id, lease_id=lease_id, step_key=key,
                                   lock=True)
        if row is not None:
            sessions.mark_failed(s, row=row, error=error)
    return "failed"


def _wait_state(campaign_id: int, lease_id: str, key: str, states: tuple[str, ...],
                timeout_s: float) -> Any:
    end = time.monotonic() + timeout_s
    while True:
        with session_scope() as s:
            row = sessions.get_session(s, campaign_id=campaign_id, lease_id=lease_id,
                                       step_key=key)
            if row is not None and row.state == "failed":
                raise ProbeError(f"receiver site: {row.error}")
            if row is not None and row.state in states:
                return {"port": row.port, "receiver_addrs": dict(row.receiver_addrs),
                        "report": dict(row.receiver_report)}
        if time.monotonic() >= end:
            if row is None:  # its task was never taken: the site has no worker right now
                raise ReceiverAbsent(f"receiver site: {ABSENT} in {timeout_s:g} s")
            raise ProbeError(f"receiver site: no {'/'.join(states)} after {timeout_s:g} s")
        time.sleep(POLL_S)


def active_side(*, campaign_id: int, lease_id: str, key: str, request: MeasurementRequest,
                site: LocalSite, settings: Settings, tool: ProbeTool,
                send_passive: Callable[[], None]) -> MeasurementResult:
    """The sender's half on `tool`: send the passive task, wait for `ready`, run, wait for
    `done`."""
    if request.sender != site.name:
        raise ProbeError(f"active side of {request.sender!r} run at site {site.name!r}")
    send_passive()
    try:
        ready = _wait_state(campaign_id, lease_id, key, ("ready", "done"),
                            settings.passive_ready_timeout_s)

        def wait_report() -> dict[str, Any]:
            return _wait_state(campaign_id, lease_id, key, ("done",),
                               settings.two_sided_margin_s)["report"]

        with cc_users.using([request.cc], f"sending side of probe {key}"):
            return tool.active_measure(
                request, sender_addrs=site.isps, receiver_addrs=ready["receiver_addrs"],
                port=ready["port"], binary=binaries(settings).get(tool.name),
                wait_report=wait_report)
    except Exception as exc:
        # this attempt is over: its session must not look alive (a late passive task of it
        # then finds it failed and starts nothing)
        fail_session(campaign_id=campaign_id, lease_id=lease_id, key=key,
                     error=f"sender gave up: {exc}")
        if isinstance(exc, ReceiverAbsent):
            waited = _absent_s(campaign_id, key, settings)
            if waited > settings.receiver_absent_timeout_s:  # the probe fails: no more waiting
                raise ProbeError(f"receiver site {request.receiver!r}: {ABSENT} for "
                                 f"{waited:g} s (receiver_absent_timeout_s)") from exc
        raise


def node_active_side(*, request: MeasurementRequest, site: LocalSite, tool: ProbeTool,
                     receiver_report: dict[str, Any], key: str,
                     settings: Settings) -> MeasurementResult:
    """The sender's half of a probe on a tool served by the receiving site's long-lived node,
    whose port and addresses the site's report names (no session: the node serves every probe
    and sends its results back over the control connection)."""
    if request.sender != site.name:
        raise ProbeError(f"active side of {request.sender!r} run at site {site.name!r}")
    node = receiver_report.get(tool.node_key or "") or {}
    addrs = receiver_report.get("endpoints") or {}
    if not isinstance(node.get("port"), int) or not addrs:
        raise ProbeError(f"site {request.receiver!r} reports no {tool.name} passive node (its "
                         f"worker runs one where {tool.name} runs)")
    with cc_users.using([request.cc], f"sending side of probe {key}"):
        return tool.active_measure(request, sender_addrs=site.isps, receiver_addrs=dict(addrs),
                                   port=node["port"], binary=binaries(settings).get(tool.name),
                                   wait_report=dict)


@dataclass
class SiteProber:
    """The `Prober` of a worker at a real site: the CCs its own kernel offers (a campaign's
    probes are run by `active_side`, not by `measure`)."""

    site: LocalSite

    def available_ccs(self) -> set[str]:
        return set(available_congestion_controls(None))

    def measure(self, request: MeasurementRequest) -> MeasurementResult:
        raise ProbeError("a real site's probe runs two-sided (flows.campaign.twosided.active_side)")

"""A path that dies under an applied answer: the site's failover watcher promotes the standby
and the topology is recalibrated at once (a `path_changed` campaign with its schedule's
parameters, the event naming what failed), whose answer the re-apply then takes up."""

from __future__ import annotations

import subprocess

import pytest
from sqlalchemy import select

from models import Campaign
from models.history import RecalibrationEvent
from service.db import session_scope
from service.flows.applying import apply as apply_flow
from service.flows.applying import failover_watch
from service.settings import get_settings
from service.state import state_of
from service.store import applied, schedules
from service.store.inventory import ensure_topology
from tests.apply import livebed
from tests.apply.measured import measured_answer
from tests.support import wait_for

pytestmark = pytest.mark.netns


def _kinds(apply_id: int) -> list[str]:
    with session_scope() as s:
        return [e["kind"] for e in applied.get_apply(s, apply_id=apply_id).events]


def _recalibration(topology_id: int):
    with session_scope() as s:
        c = s.scalar(select(Campaign).where(Campaign.topology_id == topology_id,
                                            Campaign.reason == "path_changed"))
        if c is None:
            return None
        return c.id, [(e.kind, e.before, e.after) for e in s.scalars(select(
            RecalibrationEvent).where(RecalibrationEvent.campaign_id == c.id))]


def test_a_failover_queues_a_recalibration(bed, embedded_default, monkeypatch):
    monkeypatch.setenv("MPCOA_TESTBED", bed.name)
    get_settings.cache_clear()
    with session_scope() as s:
        tid = ensure_topology(s, spec=livebed.topology()).id
        measured_answer(s, tid, outputs={"subflows_used": ["U-C", "U-D"],
                                         "standby_subflows": ["K-C", "K-D"]})
        schedules.set_schedule(s, topology_id=tid, cron="0 3 * * *",
                               parameters={"ccs": ["reno"], "runs": 1})
        first = apply_flow.start_apply(s, topology_id=tid, confirm=False, watch=True,
                                       hold_s=2, auto_reapply=True).id
    core_dev = next(lk.core_dev for lk in bed.site_links("A") if lk.label == "U")
    try:
        apply_flow.run_apply(first, watch_here=True)
        wait_for(lambda: "watching" in _kinds(first), 30, "the watcher")
        assert _recalibration(tid) is None
        subprocess.run(["ip", "-n", bed.core_ns, "link", "set", core_dev, "down"], check=True)
        campaign_id, events = wait_for(lambda: _recalibration(tid), 30,
                                       "the recalibration a failover queues")
        assert "failover" in _kinds(first)
        ((kind, before, after),) = events
        assert kind == "path_changed" and before == 1
        assert after["site"] == "A" and after["endpoint"] == 1 and after["promoted"] == 2
        with session_scope() as s:
            c = s.get(Campaign, campaign_id)
            assert (c.ccs, c.runs, c.state) == (["reno"], 1, "queued")
            assert state_of(c).warm is None  # the answer's own path is gone: a full sweep
    finally:
        subprocess.run(["ip", "-n", bed.core_ns, "link", "set", core_dev, "up"], check=False)
        failover_watch.stop_all("the test ends")
        with session_scope() as s:
            apply_flow.start_rollback(s, topology_id=tid)
        apply_flow.run_rollback(first)

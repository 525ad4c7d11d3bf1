"""Re-applying a recalibration's answer on the emulated testbed (SQLite, the embedded default).
A re-apply that fails leaves the sites as they were: an applied answer (auto_reapply), then a
recalibration whose answer promises more than the path gives; its re-apply goes through the same
apply and confirmation, misses, and the sites are back on the first apply's values; the history
says so; the first apply rolls back to before any. Switched off or not asked: nothing. A
re-apply nobody started (its process died) is started by the scheduler's next tick, once."""

from __future__ import annotations

import pytest

from models import utcnow
from probes.site import config as sc
from service.db import session_scope
from service.flows.applying import apply as apply_flow
from service.flows.scheduling import reapply
from service.settings import get_settings
from service.store import applied, campaigns, schedules
from service.store.inventory import ensure_topology
from tests.apply import livebed
from tests.apply.measured import measured_answer
from tests.apply.sitestate import holds
from tests.support import wait_for

pytestmark = pytest.mark.netns
USED = {"subflows_used": ["U-C", "U-D"], "standby_subflows": ["K-C", "K-D"]}


def _values(bed):
    return {site: (st["endpoints"], st["limits"], st["sysctls"])
            for site in livebed.SITES for st in [sc.read_state(bed.ns(site))]}


def _settled(apply_id):
    with session_scope() as s:
        row = applied.get_apply(s, apply_id=apply_id)
        return row if row.state not in apply_flow.BUSY and row.action is None else None


def test_a_failing_reapply_leaves_the_sites_as_they_were(bed, embedded_default, monkeypatch):
    monkeypatch.setenv("MPCOA_TESTBED", bed.name)
    get_settings.cache_clear()
    settings = get_settings()
    before = _values(bed)
    with session_scope() as s:
        tid = ensure_topology(s, spec=livebed.topology()).id
        measured_answer(s, tid, otp_mbps=2.0, outputs=USED)  # U's 8 Mbit/s keep that
        row = apply_flow.start_apply(s, topology_id=tid, confirm=True, seconds=5, watch=False,
                                     auto_reapply=True)
        first = row.id
    apply_flow.run_apply(first, watch_here=False)
    assert _settled(first).state == "applied", _settled(first).error
    held = _values(bed)
    assert held != before

    # a recalibration answers: U and K to C at 1 MiB, promising 40 Mbit/s (the path gives ~12)
    with session_scope() as s:
        rec = measured_answer(s, tid, obs_mib=1.0, otp_mbps=40.0,
                              outputs={"subflows_used": ["U-C", "K-C"],
                                       "standby_subflows": ["U-D", "K-D"]})
        campaign = campaigns.get_campaign(s, campaign_id=rec.campaign_id)
        campaign.reason, campaign.finished_at = "scheduled", utcnow()
        recal = campaign.id
    with session_scope() as s:
        started = reapply.reapply_due(s, settings=settings)
    assert [plan["reapply"] for _id, plan in started] == [
        {"campaign_id": recal, "previous_apply_id": first}]
    reapply.dispatch_all(started, settings)
    (second, _plan), = started
    row = wait_for(lambda: _settled(second), 120, "the re-apply")
    assert row.state == "unconfirmed" and row.confirmation["passed"] is False, row.error
    assert _values(bed) == held  # the first apply's values, none of the second's

    with session_scope() as s:
        entry = next(h for h in schedules.calibration_history(s, topology_id=tid)
                     if h["campaign_id"] == recal)
        assert entry["reapply"]["apply_id"] == second
        assert entry["reapply"]["state"] == "unconfirmed"
        assert reapply.reapply_due(s, settings=settings) == []  # once per recalibration

    with session_scope() as s:
        back = apply_flow.start_rollback(s, topology_id=tid)
        assert back.id == first  # the apply in force: the failed re-apply never was
    apply_flow.run_rollback(first)
    assert _settled(first).state == "rolled_back"
    assert _values(bed) == before


def _apply_then_recalibrate(bed, auto_reapply: bool) -> int:
    """An apply in force, then a scheduled recalibration's new answer; the apply's id."""
    with session_scope() as s:
        tid = ensure_topology(s, spec=livebed.topology()).id
        measured_answer(s, tid, outputs=USED)
        first = apply_flow.start_apply(s, topology_id=tid, confirm=False, watch=False,
                                       auto_reapply=auto_reapply).id
    apply_flow.run_apply(first, watch_here=False)
    assert _settled(first).state == "applied"
    with session_scope() as s:
        rec = measured_answer(s, tid, obs_mib=1.0, outputs=USED)
        campaign = campaigns.get_campaign(s, campaign_id=rec.campaign_id)
        campaign.reason, campaign.finished_at = "scheduled", utcnow()
    return first


def _roll_back(first: int) -> None:
    """Roll back the apply in force of `first`'s topology (itself, or a re-apply of it)."""
    with session_scope() as s:
        tid = applied.get_apply(s, apply_id=first).topology_id
        in_force = apply_flow.start_rollback(s, topology_id=tid).id
    apply_flow.run_rollback(in_force)
    assert _settled(in_force).state == "rolled_back"


@pytest.mark.parametrize(("setting", "asked"), [("false", True), ("true", False)])
def test_no_reapply_when_switched_off_or_not_asked(bed, embedded_default, monkeypatch,
                                                   setting, asked):
    """MPCOA_REAPPLY_ON_RECALIBRATION false, or an apply without auto_reapply: a
    recalibration's answer waits for an operator."""
    monkeypatch.setenv("MPCOA_TESTBED", bed.name)
    monkeypatch.setenv("MPCOA_REAPPLY_ON_RECALIBRATION", setting)
    get_settings.cache_clear()
    first = _apply_then_recalibrate(bed, auto_reapply=asked)
    try:
        with session_scope() as s:
            assert reapply.reapply_due(s, settings=get_settings()) == []
            assert applied.latest_apply(s, topology_id=applied.get_apply(
                s, apply_id=first).topology_id).id == first
    finally:
        _roll_back(first)


def test_the_scheduler_tick_starts_a_reapply_nobody_started(bed, embedded_default, monkeypatch):
    """The process that finished the recalibration died before re-applying: the embedded
    scheduler's next tick starts it, once."""
    from service.db import get_engine
    from service.flows.scheduling import embedded_scheduler

    monkeypatch.setenv("MPCOA_TESTBED", bed.name)
    get_settings.cache_clear()
    settings = get_settings()
    first = _apply_then_recalibrate(bed, auto_reapply=True)
    engine = get_engine(settings)
    holder = embedded_scheduler.holder_id()
    try:
        tick = embedded_scheduler.tick(settings=settings, engine=engine, holder=holder)
        assert tick.leader and len(tick.reapplied) == 1
        (second,) = tick.reapplied
        row = wait_for(lambda: _settled(second), 60, "the re-apply")
        assert row.state == "applied" and row.plan["reapply"]["previous_apply_id"] == first
        for site in row.plan["sites"]:
            assert holds(sc.read_state(site["namespace"]), site["target"]), site["site"]
        again = embedded_scheduler.tick(settings=settings, engine=engine, holder=holder)
        assert again.reapplied == []
    finally:
        _roll_back(first)

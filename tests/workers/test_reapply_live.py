"""Recalibration when the path changes, for real: a topology calibrated on the emulated testbed
and applied with auto_reapply; one ISP's uplink stepped down for good; the scheduled warm
recalibration notices the drift, sweeps again, answers, and its answer is applied through the
apply plan by the hook the in-process executor is installed with
(`scheduling.reapply.after_finish`, as the API process installs it). The sites then hold the
new plan; a rollback puts every value back as before the first apply. The times from the step
to the new answer and to its application are printed (benchmarks/recalibration_time.py measures
them)."""

from __future__ import annotations

from datetime import timedelta
from functools import partial

import pytest

from probes.site import apply as siteapply
from probes.site import config as sc
from probes.testbed import capacity
from service.algorithm.topology import TopologySpec
from service.db import session_scope
from service.flows.applying import apply as apply_flow
from service.flows.campaign.dispatch import start_campaign
from service.flows.campaign.plan import CampaignParameters
from service.flows.campaign.runner import InProcessExecutor, run_campaign
from service.flows.scheduling import reapply
from service.flows.scheduling.recalibration import queue_due_campaigns
from service.settings import get_settings
from service.state import state_of
from service.store import applied, campaigns, schedules
from service.store.inventory import ensure_topology
from tests.apply.sitestate import holds
from tests.support import wait_for

from .conftest import topology_body

pytestmark = [pytest.mark.netns, pytest.mark.postgres]

# small and short: one CC, three buffers, one run of 2 s each (production code, these
# parameters); reno: the host lets namespaces use it. The budget covers the paper's procedure
# once (impact: 1 + 2 subflows; buffers: 2 PMs x 3) and the warm check's probes, no extra
# rounds: the flow is under test, not the figures
PARAMS = {"ccs": ["reno"], "buffer_grid_mib": [0.0625, 0.125, 0.25], "runs": 1,
          "duration_s": 2, "mode": "grid", "probe_tool": "iperf3",
          "probe_seconds_budget": (3 + 6 + 3) * 2}


@pytest.fixture
def flows_on(committed_db, testbed, tmp_path, monkeypatch):
    """The flows' default engine on the committed PostgreSQL database, this test's testbed
    probed and applied, the appliers' journals under tmp_path."""
    monkeypatch.setenv("MPCOA_DATABASE_URL", committed_db)
    monkeypatch.setenv("MPCOA_TESTBED", testbed.name)
    monkeypatch.setattr(siteapply, "STATE_ROOT", tmp_path / "apply")
    get_settings.cache_clear()
    try:
        yield get_settings()
    finally:
        get_settings.cache_clear()


def _values(testbed, site):
    st = sc.read_state(testbed.ns(site))
    return st["endpoints"], st["limits"], st["sysctls"]


def _settled(apply_id):
    with session_scope() as s:
        row = applied.get_apply(s, apply_id=apply_id)
        return row if row.state not in apply_flow.BUSY and row.action is None else None


def test_a_lasting_capacity_step_is_recalibrated_and_reapplied(sites, testbed, flows_on):
    settings = flows_on
    local, _remote = sites
    host = sc.read_state(None)
    original = {s: _values(testbed, s) for s in sites}
    with session_scope() as s:
        tid = ensure_topology(s, spec=TopologySpec.model_validate(topology_body(*sites))).id
        first = start_campaign(s, topology_id=tid, params=CampaignParameters(**PARAMS),
                               reason="manual", settings=settings).id
    assert run_campaign(first, settings=settings) == "done"

    with session_scope() as s:
        row = apply_flow.start_apply(s, topology_id=tid, confirm=False, watch=False,
                                     auto_reapply=True)
        first_apply, plan = row.id, row.plan
    apply_flow.dispatch(first_apply, plan, "apply", settings)
    row = wait_for(lambda: _settled(first_apply), 120, "the first apply")
    assert row.state == "applied", (row.state, row.error)

    # the schedule that recalibrates it; the step: F's uplink from 12 to 3 Mbit/s, for good
    with session_scope() as s:
        sched = schedules.set_schedule(s, topology_id=tid, cron="*/5 * * * *",
                                       parameters=PARAMS)
        due_at = schedules.next_run(sched) + timedelta(seconds=1)
    stepped = capacity.set_capacity(testbed, local, "F", up_kbps=3000, down_kbps=12000)
    assert any(c["isp"] == "F" and c["up_kbps"] == 3000
               for c in testbed.status()["capacity_set"])

    with session_scope() as s:
        (recal,) = queue_due_campaigns(s, settings=settings, now=due_at)
    # runs it, then its hook re-applies the answer (the API process's: `api.app`)
    executor = InProcessExecutor(settings, partial(reapply.after_finish, settings=settings))
    try:
        executor.submit(recal)

        def reapplied():
            with session_scope() as s:
                rows = applied.list_applies(s, topology_id=tid, limit=5)
                new = [r for r in rows if (r.plan.get("reapply") or {}).get("campaign_id")
                       == recal]
                return new[0].id if new and _settled(new[0].id) else None

        second_apply = wait_for(reapplied, 420, "the recalibration's re-apply", interval=1)
    finally:
        executor.stop()
        executor.join(30)

    with session_scope() as s:
        campaign = campaigns.get_campaign(s, campaign_id=recal)
        assert campaign.state == "done" and state_of(campaign).warm.verdict == "warm_drifted"
        entry = next(h for h in schedules.calibration_history(s, topology_id=tid)
                     if h["campaign_id"] == recal)
        row = applied.get_apply(s, apply_id=second_apply)
        assert row.state == "applied", (row.state, row.error)
        assert row.recommendation_id == campaign.recommendation_id
        assert row.plan["reapply"] == {"campaign_id": recal, "previous_apply_id": first_apply}
        assert row.plan["measured"]["measured"] and row.plan["auto_reapply"]
        new_plan = row.plan
    assert entry["reapply"]["apply_id"] == second_apply and entry["reapply"]["state"] == "applied"
    # the sites hold the new plan, every value it sets
    for site in new_plan["sites"]:
        assert holds(sc.read_state(site["namespace"]), site["target"]), site["site"]
    change = stepped["at"]
    noticed, answered = entry["noticed_at"].timestamp(), entry["finished_at"].timestamp()
    done = entry["reapply"]["finished_at"].timestamp()
    assert change < noticed <= answered <= done
    print(f"step -> drift noticed {noticed - change:.1f} s, -> new answer "
          f"{answered - change:.1f} s, -> applied {done - change:.1f} s")

    with session_scope() as s:
        back = apply_flow.start_rollback(s, topology_id=tid)
        assert back.id == second_apply
    apply_flow.dispatch(second_apply, new_plan, "rollback", settings)
    row = wait_for(lambda: _settled(second_apply), 120, "the rollback")
    assert row.state == "rolled_back", (row.state, row.error)
    assert {s: _values(testbed, s) for s in sites} == original
    after = sc.read_state(None)
    assert (after["sysctls"], after["endpoints"], after["limits"]) == \
        (host["sysctls"], host["endpoints"], host["limits"])

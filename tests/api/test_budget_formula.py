"""The budget's one formula per figure, on campaign rows that need no database: the plan per
phase as the campaign's columns change, what a warm campaign plans before and after its verdict,
and remaining_s, progress and affords."""

from __future__ import annotations

from dataclasses import replace

from models import Campaign, Subflow, Topology
from service.flows.campaign import budget
from service.state import CampaignState, Warm, put_state, state_of
from service.state.selected import sweep_arms


def _campaign(state: CampaignState | None = None, **columns) -> Campaign:
    base = dict(
        state="running", ccs=["reno", "cubic"], pms=["PCDC", "FullMesh"],
        buffer_grid_mib=[0.1, 0.2, 0.4], runs=2, duration_s=5.0, mode="grid",
        active_ccs=None, impact_runs=None,
    )
    c = Campaign(**{**base, **columns})
    put_state(c, state or CampaignState())
    return c


def test_the_plan_follows_the_columns():
    c = _campaign()
    # impact: 2 CCs x 2 runs x (TP_0 + 3 TP_i); sweep: 2 PMs x 2 CCs x 3 buffers x 2 runs
    assert budget.planned(c, 3) == {"warm": 0, "impact": 16, "selection": 0,
                                    "sweep": 24, "autotune": 0}
    c.active_ccs, c.impact_runs = ["reno"], 2
    put_state(c, state_of(c).with_budget(extra_impact_runs={"reno": 1}))
    c.buffer_grid_mib = [0.1, 0.2, 0.4, 0.8]  # the grid grew
    c.runs = 3  # the quality gate asked for another round
    assert budget.planned(c, 3) == {"warm": 0, "impact": 12, "selection": 0,
                                    "sweep": 24, "autotune": 0}


def test_an_adaptive_sweep_plans_an_estimate_then_what_it_asks():
    c = _campaign(mode="adaptive", buffer_grid_mib=[0.1 * 2**k for k in range(8)])
    # 4 arms x 2 runs x (1 + log2 8) steps
    assert budget.planned(c, 3)["sweep"] == 4 * 2 * 4
    put_state(c, state_of(c).with_budget(asked={"sweep": 40, "autotune": 0}))
    assert budget.planned(c, 3)["sweep"] == 40


def test_an_adaptive_campaign_plans_the_autotuning_ceilings_bisection():
    c = _campaign(mode="adaptive", buffer_grid_mib=[0.1 * 2**k for k in range(8)])
    # 2 x the grid below the testbed's 64 MiB, and 64 MiB: 8 candidates, the top first, then
    # a bisection of at most log2(8) points, 2 runs each
    assert len(budget.autotune_ceilings(c.buffer_grid_mib)) == 8
    assert budget.planned(c, 3)["autotune"] == 2 * (1 + 3)
    put_state(c, state_of(c).with_budget(asked={"autotune": 9}))
    assert budget.planned(c, 3)["autotune"] == 9


def test_an_adaptive_sweep_measures_pcdc_on_every_subflow_once_as_fullmesh():
    """A CC whose selection kept every subflow has no PCDC arm of its own in the sweep: the probe
    would be FullMesh's. The plan counts the arms that are swept."""
    c = _campaign(mode="adaptive", buffer_grid_mib=[0.1 * 2**k for k in range(8)])
    c.topology = Topology(subflows=[Subflow(name=n, bandwidth_kbps=1e3) for n in ("A-X", "B-X")])
    assert len(sweep_arms(c)) == 4  # no selection yet: every PM x CC
    put_state(c, replace(state_of(c), selection={"done": True, "ccs": {
        "reno": {"subset": ["A-X", "B-X"], "usable": True},
        "cubic": {"subset": ["A-X"], "usable": True},
    }}))
    assert sweep_arms(c) == [("PCDC", "cubic"), ("FullMesh", "reno"), ("FullMesh", "cubic")]
    assert budget.planned(c, 2)["sweep"] == 3 * 2 * 4
    c.mode = "grid"  # the paper's procedure sweeps every arm
    assert len(sweep_arms(c)) == 4
    c.mode, c.pms = "adaptive", ["PCDC"]  # without FullMesh, PCDC on every subflow is swept
    assert sweep_arms(c) == [("PCDC", "reno"), ("PCDC", "cubic")]


def test_a_warm_campaign_plans_its_checks_until_they_drifted():
    c = _campaign(CampaignState(warm=Warm(probes=6)))
    assert budget.planned(c, 3) == {"warm": 6, "impact": 0, "selection": 0,
                                    "sweep": 0, "autotune": 0}
    put_state(c, replace(state_of(c), warm=Warm(probes=6, verdict="warm_drifted")))
    assert budget.planned(c, 3) == {"warm": 6, "impact": 16, "selection": 0,
                                    "sweep": 24, "autotune": 0}


def test_remaining_progress_and_affords():
    c = _campaign(CampaignState().with_budget(planned=10, done=4, cap_s=30.0, used_s=20.0))
    assert budget.remaining_s(c) == 6 * 5.0 and budget.progress(c) == 0.4
    assert budget.affords(c, 2) and not budget.affords(c, 3)
    assert not budget.affords(c, 1, reserve_s=6.0)
    # the estimate spent, the campaign still active: one probe at least
    put_state(c, state_of(c).with_budget(done=10))
    assert budget.remaining_s(c) == 5.0 and budget.progress(c) == 1.0
    c.state = "done"
    assert budget.remaining_s(c) == 0.0
    assert budget.left_s(_campaign()) is None and budget.affords(_campaign(), 10**6)

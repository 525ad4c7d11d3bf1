"""What a plan writes for the buffer: the answer's OBS, never above the largest buffer its
campaign measured nor the configured ceiling; the plan says which bound lowered it and why."""

from __future__ import annotations

from service.flows.applying import site_plan as ap

from .test_plan import _plan

MIB = 2**20


def _site_values(plan):
    sender = plan.sites[0]
    return (sender.socket_buffer_bytes, sender.buffer_max_bytes,
            sender.host_minimums["net.core.rmem_max"])


def test_an_answer_within_its_bounds_is_written_as_it_is():
    plan = _plan(obs_mib=2.0, caps_mib={"largest_measured": 4.0, "ceiling": 128.0})
    assert _site_values(plan) == (2 * MIB, 4 * MIB, 2 * MIB)
    assert plan.buffer["capped_by"] is None and plan.buffer["why"] is None
    assert not [n for n in plan.notes if n.startswith("buffer_capped")]


def test_an_imported_answer_of_a_million_mib_is_planned_at_what_was_measured():
    # before: rmem_max 1 GiB and a tcp_rmem maximum of 2 GiB
    plan = _plan(obs_mib=1e6, caps_mib={"largest_measured": 30.0, "ceiling": 128.0})
    assert _site_values(plan) == (30 * MIB, 60 * MIB, 30 * MIB)
    assert plan.buffer["answer_bytes"] == round(1e6 * MIB)
    assert plan.buffer["capped_by"] == "largest_measured"
    assert "no probe of the answer's campaign ran above" in plan.buffer["why"]
    assert f"buffer_capped:largest_measured={30 * MIB}" in plan.notes
    for site in plan.sites:
        target = ap.desired_state(site, {"sysctls": {"net.ipv4.tcp_rmem": "4096 131072 6291456"}})
        assert target["sysctls"]["net.ipv4.tcp_rmem"] == f"4096 131072 {60 * MIB}"
        assert target["host_minimums"] == {"net.core.rmem_max": 30 * MIB,
                                           "net.core.wmem_max": 30 * MIB}


def test_the_ceiling_bounds_what_the_campaign_measured_too():
    plan = _plan(obs_mib=1e6, caps_mib={"largest_measured": 512.0, "ceiling": 128.0})
    assert _site_values(plan) == (128 * MIB, 256 * MIB, 128 * MIB)
    assert plan.buffer["capped_by"] == "ceiling"
    assert "MPCOA_APPLY_BUFFER_CEILING_MIB" in plan.buffer["why"]


def test_without_bounds_a_c_int_still_holds_twice_the_buffer():
    plan = _plan(obs_mib=1e6)
    sock, autotune, _ = _site_values(plan)
    assert sock == ap.INT_MAX // 2 and autotune <= ap.INT_MAX
    assert plan.buffer["capped_by"] == "kernel_int"


def test_no_buffer_in_the_answer_writes_none():
    plan = _plan(obs_mib=None, caps_mib={"ceiling": 128.0})
    assert plan.sites[0].socket_buffer_bytes is None and plan.sites[0].host_minimums == {}
    assert "no_buffer_in_answer" in plan.notes and plan.buffer["planned_bytes"] is None

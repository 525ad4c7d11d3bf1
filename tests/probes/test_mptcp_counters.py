"""The MPTCP health counters read from /proc/net/netstat text, their rise across a probe, what
a rise says about a fallback, `ip mptcp limits` and the health verdicts; the gate's decision."""

from __future__ import annotations

import pytest

from probes.site.mptcp_health import judge, parse_limits, subflow_warning
from probes.tools.mptcp_counters import (
    delta,
    fallback_causes,
    health_counters,
    parse_netstat,
)
from service.flows.campaign.mptcp_gate import refusal

# the shape of this kernel's (6.18) file, cut down: TcpExt first, MPTcpExt after
NETSTAT = (
    "TcpExt: SyncookiesSent SyncookiesRecv\n"
    "TcpExt: 0 0\n"
    "MPTcpExt: MPCapableSYNRX MPCapableSYNTX MPCapableFallbackACK MPCapableSYNTXDrop "
    "MPCapableSYNTXDisabled SubflowStale Blackhole\n"
    "MPTcpExt: 4 3 0 1 2 0 1\n"
)


def test_netstat_mptcp_counters_by_name():
    counters = parse_netstat(NETSTAT)
    assert counters["MPCapableSYNTX"] == 3 and counters["Blackhole"] == 1
    assert "SyncookiesSent" not in counters
    # only the health counters this kernel has, in their order; absent names stay absent
    kept = health_counters(counters)
    assert list(kept) == ["MPCapableSYNTX", "MPCapableFallbackACK", "MPCapableSYNTXDrop",
                          "MPCapableSYNTXDisabled", "Blackhole", "SubflowStale"]
    assert "SubflowRecover" not in kept


def test_a_kernel_without_mptcp_has_no_counters_and_a_cut_file_is_refused():
    assert parse_netstat("TcpExt: A\nTcpExt: 1\n") == {}
    with pytest.raises(ValueError, match="malformed"):
        parse_netstat("MPTcpExt: A B\nMPTcpExt: 1\n")
    with pytest.raises(ValueError, match="integer"):
        parse_netstat("MPTcpExt: A\nMPTcpExt: x\n")


def test_the_rise_across_a_probe():
    before = {"MPCapableSYNTX": 3, "Blackhole": 1, "SubflowStale": 5, "Unrelated": 1}
    after = {"MPCapableSYNTX": 5, "Blackhole": 1, "SubflowStale": 2, "Unrelated": 9}
    # a counter that went down (the namespace made anew) counts from 0; others are ignored
    assert delta(before, after) == {"MPCapableSYNTX": 2, "Blackhole": 0, "SubflowStale": 2}
    assert delta({}, after) == {}


def test_a_fallback_is_explained_by_what_rose_the_lockout_first():
    causes = fallback_causes({"MPCapableSYNTXDrop": 1, "MPCapableSYNTXDisabled": 2,
                              "Blackhole": 1, "SubflowStale": 3})
    assert causes[0].startswith("MPTCP disabled by the kernel's blackhole lockout")
    assert causes[0].endswith("(MPCapableSYNTXDisabled +2)")
    assert any("MP_CAPABLE were dropped" in c for c in causes)
    assert not any("SubflowStale" in c for c in causes)  # not a fallback
    assert fallback_causes({"MPCapableFallbackSYNACK": 0}) == []


def test_limits_and_verdicts():
    assert parse_limits("add_addr_accepted 2 subflows 8 \n") == {"add_addr_accepted": 2,
                                                                 "subflows": 8}
    settings = {"net.mptcp.enabled": "1", "net.mptcp.allow_join_initial_addr_port": "0",
                "net.mptcp.blackhole_timeout": "3600"}
    problems, warnings = judge(settings, {"subflows": 2}, lockout=True)
    assert len(problems) == 1 and "blackhole lockout in force" in problems[0]
    assert "blackhole_timeout=3600" in problems[0]
    assert len(warnings) == 1 and "allow_join_initial_addr_port=0" in warnings[0]
    problems, warnings = judge({"net.mptcp.enabled": "0"}, {}, lockout=None)
    assert problems == ["MPTCP disabled: net.mptcp.enabled is 0"] and warnings == []


def test_more_subflows_than_the_kernel_allows_warns():
    assert subflow_warning(3, 3) is None  # 9 subflows: the first and 8 more
    too_many = subflow_warning(2, 5)
    assert too_many is not None and "10 subflows" in too_many


def _health(in_force):
    return {"lockout": {"in_force": in_force, "blackhole_timeout_s": 3600}}


def test_the_gate_refuses_a_lockout_naming_the_site():
    why = refusal({"A": _health(True), "B": _health(False)}, [], limit=3)
    assert why is not None and "site 'A'" in why and "lockout in force" in why
    assert "'B'" not in why
    assert refusal({"A": _health(False), "B": None}, [], limit=3) is None


def test_the_gate_refuses_after_n_fallbacks_in_a_row():
    streak = ["MPTCP connection fell back to TCP: SYNs carrying MP_CAPABLE were dropped"] * 3
    why = refusal({"A": None, "B": None}, streak, limit=3)
    assert why is not None and "last 3 probes fell back" in why and "dropped" in why
    assert refusal({}, streak[:2], limit=3) is None
    assert refusal({}, streak, limit=0) is None  # 0: fallbacks never refuse

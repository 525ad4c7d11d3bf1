"""An apply never lowers a site's buffer ceilings unless the operator asks (`lower_ceilings`),
and the plan says which buffer regime each value serves."""

from __future__ import annotations

from service.flows.applying import site_plan as ap

from .test_plan import CURRENT, _plan

MIB = 2**20


def _by_key(site, current):
    return {c["key"]: c for c in ap.changes(site, current)}


def _with(rmem: str, wmem: str, rmem_max: str = "212992") -> dict:
    return {**CURRENT, "sysctls": {**CURRENT["sysctls"], "net.ipv4.tcp_rmem": rmem,
                                   "net.ipv4.tcp_wmem": wmem, "net.core.rmem_max": rmem_max}}


def test_a_higher_ceiling_the_site_has_is_kept():
    high = _with(f"4096 131072 {64 * MIB}", f"4096 16384 {64 * MIB}", str(64 * MIB))
    sender = _plan(obs_mib=1.0).sites[0]  # plans an autotuning ceiling of 2 MiB
    by_key = _by_key(sender, high)
    for key in ("net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem"):
        assert by_key[key]["after"].split()[2] == str(64 * MIB), by_key[key]
        assert by_key[key]["action"] == "none" and by_key[key]["planned"] == 2 * MIB
        assert by_key[key]["regime"] == ap.REGIME_AUTOTUNE and "lower_ceilings" in by_key[key][
            "kept"]
    # net.core.rmem_max is only ever raised, asked or not: it caps every setsockopt of the host
    assert by_key["net.core.rmem_max"]["after"] == str(64 * MIB)
    assert by_key["net.core.rmem_max"]["action"] == "none"
    assert by_key["net.core.rmem_max"]["regime"] == ap.REGIME_LOCKED
    target = ap.desired_state(sender, high)
    assert target["sysctls"]["net.ipv4.tcp_rmem"] == f"4096 131072 {64 * MIB}"


def test_a_lower_ceiling_is_raised_to_the_planned_one():
    low = _with("4096 131072 1048576", "4096 16384 1048576")
    by_key = _by_key(_plan(obs_mib=1.0).sites[0], low)
    assert by_key["net.ipv4.tcp_rmem"]["after"] == f"4096 131072 {2 * MIB}"
    assert by_key["net.ipv4.tcp_rmem"]["action"] == "set" and "kept" not in by_key[
        "net.ipv4.tcp_rmem"]
    assert by_key["net.ipv4.tcp_wmem"]["after"] == f"4096 16384 {2 * MIB}"


def test_asked_the_ceiling_is_set_exactly_even_below_the_sites():
    high = _with(f"4096 {8 * MIB} {64 * MIB}", f"4096 16384 {64 * MIB}", str(64 * MIB))
    plan = _plan(obs_mib=1.0, lower_ceilings=True)
    sender = plan.sites[0]
    by_key = _by_key(sender, high)
    # the default is kept below the new maximum
    assert by_key["net.ipv4.tcp_rmem"]["after"] == f"4096 {2 * MIB} {2 * MIB}"
    assert by_key["net.ipv4.tcp_wmem"]["after"] == f"4096 16384 {2 * MIB}"
    assert by_key["net.ipv4.tcp_rmem"]["action"] == "set" and "kept" not in by_key[
        "net.ipv4.tcp_rmem"]
    assert by_key["net.core.rmem_max"]["action"] == "none"  # still never lowered
    assert plan.buffer["regimes"]["autotune_max_bytes"]["lower_ceilings"] is True


def test_an_unreadable_site_value_is_planned_as_the_ceiling():
    by_key = _by_key(_plan(obs_mib=1.0).sites[0], _with("garbage", ""))
    assert by_key["net.ipv4.tcp_rmem"]["after"] == f"4096 131072 {2 * MIB}"


def test_the_plan_names_the_regime_of_each_buffer_value():
    plan = _plan(obs_mib=1.5)
    regimes = plan.buffer["regimes"]
    assert regimes["socket_buffer_bytes"] == {
        "bytes": round(1.5 * MIB), "regime": ap.REGIME_LOCKED,
        "for": "applications that call setsockopt"}
    assert regimes["autotune_max_bytes"]["regime"] == ap.REGIME_AUTOTUNE
    assert regimes["autotune_max_bytes"]["bytes"] == 3 * MIB
    by_key = _by_key(plan.sites[0], CURRENT)
    assert by_key["SO_SNDBUF/SO_RCVBUF"]["regime"] == ap.REGIME_LOCKED
    assert by_key["net.core.wmem_max"]["regime"] == ap.REGIME_LOCKED
    assert {by_key[k]["regime"] for k in ("net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem")} == {
        ap.REGIME_AUTOTUNE}


def test_the_measured_autotuning_ceiling_is_what_the_apply_writes():
    plan = _plan(obs_mib=1.0, autotune_max_mib=12.0)
    sender = plan.sites[0]
    # tcp_rmem/tcp_wmem max: the ceiling measured autotuned, not 2 x OBS
    assert sender.buffer_max_bytes == 12 * MIB
    # OBS stays the locked socket buffer, and what net.core.*mem_max must allow
    assert sender.socket_buffer_bytes == MIB
    assert sender.host_minimums == {"net.core.rmem_max": MIB, "net.core.wmem_max": MIB}
    regime = plan.buffer["regimes"]["autotune_max_bytes"]
    assert regime["bytes"] == 12 * MIB and regime["from"] == "autotune_max_mib"
    assert "autotune_ceiling_unmeasured" not in plan.notes
    by_key = _by_key(sender, _with("4096 131072 6291456", "4096 16384 4194304"))
    assert by_key["net.ipv4.tcp_rmem"]["after"] == f"4096 131072 {12 * MIB}"
    # never lowered: a site above the measured ceiling keeps its own unless asked
    high = _with(f"4096 131072 {64 * MIB}", f"4096 16384 {64 * MIB}")
    assert _by_key(sender, high)["net.ipv4.tcp_rmem"]["after"].split()[2] == str(64 * MIB)
    asked = _plan(obs_mib=1.0, autotune_max_mib=12.0, lower_ceilings=True).sites[0]
    assert _by_key(asked, high)["net.ipv4.tcp_rmem"]["after"].split()[2] == str(12 * MIB)


def test_without_a_measured_ceiling_the_plan_says_so():
    plan = _plan(obs_mib=1.0)
    assert "autotune_ceiling_unmeasured" in plan.notes
    assert plan.buffer["regimes"]["autotune_max_bytes"]["from"] == "2 x OBS"
    assert plan.sites[0].buffer_max_bytes == 2 * MIB

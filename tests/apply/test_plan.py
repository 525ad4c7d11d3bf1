"""The apply planner: an answer turned into endpoints, limits and sysctls per site (pure)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from service.algorithm.topology import TopologySpec
from service.flows.applying import site_plan as ap
from service.flows.applying.endpoint_ids import endpoint_ids


def _spec(local=("U", "K"), remote=("C", "D")) -> TopologySpec:
    def site(name, labels):
        return {"name": name, "isps": [{"name": f"isp{lb}", "label": lb, "down_kbps": 1000.0,
                                        "up_kbps": 1000.0} for lb in labels]}
    return TopologySpec.model_validate({"local": site("A", local), "remote": site("B", remote)})


LOCAL = {"U": "10.1.0.1", "K": "10.1.1.1", "T": "10.1.2.1"}
REMOTE = {"C": "10.2.0.1", "D": "10.2.1.1", "E": "10.2.2.1"}


def _plan(spec=None, **kw):
    args = {"opm": "PCDC", "occ": "cubic", "obs_mib": 1.0, "subflows_used": [],
            "standby_subflows": [], "local_addrs": LOCAL, "remote_addrs": REMOTE,
            "builtin_ccs": {"reno", "cubic", "bbr"}, "bpf_ccs": {"hybla", "olia"}}
    args.update(kw)
    return ap.plan_sites(spec or _spec(), **args)


def test_fullmesh_uses_every_subflow_and_announces_the_other_addresses():
    plan = _plan(opm="FullMesh", subflows_used=["U-C"])
    sender, receiver = plan.sites
    assert plan.used == ["U-C", "U-D", "K-C", "K-D"] and plan.dropped == []
    assert [(e.address, e.flags) for e in sender.endpoints] == [
        ("10.1.0.1", ("subflow", "fullmesh")), ("10.1.1.1", ("subflow", "fullmesh"))]
    # the destination is the connection's first address: only D is announced
    assert [(e.address, e.flags) for e in receiver.endpoints] == [("10.2.1.1", ("signal",))]
    assert plan.connect["source"] == "10.1.0.1" and plan.connect["destination"] == "10.2.0.1"
    assert sender.limits == {"subflows": 3, "add_addr_accepted": 1}
    assert sender.sysctls["net.ipv4.tcp_congestion_control"] == "cubic"
    assert "net.ipv4.tcp_congestion_control" not in receiver.sysctls
    assert sender.socket_buffer_bytes == 2**20 and sender.buffer_max_bytes == 2 * 2**20
    assert sender.host_minimums == {"net.core.rmem_max": 2**20, "net.core.wmem_max": 2**20}


def test_pcdc_product_subset_puts_the_rest_on_backup_in_standby_order():
    plan = _plan(subflows_used=["K-C", "U-C"], standby_subflows=["K-D", "U-D"])
    sender, receiver = plan.sites
    assert plan.used == ["K-C", "U-C"] and plan.dropped == []
    assert plan.standbys == ["K-D", "U-D"]
    assert not any(e.backup for e in sender.endpoints)
    assert [(e.label, e.backup) for e in receiver.endpoints] == [("D", True)]
    assert receiver.standby_endpoints == [2]
    assert plan.connect["source_label"] == "K" and plan.connect["destination_label"] == "C"


def test_a_subset_the_kernel_cannot_express_keeps_the_largest_product_inside_it():
    plan = _plan(subflows_used=["U-C", "U-D", "K-C"])
    assert plan.used == ["U-C", "U-D"] and plan.dropped == ["K-C"]
    assert "in_kernel_per_address:K-C" in plan.notes
    sender = plan.sites[0]
    assert [(e.label, e.backup) for e in sender.endpoints] == [("U", False), ("K", True)]
    assert sender.standby_endpoints == [2]


def test_cc_missing_from_the_kernel_is_loaded_from_its_bpf_port():
    assert _plan(occ="hybla").sites[0].bpf_cc == "hybla"
    assert _plan(occ="cubic").sites[0].bpf_cc is None
    unknown = _plan(occ="nosuchcc")
    assert unknown.sites[0].bpf_cc is None and "cc_unavailable:nosuchcc" in unknown.notes


def test_missing_address_or_unknown_subflow_is_refused():
    import pytest

    with pytest.raises(ValueError, match="no address known for ISP"):
        _plan(local_addrs={"U": "10.1.0.1"})
    with pytest.raises(ValueError, match="not in the topology"):
        _plan(subflows_used=["U-X"])


CURRENT = {
    "endpoints": [{"id": 1, "address": "10.1.0.1", "subflow": True, "fullmesh": True}],
    "limits": {"subflows": 8, "add_addr_accepted": 8},
    "sysctls": {"net.ipv4.tcp_congestion_control": "bbr", "net.mptcp.enabled": "1",
                "net.mptcp.path_manager": "kernel", "net.ipv4.tcp_rmem": "4096 131072 6291456",
                "net.ipv4.tcp_wmem": "4096 16384 4194304", "net.core.rmem_max": "212992",
                "net.core.wmem_max": "67108864",
                "net.ipv4.tcp_allowed_congestion_control": "reno bbr cubic"},
    "available_ccs": ["reno", "cubic", "bbr"],
}


def test_changes_name_the_value_each_setting_replaces():
    sender = _plan(opm="FullMesh").sites[0]
    by_key = {c["key"]: c for c in ap.changes(sender, CURRENT)}
    assert by_key["net.ipv4.tcp_congestion_control"] == {
        "kind": "sysctl", "key": "net.ipv4.tcp_congestion_control", "before": "bbr",
        "after": "cubic", "scope": "netns", "action": "set"}
    # the site's 4 MiB autotuning ceiling is above the planned 2 MiB: kept, not lowered
    assert by_key["net.ipv4.tcp_wmem"]["after"] == "4096 16384 4194304"
    assert by_key["net.ipv4.tcp_wmem"]["action"] == "none" and "kept" in by_key["net.ipv4.tcp_wmem"]
    assert by_key["net.ipv4.tcp_rmem"]["after"] == "4096 131072 6291456"
    assert by_key["id 1"]["action"] == "none"
    assert by_key["id 2"] == {"kind": "endpoint", "key": "id 2", "before": None,
                              "after": "10.1.1.1 id 2 subflow fullmesh", "scope": "netns",
                              "action": "set"}
    # limits only ever rise: 8 already allows the 3 subflows needed
    assert by_key["subflows"]["action"] == "none" and by_key["subflows"]["after"] == 8
    assert by_key["net.core.rmem_max"]["action"] == "needs_host"
    assert by_key["net.core.wmem_max"]["action"] == "none"
    assert by_key["SO_SNDBUF/SO_RCVBUF"]["after"] == 2**20


def test_a_site_in_its_planned_state_needs_nothing():
    for site in _plan(subflows_used=["U-C", "K-C"], occ="cubic").sites:
        want = ap.desired_state(site, CURRENT)
        after = {"endpoints": want["endpoints"], "limits": want["limits"],
                 "sysctls": {**CURRENT["sysctls"], **want["sysctls"],
                             "net.core.rmem_max": str(2**26)},
                 "available_ccs": CURRENT["available_ccs"]}
        acts = {c["action"] for c in ap.changes(site, after)}
        assert acts <= {"none", "advice"}, ap.changes(site, after)


@settings(max_examples=200, deadline=None)
@given(st.sets(st.sampled_from([f"{lo}-{r}" for lo in "UKT" for r in "CDE"]), min_size=1))
def test_used_is_a_product_inside_the_answer_and_never_empty(subset):
    spec = _spec(("U", "K", "T"), ("C", "D", "E"))
    plan = _plan(spec, subflows_used=sorted(subset))
    used = set(plan.used)
    assert used and used <= subset
    ls = {s.split("-")[0] for s in used}
    rs = {s.split("-")[1] for s in used}
    assert used == {f"{lo}-{r}" for lo in ls for r in rs}
    assert set(plan.dropped) == subset - used
    assert set(plan.standbys) == set(spec.subflow_names()) - used
    # carrying data <=> neither end's endpoint is backup (the destination has none)
    sender, receiver = plan.sites
    back_l = {e.label for e in sender.endpoints if e.backup}
    back_r = {e.label for e in receiver.endpoints if e.backup}
    for name in spec.subflow_names():
        lo, r = name.split("-")
        assert (name in used) == (lo not in back_l and r not in back_r)


def test_an_implicit_endpoints_id_is_left_to_it_unless_it_holds_the_same_address():
    # As a host that took MPTCP connections shows them (iproute2 6.1 prints the flag raw):
    # id 1 for the receiver's own D address in IPv4-mapped form, id 2 for an address no ISP has.
    implicit = [{"id": 1, "address": "::ffff:10.2.1.1", "implicit": True},
                {"id": 2, "address": "::ffff:10.9.9.9", "implicit": True}]
    plan = _plan(opm="FullMesh", subflows_used=["U-C"], remote_implicit=implicit,
                 local_implicit=[{"id": 1, "address": "10.7.7.7", "implicit": True}])
    sender, receiver = plan.sites
    assert [(e.label, e.id) for e in sender.endpoints] == [("U", 2), ("K", 3)]
    # D's own address holds id 1: D takes it (the kernel would refuse it beside any other id);
    # C, the destination, is never announced
    assert [(e.label, e.id) for e in receiver.endpoints] == [("D", 1)]


def test_without_implicit_endpoints_the_ids_are_one_two_in_order():
    assert endpoint_ids(["U", "K"], LOCAL, []) == {"U": 1, "K": 2}
    mapped_same = [{"id": 1, "address": "::ffff:10.1.0.1"}]
    assert endpoint_ids(["U", "K"], LOCAL, mapped_same) == {"U": 1, "K": 2}
    held = [{"id": 2, "address": "10.1.1.1"}, {"id": 1, "address": "10.5.5.5"}]
    assert endpoint_ids(["U", "K"], LOCAL, held) == {"U": 3, "K": 2}

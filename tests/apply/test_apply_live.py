"""The site applier on the emulated testbed: apply, idempotence, confirmation on the in-kernel
path manager, rollback, an apply killed between journal steps; the host's own values untouched."""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from probes import mptcpapp, siteapply
from probes import siteconfig as sc
from probes import testbed as tbmod
from probes.netns import list_netns
from probes.ports import choose_port_triple
from probes.spec import parse_spec
from service.algorithm import apply_plan as ap
from service.algorithm.topology import TopologySpec
from tests.support import wait_for

pytestmark = pytest.mark.netns

ROOT_DIR = Path(__file__).resolve().parents[2]
SITES = {
    "A": [("U", 8000), ("K", 4000)],
    "B": [("C", 20000), ("D", 2000)],
}


def _site(name: str) -> dict:
    return {"name": name, "isps": [{"name": f"isp{lb}", "label": lb, "down_kbps": kb,
                                    "up_kbps": kb} for lb, kb in SITES[name]]}


@pytest.fixture(scope="module")
def bed():
    name = f"ap{secrets.token_hex(3)}"
    spec = parse_spec({"name": name, "sites": [_site("A"), _site("B")],
                       "defaults": {"delay_ms": 10}})
    try:
        yield tbmod.up(spec)
    finally:
        tbmod.down(name)
        assert not [n for n in list_netns() if n.startswith(f"mpcoa-{name}-")]


@pytest.fixture
def root(tmp_path) -> Path:
    return tmp_path / "apply-state"


def _plan(bed, subset, occ="reno"):
    topo = TopologySpec.model_validate({"local": _site("A"), "remote": _site("B")})
    return ap.plan_sites(
        topo, opm="PCDC" if subset else "FullMesh", occ=occ, obs_mib=0.5,
        subflows_used=subset, standby_subflows=["U-D", "K-D"],
        local_addrs={lk.label: lk.address for lk in bed.site_links("A")},
        remote_addrs={lk.label: lk.address for lk in bed.site_links("B")},
        builtin_ccs={"reno", "cubic", "bbr"})


def _host():
    state = sc.read_state(None)
    return state["sysctls"], state["endpoints"], state["limits"]


def _matches(state: dict, target: dict) -> bool:
    eps = [{k: v for k, v in e.items() if k != "dev"} for e in state["endpoints"]]
    want = [{k: v for k, v in e.items() if k != "dev"} for e in target["endpoints"]]
    return (eps == want and all(state["limits"][k] == v for k, v in target["limits"].items())
            and all(state["sysctls"][k] == v for k, v in target["sysctls"].items()))


def test_apply_confirm_rollback_and_the_host_untouched(bed, root):
    host = _host()
    plan = _plan(bed, ["U-C", "K-C"])
    before = {s.site: sc.read_state(bed.ns(s.site)) for s in plan.sites}
    targets = {s.site: ap.desired_state(s, before[s.site]) for s in plan.sites}
    for s in plan.sites:
        journal = siteapply.apply(targets[s.site], ns=bed.ns(s.site), root=root)
        assert journal["phase"] == "applied" and journal["recovered"] is None
        after = sc.read_state(bed.ns(s.site))
        assert _matches(after, targets[s.site]), after
        assert all(c["action"] in ("none", "advice") for c in ap.changes(s, after))
    # idempotent: applying again changes nothing and keeps the values from before the first
    again = siteapply.apply(targets["A"], ns=bed.ns("A"), root=root)
    assert _matches(sc.read_state(bed.ns("A")), targets["A"])
    by_key = {f"{st['kind']}:{st['key']}": st for st in again["steps"]}
    assert by_key["sysctl:net.ipv4.tcp_congestion_control"]["before"] == \
        before["A"]["sysctls"]["net.ipv4.tcp_congestion_control"]

    # the answer on the kernel's own path manager: a plain MPTCP connection, no control of ours
    got = mptcpapp.confirm(sender_ns=bed.ns("A"), receiver_ns=bed.ns("B"),
                           source=plan.connect["source"], destination=plan.connect["destination"],
                           port=choose_port_triple([bed.ns("A"), bed.ns("B")]), seconds=6,
                           warmup_s=2)
    assert not got["fallback"] and got["cc"] == "reno"
    # U-C and K-C carry data; U-D and K-D stand by as backup: 3 subflows beside the first
    assert got["peak_subflows"] == 3, got
    # U's 8 and K's 4 Mbit/s uplinks to C: more than U alone could carry
    assert got["goodput_mbps"] > 8.0, got

    for s in plan.sites:
        siteapply.rollback(ns=bed.ns(s.site), root=root)
        restored = sc.read_state(bed.ns(s.site))
        assert restored["endpoints"] == before[s.site]["endpoints"]
        assert restored["limits"] == before[s.site]["limits"]
        assert restored["sysctls"] == before[s.site]["sysctls"]
    assert _host() == host


def test_a_cc_outside_the_hosts_allowed_list_is_refused_before_anything_changes(bed, root):
    allowed = sc.read_state(None)["sysctls"][sc.ALLOWED_CCS].split()
    outside = [c for c in sc.read_state(None)["available_ccs"] if c not in allowed]
    if not outside:
        pytest.skip("every available CC is allowed in namespaces on this host")
    plan = _plan(bed, [], occ=outside[0])
    before = sc.read_state(bed.ns("A"))
    with pytest.raises(sc.SiteConfigError, match="tcp_allowed_congestion_control"):
        siteapply.apply(ap.desired_state(plan.sites[0], before), ns=bed.ns("A"), root=root)
    assert sc.read_state(bed.ns("A")) == before
    assert siteapply.read_journal(siteapply.state_dir(bed.ns("A"), root)) is None


def _killed_apply(bed, root, tmp_path, target: dict, hold_after: int) -> dict:
    """A real applier process, SIGKILLed once it has journaled `hold_after` steps."""
    path = tmp_path / "target.json"
    path.write_text(json.dumps(target))
    env = {**os.environ, "PYTHONPATH": str(ROOT_DIR)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "probes.siteapply", "apply", "--ns", bed.ns("A"),
         "--root", str(root), "--target", str(path), "--hold-after", str(hold_after)],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    held = siteapply.state_dir(bed.ns("A"), root) / "held"
    try:
        wait_for(lambda: held.exists() or proc.poll() is not None, 30, "the applier to hold")
        assert proc.poll() is None, proc.communicate()
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    held.unlink()
    return siteapply.read_journal(siteapply.state_dir(bed.ns("A"), root))


@pytest.mark.parametrize("forward", [False, True], ids=["back", "forward"])
def test_an_apply_killed_between_steps_leaves_the_site_as_it_was_or_as_planned(
        bed, root, tmp_path, forward):
    plan = _plan(bed, ["U-C"])
    before = sc.read_state(bed.ns("A"))
    target = ap.desired_state(plan.sites[0], before)
    journal = _killed_apply(bed, root, tmp_path, target, hold_after=3)
    assert journal["phase"] == "applying"
    assert [s["done"] for s in journal["steps"]][:4] == [True, True, True, False]
    half = sc.read_state(bed.ns("A"))
    assert half != before and not _matches(half, target)  # really half applied

    t0 = time.monotonic()
    out = siteapply.recover(ns=bed.ns("A"), root=root, forward=forward)
    took = time.monotonic() - t0
    assert out["outcome"] == ("rolled_forward" if forward else "rolled_back"), out
    now = sc.read_state(bed.ns("A"))
    if forward:
        assert _matches(now, target)
        siteapply.rollback(ns=bed.ns("A"), root=root)
        now = sc.read_state(bed.ns("A"))
    assert now == before
    assert took < 10


def test_the_next_apply_first_undoes_an_interrupted_one_and_says_so(bed, root, tmp_path):
    before = sc.read_state(bed.ns("A"))
    target = ap.desired_state(_plan(bed, ["U-C"]).sites[0], before)
    _killed_apply(bed, root, tmp_path, target, hold_after=2)
    journal = siteapply.apply(target, ns=bed.ns("A"), root=root)
    assert journal["recovered"] == "rolled_back" and journal["phase"] == "applied"
    # its "before" values are the site's own, not the half-applied ones
    by_key = {f"{st['kind']}:{st['key']}": st["before"] for st in journal["steps"]}
    assert by_key["endpoints:mptcp"] == before["endpoints"]
    siteapply.rollback(ns=bed.ns("A"), root=root)
    assert sc.read_state(bed.ns("A")) == before


def test_a_cut_link_fails_over_to_the_standby_and_comes_back(bed, root, tmp_path):
    """An application transfer on an applied answer that uses U only (K stands by); U's ISP is
    cut in the core (the site sees its carrier go) and returns; the watcher promotes K within
    seconds, the transfer keeps >= 80 % of what survives, the selection comes back after the
    hold time; nothing of it is left after the rollback."""
    import threading

    plan = _plan(bed, ["U-C", "U-D"])
    sender = plan.sites[0]
    before = {s.site: sc.read_state(bed.ns(s.site)) for s in plan.sites}
    for s in plan.sites:
        siteapply.apply(ap.desired_state(s, before[s.site]), ns=bed.ns(s.site), root=root)
    ids = {e.label: e.id for e in sender.endpoints}
    assert sender.standby_endpoints == [ids["K"]]
    cfg = tmp_path / "failover.json"
    cfg.write_text(json.dumps({"used": [ids["U"]], "standbys": sender.standby_endpoints,
                               "hold_s": 3}))
    events = tmp_path / "events.jsonl"
    env = {**os.environ, "PYTHONPATH": str(ROOT_DIR)}
    watcher = subprocess.Popen(  # the site worker's watcher, in the sender's namespace
        ["ip", "netns", "exec", bed.ns("A"), sys.executable, "-m", "probes.failover",
         "--ns", bed.ns("A"), "--config", str(cfg), "--events", str(events)],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    core_dev = next(lk.core_dev for lk in bed.site_links("A") if lk.label == "U")
    result: dict = {}
    try:
        wait_for(events.exists, 10, "the watcher to start")
        transfer = threading.Thread(target=lambda: result.update(mptcpapp.confirm(
            sender_ns=bed.ns("A"), receiver_ns=bed.ns("B"), source=plan.connect["source"],
            destination=plan.connect["destination"],
            port=choose_port_triple([bed.ns("A"), bed.ns("B")]), seconds=24, warmup_s=2)))
        transfer.start()
        time.sleep(6)
        cut_at = time.time()
        subprocess.run(["ip", "-n", bed.core_ns, "link", "set", core_dev, "down"], check=True)
        time.sleep(10)
        back_at = time.time()
        subprocess.run(["ip", "-n", bed.core_ns, "link", "set", core_dev, "up"], check=True)
        transfer.join(60)
        assert not transfer.is_alive() and result, "the transfer did not finish"
        wait_for(lambda: "restored" in events.read_text(), 10, "the selection restored")
    finally:
        subprocess.run(["ip", "-n", bed.core_ns, "link", "set", core_dev, "up"], check=False)
        if watcher.poll() is None:
            os.killpg(watcher.pid, signal.SIGTERM)
        watcher.wait(10)
    log = [json.loads(line) for line in events.read_text().splitlines()]
    fail = next(e for e in log if e["kind"] == "failover")
    restored = next(e for e in log if e["kind"] == "restored")
    assert fail["endpoint"] == ids["U"] and fail["promoted"] == ids["K"]
    assert fail["at"] - cut_at < 2.0
    assert restored["at"] - back_at >= 3.0  # the hold time
    t0 = result["t0_wall"]
    surviving = dict(SITES["A"])["K"] / 1000  # K's uplink carries K-C and K-D
    # from 5 s after the cut until the link returns
    kept = mptcpapp.goodput_mbps(result["series"], cut_at + 5 - t0, back_at - t0)
    # the first 1-second window after the cut at >= 80 % of what survives
    windows = [(s, mptcpapp.goodput_mbps(result["series"], s, s + 1))
               for s in [cut_at - t0 + 0.2 * i for i in range(40)]]
    recovered = next(s for s, g in windows if g >= 0.8 * surviving) - (cut_at - t0)
    print(f"failover: event {fail['at'] - cut_at:.2f} s after the cut, >= 80 % of the "
          f"surviving {surviving:.1f} Mbit/s after {recovered:.1f} s; {kept:.3f} Mbit/s from "
          f"cut+5 s to the link's return; restored {restored['at'] - back_at:.2f} s after it")
    assert kept >= 0.8 * surviving, result["series"]
    assert recovered <= 5.0
    now = {e["id"]: e for e in sc.read_endpoints(bed.ns("A"))}
    assert not now[ids["U"]].get("backup") and now[ids["K"]].get("backup")
    assert now[ids["U"]].get("fullmesh") and now[ids["K"]].get("fullmesh")
    for s in plan.sites:
        siteapply.rollback(ns=bed.ns(s.site), root=root)
        assert sc.read_state(bed.ns(s.site)) == before[s.site]

"""NetPerfMeter: command lines for 2.x and legacy 1.9, and parsing real 2.0.10 output."""

from __future__ import annotations

import bz2
import itertools
import shutil

import pytest

from probes.base import CapabilityError, MeasurementRequest, TrafficProfile
from probes.tools.context import HostPair
from probes.tools.netperfmeter import (
    NetPerfMeterBackend,
    buffers_set,
    build_commands,
    data_port,
    flowspec,
    is_legacy,
    parse_active_log,
    parse_config,
    parse_flow_vector,
    parse_results,
    parse_scalars,
    parse_version,
    read_text,
)
from probes.tools.subflowctl import SubflowControl, plan_subflows
from tests.support import shared_fixtures

FIX = shared_fixtures("netperfmeter")


def req(**kw) -> MeasurementRequest:
    return MeasurementRequest(sender="A", receiver="B", duration_s=10, **kw)


def test_flowspec_matches_the_fixture_commands():
    assert (
        flowspec(req(cc="cubic", buffer_bytes=4194304), "bulk")
        == "const0:const1400:const0:0:cc=cubic:sndbuf=4194304:rcvbuf=4194304:description=bulk"
    )
    video = req(cc="reno", buffer_bytes=1048576, profile=TrafficProfile.paced(25, 20000))
    assert (
        flowspec(video, "video")
        == "const25:const20000:const0:0:cc=reno:sndbuf=1048576:rcvbuf=1048576:description=video"
    )
    # autotuning: said to the tool as 0 (left alone); without it NetPerfMeter sets 233,016 bytes
    assert flowspec(req(cc="cubic"), "bulk") == (
        "const0:const1400:const0:0:cc=cubic:sndbuf=0:rcvbuf=0:description=bulk")


@pytest.mark.parametrize(("folder", "size"), [("mptcp-bulk-cubic-4MiB", 4194304),
                                              ("mptcp-bulk-reno-1MiB-bz2", 1048576),
                                              ("mptcp-video-reno-1MiB", 1048576)])
def test_the_log_says_which_buffers_netperfmeter_set(folder, size):
    log = parse_active_log((FIX / folder / "active.log").read_text())
    assert log["buffers"] == {"sndbuf": size, "rcvbuf": size}
    assert buffers_set(log["buffers"]) == {"sender_sndbuf": size, "sender_rcvbuf": size,
                                           "receiver_sndbuf": size, "receiver_rcvbuf": size}


def test_commands_2x_syntax():
    passive, active = build_commands(
        req(cc="cubic", buffer_bytes=4194304), version="2.0.10", address="10.9.0.1",
        port=9000, outdir=".", compress=False)
    assert passive == ["netperfmeter", "9000", "--control-over-tcp", "--nodisplay"]
    assert active[:4] == ["netperfmeter", "10.9.0.1:9000", "--control-over-tcp", "--nodisplay"]
    assert active[active.index("--runtime") + 1] == "10.2"  # a second row's slack
    assert active[active.index("--scalar") + 1] == "./run.sca"
    assert active[-2] == "--mptcp"
    assert active[-1].startswith("const0:const1400:const0:0:cc=cubic:sndbuf=4194304")
    assert not any(a.startswith("-tcp") or "cmt=" in a for a in active)


def test_commands_legacy_19_syntax_and_bz2():
    passive, active = build_commands(
        req(cc="reno", buffer_bytes=1048576), version="1.9.4", address="10.9.0.1", port=9000,
        outdir="/tmp/o", binary="/opt/npm/bin/netperfmeter", compress=True)
    assert is_legacy("1.9.4") and not is_legacy("2.0.10")
    assert passive == ["/opt/npm/bin/netperfmeter", "9000"]
    assert "-runtime=10.2" in active and "-scalar=/tmp/o/run.sca.bz2" in active
    assert "-vector=/tmp/o/run.vec.bz2" in active
    assert active[-2] == "-tcp"
    assert active[-1].endswith(":cmt=mptcp")
    assert "--mptcp" not in active


def test_version_detection():
    log = (FIX / "mptcp-bulk-cubic-4MiB" / "active.log").read_text()
    assert parse_version(log) == "2.0.10"
    assert parse_version("NetPerfMeter - Version 1.9.4") == "1.9.4"


@pytest.mark.parametrize(
    ("folder", "rx_bytes", "mbps", "cc"),
    [
        ("mptcp-bulk-cubic-4MiB", 27749400, 22.127, "cubic"),
        ("mptcp-bulk-reno-1MiB-bz2", 28742000, 22.911, "reno"),
        ("mptcp-video-reno-1MiB", 4980000, 3.998, "reno"),
    ],
)
def test_parse_fixtures(folder, rx_bytes, mbps, cc):
    r = parse_results(FIX / folder)
    assert r["received_bytes"] == rx_bytes
    assert r["goodput_mbps"] == pytest.approx(mbps, abs=0.001)
    assert r["protocols"] == ["MPTCP"]
    assert r["cc"] == [cc]
    assert r["version"] == "2.0.10"
    # 1 s series of the passive side, consistent with the total
    assert len(r["series"]) >= 9
    steps = [t for t, _ in r["series"]]
    assert all(0.9 < b - a < 1.1 for a, b in itertools.pairwise(steps))
    assert all(v >= 0 for _, v in r["series"])
    mean = sum(v for _, v in r["series"]) / len(r["series"])
    assert mean == pytest.approx(r["goodput_mbps"], rel=0.05)
    # goodput is the receiver's: never above the bottleneck, unlike the active side's count
    assert r["goodput_mbps"] <= 25.0


def test_active_side_transmitted_exceeds_goodput():
    r = parse_results(FIX / "mptcp-bulk-cubic-4MiB")
    assert r["active_transmitted_bytes"] > r["received_bytes"]


def test_video_series_is_paced_rate():
    r = parse_results(FIX / "mptcp-video-reno-1MiB")
    inner = [v for _, v in r["series"][1:-1]]
    assert all(v == pytest.approx(4.0, rel=0.05) for v in inner)


def test_bz2_equals_plain(tmp_path):
    src = FIX / "mptcp-bulk-cubic-4MiB"
    plain = read_text(src / "run-passive.sca")
    shutil.copy(src / "run.config", tmp_path / "run.config")
    (tmp_path / "run-passive.sca.bz2").write_bytes(bz2.compress(plain.encode()))
    (tmp_path / "run-passive.vec").write_text(read_text(src / "run-passive.vec"))
    assert parse_results(tmp_path)["received_bytes"] == 27749400
    # per-message vector is bz2 in the fixture: readable through the same function
    pm = parse_flow_vector(read_text(src / "run-passive-00000000-0000.vec.bz2"))
    assert pm and {"Delay", "Jitter", "AbsBytes"} <= set(pm[0])
    assert 15.0 < pm[0]["Delay"] < 100.0  # one-way delay of the 15 ms core plus queueing


def test_scalars_and_config():
    sca = parse_scalars(read_text(FIX / "mptcp-bulk-cubic-4MiB" / "run-passive.sca"))
    assert sca["netPerfMeter.passive.total"]["Received Bytes"] == 27749400
    cfg = parse_config(read_text(FIX / "mptcp-video-reno-1MiB" / "run.config"))
    assert cfg["FLOW0_PROTOCOL"] == "MPTCP"
    assert cfg["FLOW0_DESCRIPTION"] == "video"
    assert float(cfg["FLOW0_OUTBOUND_FRAME_RATE_VALUE1"]) == 25.0


def test_missing_binary_is_a_clear_error(tmp_path):
    pair = HostPair(None, None, {"U": "10.1.0.1"}, {"D": "10.2.0.1"})
    backend = NetPerfMeterBackend(pair, binary=str(tmp_path / "no-such-netperfmeter"))
    with pytest.raises(CapabilityError, match="netperfmeter"):
        backend.capabilities()


# ---- ports, subflow control and the binary's path ---------------------------------------------
PAIR = HostPair("mpcoa-x-site-A", "mpcoa-x-site-B", {"U": "10.1.0.1", "T": "10.1.1.1"},
                {"D": "10.2.0.1", "O": "10.2.1.1"}, userspace_pm=True)


@pytest.mark.parametrize("folder", ["mptcp-bulk-cubic-4MiB", "mptcp-bulk-reno-1MiB-bz2",
                                    "mptcp-video-reno-1MiB"])
def test_fixture_logs_say_mptcp_data_goes_to_port_minus_one(folder):
    log = parse_active_log((FIX / folder / "active.log").read_text())
    assert log["version"] == "2.0.10"
    assert log["control"] == ("10.9.0.1", 9001)
    assert log["data"] == [("MPTCP", "10.9.0.1", 8999)]
    # the passive side of these runs was started on 9000: our rule gives the same data port
    assert data_port(9000, "2.0.10") == 8999
    assert data_port(9000, "1.9.4") == 9000  # 1.9's -tcp ...:cmt=mptcp used the TCP port


def test_the_observer_and_the_path_manager_watch_p_minus_1(tmp_path):
    backend = NetPerfMeterBackend(PAIR, binary="/opt/npm/netperfmeter")
    request = req(cc="cubic", allowed_subflows=["T-O", "U-D"], path_manager="PCDC")
    plan = plan_subflows(PAIR, request)
    assert plan.excluded == ["U-O", "T-D"] and plan.bind_addr == "10.1.1.1"
    cmd = backend.tool_run(request, "2.0.10", 24000, str(tmp_path), plan.server_addr,
                           plan.bind_addr)
    assert cmd.data_port == 23999 and cmd.listen_port == 24001
    assert cmd.ports == [23999, 24000, 24001]
    assert cmd.server_argv == ["/opt/npm/netperfmeter", "24000", "--control-over-tcp",
                               "--nodisplay"]
    # the connection starts on the first allowed subflow: T -> O
    assert cmd.client_argv[1] == "10.2.1.1:24000"
    i = cmd.client_argv.index("--local")
    assert cmd.client_argv[i + 1] == "10.1.1.1" and cmd.client_argv[i + 2] == "--mptcp"
    cfg = SubflowControl(PAIR, plan, cmd.data_port).config()
    assert cfg["dport"] == 23999
    backup = {(s["local"], s["remote"]): s["backup"] for s in cfg["subflows"]}
    assert backup == {("10.1.0.1", "10.2.0.1"): False, ("10.1.0.1", "10.2.1.1"): True,
                      ("10.1.1.1", "10.2.0.1"): True, ("10.1.1.1", "10.2.1.1"): False}


def test_fullmesh_runs_on_the_userspace_pm_like_every_other_probe(tmp_path):
    """All subflows in use: still the userspace PM (none in backup), so FullMesh and PCDC, TP_0
    and TP_i differ in their subflow sets only; a host that may not switch keeps the kernel's."""
    backend = NetPerfMeterBackend(PAIR, binary="netperfmeter")
    plan = plan_subflows(PAIR, req(cc="reno"))
    assert plan.controlled and plan.excluded == [] and plan.bind_addr == "10.1.0.1"
    control = SubflowControl(PAIR, plan, 29999)
    cfg = control.config()
    assert [s["backup"] for s in cfg["subflows"]] == [False] * 4
    # a control never entered made no folder (one per probe built and not run used to stay)
    assert control.dir is None and cfg["ready_file"] is None
    kernel_only = HostPair(PAIR.sender_ns, PAIR.receiver_ns, PAIR.sender_addrs,
                           PAIR.receiver_addrs, userspace_pm=False)
    plan = plan_subflows(kernel_only, req(cc="reno"))
    assert not plan.controlled and plan.bind_addr is None
    cmd = backend.tool_run(req(cc="reno"), "2.0.10", 30000, str(tmp_path), plan.server_addr,
                           None)
    assert "--local" not in cmd.client_argv and cmd.client_argv[1] == "10.2.0.1:30000"
    assert cmd.data_port == 29999


def test_binary_from_the_environment(monkeypatch, tmp_path):
    missing = str(tmp_path / "bin" / "netperfmeter")
    monkeypatch.setenv("MPCOA_NETPERFMETER", missing)
    backend = NetPerfMeterBackend(PAIR)
    assert backend.binary == missing
    with pytest.raises(CapabilityError, match="MPCOA_NETPERFMETER"):
        backend.capabilities()
    monkeypatch.delenv("MPCOA_NETPERFMETER")
    assert NetPerfMeterBackend(PAIR).binary == "netperfmeter"


def test_warmup_excluded_from_the_fixture_goodput():
    from probes.base import mean_after_warmup

    r = parse_results(FIX / "mptcp-bulk-cubic-4MiB")
    after = mean_after_warmup(r["series"], 2.0)
    inner = [v for t, v in r["series"] if t > 2.9]
    assert after == pytest.approx(sum(inner) / len(inner), rel=0.03)
    assert after > r["series"][0][1]  # slow start is the first second, left out

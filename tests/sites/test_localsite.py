"""A site describes itself (issue 11 item 3): `mpcoa worker --site --isp [--check]` on this host's
real addresses, its report through `GET /sites/{id}/capabilities`, and the campaign's CC set
from both sites' reports."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from probes.site.local import LocalSite, capability_report, parse_isp_option, resolve_local_site
from probes.tools import paced_tool
from service import db
from service.algorithm.topology import TopologySpec
from service.flows.campaign.calibration import next_step
from service.settings import Settings
from service.store import artifacts, inventory
from tests.api.conftest import HU, SRL
from tests.conftest import migrated_database, new_campaign

pytestmark = pytest.mark.slow  # starts server processes or subprocesses (docs/testing.md)

MPCOA = str(Path(sys.executable).parent / "mpcoa")
REPO = Path(__file__).resolve().parents[2]


def _mpcoa(*args: str, database_url: str | None = None, tmp: Path,
           path: str | None = None) -> subprocess.CompletedProcess:
    env = {"PATH": path or os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(REPO),
           "MPCOA_DATA_DIR": str(tmp), "HOME": str(tmp)}
    if database_url:
        env["MPCOA_DATABASE_URL"] = database_url
    return subprocess.run([MPCOA, "worker", *args], env=env, cwd=tmp, capture_output=True,
                          text=True, timeout=60, check=False)


def test_parse_isp_option():
    assert parse_isp_option("K@10.0.0.1") == ("K", "10.0.0.1")
    assert parse_isp_option("CU@eth1") == ("CU", "@eth1")
    assert parse_isp_option("V6@::1") == ("V6", "::1")
    assert parse_isp_option("K=10.0.0.1") == ("K", "10.0.0.1")  # the older spelling
    assert parse_isp_option("CU=@eth1") == ("CU", "@eth1")
    for bad, msg in [("K", "LABEL@ADDRESS"), ("@1.2.3.4", "LABEL@ADDRESS"),
                     ("K@", "LABEL@ADDRESS"), ("1K@1.2.3.4", "not an ISP label"),
                     ("TOOLONGLABEL@1.2.3.4", "not an ISP label"), ("K=host", "neither"),
                     ("K@a/b", "neither"), ("K=@a/b", "interface name"),
                     ("=1.2.3.4", "LABEL@ADDRESS"), ("K=", "LABEL@ADDRESS"),
                     ("K=@", "LABEL@ADDRESS")]:
        with pytest.raises(ValueError, match=msg):
            parse_isp_option(bad)


def test_resolve_on_this_host():
    site = resolve_local_site("SRL", ["lo=@lo"])
    assert site == LocalSite(name="SRL", isps={"lo": "127.0.0.1"})
    assert resolve_local_site("SRL", ["L=127.0.0.1"]).isps == {"L": "127.0.0.1"}
    assert resolve_local_site("SRL", []).isps == {}  # the emulated testbed's workers
    for name, opts, msg in [
        ("SRL", ["L=192.0.2.77"], "not configured on this host"),
        ("SRL", ["L=@nosuchif0"], "no interface 'nosuchif0'"),
        ("SRL", ["L=@lo", "L=127.0.0.1"], "given twice"),
        ("SRL", ["L=@lo", "M=127.0.0.1"], "already used"),
        ("9bad", ["L=@lo"], "not a site name"),
    ]:
        with pytest.raises(ValueError, match=msg):
            resolve_local_site(name, opts)


def test_report_describes_this_host():
    r = capability_report(LocalSite("SRL", {"lo": "127.0.0.1"}))
    assert r["kernel"] == os.uname().release
    assert r["mptcp_enabled"] is True and "in-kernel" in r["path_managers"]
    assert {"reno", "cubic"} <= set(r["congestion_controls"])
    assert r["tools"]["iperf3"] and r["endpoints"] == {"lo": "127.0.0.1"}
    assert r["problems"] == []
    missing = capability_report(None, netperfmeter="/nonexistent/netperfmeter")
    assert missing["tools"]["netperfmeter"] is None and missing["endpoints"] == {}


def test_check_with_real_addresses_and_bad_inputs(tmp_path):
    # no broker configured: --check needs none
    for isp in ("lo=@lo", "L=127.0.0.1"):
        ok = _mpcoa("--site", "SRL", "--isp", isp, "--check", "--json", tmp=tmp_path)
        assert ok.returncode == 0, ok.stderr
        report = json.loads(ok.stdout)
        assert report["endpoints"] == {isp.split("=")[0]: "127.0.0.1"}
        assert report["site"] == "SRL" and report["problems"] == []
    # for people, by default: ready or not, and where each ISP is
    text = _mpcoa("--site", "SRL", "--isp", "L@127.0.0.1", "--check", tmp=tmp_path)
    assert text.returncode == 0, text.stderr
    assert text.stdout.startswith("site SRL: ready; ipv4 addresses: L@127.0.0.1\nkernel ")
    for args, msg in [
        (["--isp", "1x=@lo"], "not an ISP label"),
        (["--isp", "L=192.0.2.77"], "not configured on this host"),
        (["--isp", "L=@nosuchif0"], "no interface 'nosuchif0'"),
    ]:
        cp = _mpcoa("--site", "SRL", *args, "--check", tmp=tmp_path)
        assert cp.returncode == 1, (args, cp.stdout, cp.stderr)
        assert msg in cp.stderr and "Traceback" not in cp.stderr, cp.stderr
        assert cp.stderr.startswith("mpcoa: error: ")
    # a bad --isp is refused before anything else, also without --check
    cp = _mpcoa("--site", "SRL", "--isp", "L=@nosuchif0", tmp=tmp_path)
    assert cp.returncode == 1 and "Traceback" not in cp.stderr


def _path_without(tmp: Path, *missing: str) -> str:
    """A PATH with this host's programs but `missing`: a host where they are not installed."""
    bin_ = tmp / "bin"
    bin_.mkdir()
    for folder in ("/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"):
        for program in Path(folder).iterdir() if Path(folder).is_dir() else []:
            target = bin_ / program.name
            if program.name not in missing and not target.exists():
                target.symlink_to(program)
    return str(bin_)


def test_check_says_which_tools_run_and_refuses_a_host_none_runs_on(tmp_path):
    ok = _mpcoa("--site", "SRL", "--isp", "lo@lo", "--check", "--json", tmp=tmp_path)
    assert ok.returncode == 0, ok.stderr
    assert "tool iperf3: 3." in ok.stderr and "measures bulk" in ok.stderr
    assert f"tool paced: {paced_tool.VERSION}; measures frames" in ok.stderr
    assert json.loads(ok.stdout)["allows"]["iperf3"] == ["bulk"]
    # iperf3 3.12 without mptcpize runs no MPTCP probe: that host cannot probe
    path = _path_without(tmp_path, "mptcpize", "netperfmeter")
    cp = _mpcoa("--site", "SRL", "--isp", "lo=@lo", "--check", tmp=tmp_path, path=path)
    assert cp.returncode == 1, cp.stdout + cp.stderr
    assert "tool iperf3: 3.12; measures nothing here" in cp.stderr
    assert "problem: no probe tool that runs here: install iperf3 and mptcpize" in cp.stderr
    assert "mptcpize is missing" in cp.stderr and "Traceback" not in cp.stderr


@pytest.mark.postgres
def test_a_report_reaches_the_api(tmp_path):
    with migrated_database("mpcoa_caps") as url:
        engine = db.make_engine(url)
        try:
            from sqlalchemy.orm import Session

            with Session(engine) as s:
                topo = inventory.ensure_topology(s, spec=TopologySpec.model_validate(
                    {"local": SRL, "remote": HU}))
                srl, hu = topo.local_site_id, topo.remote_site_id
                s.commit()
        finally:
            engine.dispose()
        cp = _mpcoa("--site", "SRL", "--isp", "lo=@lo", "--check", database_url=url,
                    tmp=tmp_path)
        assert cp.returncode == 0, cp.stderr
        assert "report stored for site SRL" in cp.stderr
        # reads open: the report is the point here, the read policy has tests of its own
        settings = Settings(database_url=url, data_dir=tmp_path, run_campaigns=False,
                            reads_need_token=False, _env_file=None)
        with TestClient(create_app(settings), raise_server_exceptions=False,
                        base_url="http://localhost") as client:
            r = client.get(f"/sites/{srl}/capabilities")
            assert r.status_code == 200, r.text
            body = r.json()
            assert body["site_id"] == srl and body["report"]["site"] == "SRL"
            assert body["report"]["endpoints"] == {"lo": "127.0.0.1"}
            assert body["report"]["kernel"] == os.uname().release
            assert client.get(f"/sites/{hu}/capabilities").status_code == 404  # none yet
            assert client.get("/sites/999999/capabilities").status_code == 404
            assert client.get("/sites/0/capabilities").status_code == 422
        # an unregistered site's worker still checks, and says its report was not stored
        cp = _mpcoa("--site", "Nowhere", "--isp", "lo=@lo", "--check", database_url=url,
                    tmp=tmp_path)
        assert cp.returncode == 0 and "report not stored" in cp.stderr


class KernelOffers:
    """What the prober would say without reports (the emulated testbed's kernels)."""

    def available_ccs(self) -> set[str]:
        return {"reno", "cubic", "bbr"}

    def measure(self, request):
        raise AssertionError("next_step never measures")


@pytest.mark.postgres
def test_cc_set_from_both_sites_reports(db_session):
    settings = Settings(run_campaigns=False, _env_file=None)
    topo = inventory.ensure_topology(db_session, spec=TopologySpec.model_validate(
        {"local": {**SRL, "isps": SRL["isps"][:1]}, "remote": {**HU, "isps": HU["isps"][:1]}}))
    # one report only: the prober's view, as today
    artifacts.save_capabilities(db_session, site_name="SRL",
                                report={"congestion_controls": ["reno", "cubic", "bbr"]})
    c1 = new_campaign(db_session, topo.id, ccs=["reno", "cubic", "bbr"])
    next_step(db_session, campaign_id=c1.id, prober=KernelOffers(), settings=settings)
    assert c1.active_ccs == ["reno", "cubic", "bbr"] and c1.dropped_ccs == {}
    c1.state = "done"
    db_session.flush()
    # both reports: their intersection; a CC one site lacks is dropped naming that site
    artifacts.save_capabilities(db_session, site_name="HU",
                                report={"congestion_controls": ["cubic", "reno"]})
    c2 = new_campaign(db_session, topo.id, ccs=["reno", "cubic", "bbr"])
    next_step(db_session, campaign_id=c2.id, prober=KernelOffers(), settings=settings)
    assert c2.offered_ccs == ["cubic", "reno"]
    assert c2.active_ccs == ["reno", "cubic"]
    assert c2.dropped_ccs == {"bbr": "not offered by site HU (its worker's capability report)"}

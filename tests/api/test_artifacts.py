"""Raw probe outputs stored with their measurement and downloaded intact through the API
(issue 11 item 2): a real iperf3 probe on a small emulated testbed, and NetPerfMeter's real
fixture files through the same store/download path (CI has no NetPerfMeter binary)."""

from __future__ import annotations

import bz2
import gzip
import json
import shutil
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import select

from models import MeasurementArtifact
from probes.base import MAX_ARTIFACT_BYTES, MeasurementRequest, MeasurementResult, utcnow
from probes.tools.netperfmeter import add_result_artifacts, parse_results
from service.flows.campaign import recording
from service.flows.campaign.plan import ProbeStep
from tests.conftest import new_campaign
from tests.probes.conftest import testbed2x2  # noqa: F401 - the live testbed fixture
from tests.support import shared_fixtures

FIXTURES = shared_fixtures("netperfmeter")


def _campaign(client, auth, db_session) -> int:
    ids = []
    for name, labels in (("A", ("U", "T")), ("B", ("D", "O"))):
        body = {"name": name, "isps": [{"name": f"I{lab}", "label": lab, "down_kbps": 12000,
                                        "up_kbps": 12000} for lab in labels]}
        r = client.post("/sites", json=body, headers=auth)
        assert r.status_code == 201, r.text
        ids.append(r.json()["id"])
    r = client.post("/topologies", json={"local_site_id": ids[0], "remote_site_id": ids[1]},
                    headers=auth)
    assert r.status_code == 201, r.text
    campaign = new_campaign(db_session, r.json()["id"], ccs=["cubic"], duration_s=3)
    db_session.commit()
    return campaign.id


STEP = ProbeStep(phase="buffer", pm="FullMesh", cc="cubic", bs_mib=1.0, run=0)


def _stored(db_session, campaign_id: int, result: MeasurementResult) -> int:
    row = recording.store_result(db_session, campaign_id=campaign_id, step=STEP, result=result)
    db_session.commit()
    return row.id


@pytest.mark.netns
@pytest.mark.postgres
def test_iperf3_json_of_a_real_probe_downloads_intact(client, auth, db_session, testbed2x2):  # noqa: F811
    cid = _campaign(client, auth, db_session)
    result = testbed2x2.measure(MeasurementRequest(sender="A", receiver="B", duration_s=3))
    assert result.tool == "iperf3"
    client_json = result.artifacts["iperf3-client.json"]
    assert json.loads(client_json)["start"]["version"]  # the tool's own document
    assert "artifacts" not in result.to_dict()  # bytes stay out of the JSON result
    mid = _stored(db_session, cid, result)

    listing = client.get(f"/measurements/{mid}/artifacts", headers=auth)
    assert listing.status_code == 200, listing.text
    items = {a["name"]: a for a in listing.json()}
    assert {"iperf3-client.json", "iperf3-server.json"} <= set(items)
    assert items["iperf3-client.json"]["size"] == len(client_json)
    assert items["iperf3-client.json"]["media_type"] == "application/json"
    for name, content in result.artifacts.items():
        r = client.get(items[name]["url"], headers=auth)
        assert r.status_code == 200, (name, r.text)
        assert r.content == content
    r = client.get(f"/measurements/{mid}/artifacts/iperf3-server.json", headers=auth)
    assert r.headers["content-type"] == "application/json"
    server = json.loads(r.content)
    assert server["end"]["sum_received"]["bytes"] == result.bytes_received

    # stored compressed; a re-executed task neither duplicates nor replaces them
    stored = db_session.scalars(select(MeasurementArtifact).where(
        MeasurementArtifact.measurement_id == mid)).all()
    assert gzip.decompress(next(a for a in stored if a.name == "iperf3-client.json").gzip_data) \
        == client_json
    assert _stored(db_session, cid, result) == mid
    assert len(db_session.scalars(select(MeasurementArtifact).where(
        MeasurementArtifact.measurement_id == mid)).all()) == len(stored)


def _npm_result(directory: Path) -> MeasurementResult:
    res = parse_results(directory)
    now = utcnow()
    result = MeasurementResult(
        request=MeasurementRequest(sender="A", receiver="B", duration_s=10),
        tool="netperfmeter", tool_version=res["version"] or "2.0.10",
        goodput_series=res["series"], goodput_mbps=res["goodput_mbps"],
        bytes_received=res["received_bytes"], started_at=now - timedelta(seconds=10),
        ended_at=now)
    add_result_artifacts(result, directory)
    return result


@pytest.mark.postgres
@pytest.mark.parametrize("run", ["mptcp-bulk-cubic-4MiB", "mptcp-bulk-reno-1MiB-bz2"])
def test_netperfmeter_files_go_through_the_same_path(client, auth, db_session, tmp_path, run):
    directory = tmp_path / run
    shutil.copytree(FIXTURES / run, directory)
    (directory / "passive.log").write_text("passive side log\n")
    result = _npm_result(directory)
    files = {p.name for p in directory.iterdir()}
    assert set(result.artifacts) == files  # .sca, .vec, .config and both logs
    mid = _stored(db_session, _campaign(client, auth, db_session), result)

    items = {a["name"]: a for a in client.get(f"/measurements/{mid}/artifacts").json()}
    assert set(items) == files
    for name in files:
        r = client.get(f"/measurements/{mid}/artifacts/{name}", headers=auth)
        assert r.status_code == 200
        assert r.content == (directory / name).read_bytes()
        want = ("application/x-bzip2" if name.endswith(".bz2") else "text/plain")
        assert r.headers["content-type"].split(";")[0] == want
        assert items[name]["size"] == len(r.content)
    sca = next(n for n in files if n.startswith("run-passive.sca"))
    text = client.get(f"/measurements/{mid}/artifacts/{sca}").content
    text = bz2.decompress(text) if sca.endswith(".bz2") else text
    assert b"netPerfMeter.passive.flow" in text

    # the dashboard's campaign page links every artifact of the measurement
    page = client.get(f"/dashboard/campaigns/{result_campaign(db_session, mid)}", headers=auth)
    assert page.status_code == 200
    for name in files:
        assert f"/measurements/{mid}/artifacts/{name}" in page.text


def result_campaign(db_session, mid: int) -> int:
    from models import Measurement

    return db_session.get(Measurement, mid).campaign_id


def test_artifacts_are_capped():
    now = utcnow()
    r = MeasurementResult(request=MeasurementRequest(sender="A", receiver="B"), tool="x",
                          tool_version="1", started_at=now, ended_at=now)
    r.add_artifact("big.txt", b"x" * (MAX_ARTIFACT_BYTES + 10))
    assert len(r.artifacts["big.txt"]) == MAX_ARTIFACT_BYTES
    with pytest.raises(ValueError, match="plain file name"):
        r.add_artifact("../etc/passwd", b"")


@pytest.mark.postgres
def test_unknown_ids_and_bad_names(client, auth, db_session, tmp_path):
    directory = tmp_path / "run"
    shutil.copytree(FIXTURES / "mptcp-bulk-cubic-4MiB", directory)
    mid = _stored(db_session, _campaign(client, auth, db_session), _npm_result(directory))
    base = f"/measurements/{mid}/artifacts"
    assert client.get(f"{base}/run.config", headers=auth).status_code == 200
    for url, code in [
        ("/measurements/999999/artifacts", 404),
        ("/measurements/999999/artifacts/run.config", 404),
        (f"{base}/absent.json", 404),
        ("/measurements/0/artifacts", 422),
        (f"/measurements/{2**40}/artifacts", 422),
        ("/measurements/abc/artifacts/run.config", 422),
        (f"{base}/.hidden", 422),
        (f"{base}/a%20b", 422),
        (f"{base}/..%2Fetc", 404),  # a slash: no such route
        (f"{base}/{'a' * 101}", 422),
        (f"{base}/run.config%00", 422),
    ]:
        r = client.get(url, headers=auth)
        assert r.status_code == code, (url, r.status_code, r.text)

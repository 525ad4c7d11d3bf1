"""The campaign bundle: exported from PostgreSQL, imported into another database (a SQLite file),
the answer re-derived there through `solve_campaign` equals the original; bad files are refused
with the field that is wrong; the API serves bundles and measurement tables."""

from __future__ import annotations

import gzip
import io
import json
import tarfile
from dataclasses import asdict

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from service.algorithm.topology import TopologySpec
from service.db import make_engine, session_scope, upgrade
from service.errors import Invalid, NotFound
from service.flows.answers.campaign_answer import solve_campaign
from service.flows.answers.recommend import recommend
from service.flows.takeaways import bundle_archive, measurement_table
from service.flows.takeaways.bundle_export import build_bundle, export_bundle
from service.flows.takeaways.bundle_import import import_bundle, rederive, same_answer
from service.state import CampaignState, state_of
from service.store import artifacts, campaigns, inventory, measurements, recommendations
from tests.api.calibration import seed_srl_hu
from tests.builders import paper_site

pytestmark = pytest.mark.postgres


def finished_campaign(session):
    """SRL -> HU calibrated with production's defaults, its answer given as a finished campaign
    gives it (`recommend(..., finished=)`), a raw output and a capability report stored."""
    spec = TopologySpec(local=paper_site("SRL"), remote=paper_site("HU"))
    topology = inventory.ensure_topology(session, spec=spec,
                                         rtts_ms={n: 310.0 for n in spec.subflow_names()})
    campaign = seed_srl_hu(session, topology.id, runs=2, model_kind=None,
                           commit=False)["campaign"]
    lo, hi = campaigns.buffer_range(campaign)
    outcome = recommend(session, topology_id=topology.id, delta=campaign.delta, bs_min_mib=lo,
                        bs_max_mib=hi, queue_campaign=False, finished=campaign)
    campaign.recommendation_id = outcome.recommendation_id
    first = measurements.list_runs(session, campaign_id=campaign.id, phases=("impact",))[0]
    artifacts.store_artifacts(session, measurement_id=first.id,
                              artifacts={"iperf3-client.json": b'{"end": {}}'})
    artifacts.save_capabilities(session, site_name="SRL", report={"kernel": "6.1.0-test"})
    session.flush()
    return campaign


@pytest.fixture
def other_db(tmp_path):
    url = f"sqlite:///{tmp_path / 'other.sqlite3'}"
    upgrade(url)
    engine = make_engine(url)
    yield engine
    engine.dispose()


def test_a_bundle_round_trips_into_another_database(db_session, other_db):
    campaign = finished_campaign(db_session)
    original = solve_campaign(db_session, campaign, campaign.delta,
                              *campaigns.buffer_range(campaign))
    answer = recommendations.get_recommendation(
        db_session, recommendation_id=campaign.recommendation_id)
    assert original.solution is not None and same_answer(original, answer)
    data = export_bundle(db_session, campaign_id=campaign.id)
    doc = bundle_archive.read(data).document
    assert (doc["format"], doc["version"]) == ("mpcoa-campaign-bundle", 2)
    n = len(doc["measurements"])
    assert n == measurements.list_runs(db_session, campaign_id=campaign.id,
                                       phases=("impact", "buffer", "warm", "selection")).__len__()

    with session_scope(other_db) as s:
        inventory.ensure_topology(
            s, spec=TopologySpec(local=paper_site("HU"), remote=paper_site("SRL")))
        s.flush()  # the other database already has rows: the import's ids differ
        done = import_bundle(s, data)
    assert done.measurements == n and done.artifacts == 1
    with session_scope(other_db) as s:
        imported = campaigns.get_campaign(s, campaign_id=done.campaign_id)
        assert done.topology_id != campaign.topology_id or done.campaign_id != campaign.id
        source = state_of(imported).imported.source
        assert source["campaign_id"] == campaign.id and source["database"] == "postgresql"
        assert state_of(imported).imported.capabilities["SRL"]["report"] == {
            "kernel": "6.1.0-test"}
        again = rederive(s, campaign_id=done.campaign_id)
        new_answer = recommendations.get_recommendation(
            s, recommendation_id=done.recommendation_id)
        assert new_answer.provenance["imported_from"]["campaign_id"] == campaign.id
        assert new_answer.inputs["topology_id"] == done.topology_id
        # The one solve, on the imported rows, gives the original solution to the last bit.
        assert asdict(again.solution) == asdict(original.solution)
        assert same_answer(again, new_answer) and same_answer(again, answer)
        (m0,) = [m for m in measurements.list_runs(s, campaign_id=done.campaign_id,
                                                    phases=("impact",))][:1]
        assert artifacts.get_artifact(s, measurement_id=m0.id, name="iperf3-client.json")[1] \
            == b'{"end": {}}'
        # Exported again, the imported campaign's bundle carries the same rows.
        back = build_bundle(s, campaign_id=done.campaign_id).document
    for key in ("measurements", "impact_factors", "fits", "events", "selection", "topology",
                "software", "capabilities"):
        assert _strip(back[key]) == _strip(doc[key]), key
    assert back["source"]["imported_from"]["campaign_id"] == campaign.id
    state = dict(back["campaign"].pop("run_state"))
    assert state.pop("imported")["from"]["campaign_id"] == campaign.id
    original_campaign = dict(doc["campaign"])
    original_state = dict(original_campaign.pop("run_state"))
    assert original_state.pop("imported") is None
    assert state == original_state
    assert back["campaign"] == original_campaign


def _strip(value):
    """Rows without the exporting database's ids (`source_id`, artifact paths keep index)."""
    if isinstance(value, list):
        return [_strip(v) for v in value]
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if k != "source_id"}
    return value


def test_the_measurement_table_reads_back_typed(db_session):
    campaign = finished_campaign(db_session)
    runs = measurements.list_runs(db_session, campaign_id=campaign.id,
                                  phases=measurement_table.PHASES)
    table = pq.read_table(io.BytesIO(measurement_table.render(runs, "parquet")))
    assert table.num_rows == len(runs) > 0
    types = dict(zip(table.schema.names, table.schema.types, strict=True))
    assert types["buffer_mib"] == pa.float64() and types["run"] == pa.int32()
    assert types["mean_goodput_mbps"] == pa.float64() and types["quiet"] == pa.bool_()
    assert types["started_at"] == pa.timestamp("us", tz="UTC")
    assert table.column("measurement_id").to_pylist() == [m.id for m in runs]
    assert table.column("mean_goodput_mbps").to_pylist()[3] == pytest.approx(
        runs[3].mean_goodput_mbps)
    csv_lines = measurement_table.render(runs, "csv").decode().splitlines()
    assert csv_lines[0].split(",") == table.schema.names and len(csv_lines) == len(runs) + 1


def _tar(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _with(bundle: bundle_archive.Bundle, **changes) -> bytes:
    """The bundle with some of its document's keys changed, its raw outputs kept."""
    return _tar({"bundle.json": json.dumps({**bundle.document, **changes}).encode(),
                 **{f"artifacts/{k}/{name}": data for k, named in bundle.artifacts.items()
                    for name, data in named.items()}})


def test_bad_bundles_are_refused_with_the_field(db_session, other_db):
    campaign = finished_campaign(db_session)
    bundle = build_bundle(db_session, campaign_id=campaign.id)
    doc = bundle.document
    running = {**doc["campaign"], "state": "running"}
    bad_phase = [{**doc["measurements"][0], "phase": "warp"}, *doc["measurements"][1:]]
    nan = json.dumps(doc).replace('"delta": 0.07', '"delta": NaN', 1).encode()
    cases = {
        b"not a tar": "not a readable gzip-compressed tar file",
        gzip.compress(b"{}"): "not a readable gzip-compressed tar file",
        _tar({"../evil": b"x"}): "not a member of a campaign bundle",
        _tar({"bundle.json": nan}): "not a finite number",
        _with(bundle, version=3): "this mpcoa reads version 1 or 2",
        _with(bundle, version=True): "version: version 'True': this mpcoa reads version 1 or 2",
        # a version-2 row with version 1's columns: each version reads its own row
        _with(bundle, version=1): "campaign.run_state: Extra inputs are not permitted",
        _with(bundle, surprise=1): "surprise: Extra inputs are not permitted",
        _with(bundle, campaign=running): "campaign.state",
        _with(bundle, measurements=bad_phase): "measurements.0.phase",
        _with(bundle, campaign={**doc["campaign"], "runs": "two"}): "campaign.runs",
        _with(bundle, campaign={**doc["campaign"], "ccs": "cubic"}):
            "campaign.ccs: Input should be a valid list",
        _with(bundle, measurements=[{**doc["measurements"][0], "goodput_mbps": ["x", {}]},
                                    *doc["measurements"][1:]]):
            "measurements.0.goodput_mbps.0: Input should be a valid number",
        _tar({"bundle.json": json.dumps(doc).encode(), "artifacts/0/x.json": b"{}"}):
            "'artifacts/0/x.json': a second copy, or a raw output bundle.json does not list",
        _tar({"bundle.json": json.dumps(doc).encode()}):
            "'artifacts/0/iperf3-client.json': listed in bundle.json, not in the archive",
    }
    with session_scope(other_db) as s:
        for data, expected in cases.items():
            with pytest.raises(Invalid) as err:
                import_bundle(s, data)
            said = ".".join(str(p) for p in err.value.loc) + ": " + err.value.message
            assert expected in said, said
    with pytest.raises(NotFound):
        export_bundle(db_session, campaign_id=10**9)


def test_the_api_serves_bundles_and_tables(client, db_session):
    campaign = finished_campaign(db_session)
    db_session.commit()
    r = client.get(f"/campaigns/{campaign.id}/bundle")
    assert r.status_code == 200 and r.headers["content-type"] == "application/gzip"
    assert bundle_archive.read(r.content).document["source"]["campaign_id"] == campaign.id
    r = client.get(f"/campaigns/{campaign.id}/measurements", params={"format": "parquet"})
    assert r.status_code == 200
    assert pq.read_table(io.BytesIO(r.content)).num_rows > 0
    r = client.get(f"/campaigns/{campaign.id}/measurements", params={"format": "csv"})
    assert r.status_code == 200 and r.text.startswith("measurement_id,campaign_id,phase")
    assert client.get(f"/campaigns/{campaign.id}/measurements",
                      params={"format": "xlsx"}).status_code == 422
    assert client.get("/campaigns/999999/bundle").status_code == 404
    assert client.get("/campaigns/999999/measurements").status_code == 404


def test_a_version_1_bundle_still_imports(db_session, other_db):
    """Version 1 carried the budget in seven columns and the phases' decisions in `notes`: such
    a bundle imports into the same campaign state, and answers the same."""
    from dataclasses import replace


    campaign = finished_campaign(db_session)
    answer = recommendations.get_recommendation(
        db_session, recommendation_id=campaign.recommendation_id)
    bundle = build_bundle(db_session, campaign_id=campaign.id)
    state = CampaignState.from_dict(bundle.document["campaign"]["run_state"])
    assert state.budget.done > 0 and state.budget.spent  # a budget worth carrying over
    row = {k: v for k, v in bundle.document["campaign"].items() if k != "run_state"}
    old = {**bundle.document, "version": 1,
           "campaign": {**row, **state.legacy_columns(), "notes": state.legacy_notes()}}
    data = bundle_archive.write(bundle_archive.Bundle(
        document=old, artifacts=bundle.artifacts, tables=bundle.tables))
    with session_scope(other_db) as s:
        done = import_bundle(s, data)
    with session_scope(other_db) as s:
        imported = campaigns.get_campaign(s, campaign_id=done.campaign_id)
        assert state_of(imported).imported.source["bundle_version"] == 1
        assert replace(state_of(imported), imported=None) == state
        assert same_answer(rederive(s, campaign_id=done.campaign_id), answer)

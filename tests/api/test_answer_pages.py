"""The dashboard shows an answer as the API sends it: every page that shows one renders it from
`RecommendationOut` (its `Outputs` typed), under the templates' `StrictUndefined`, so a
misspelt field fails the page instead of showing nothing; no template reads the stored
`outputs` by key. Real answers: a calibrated bulk one, a stream one and a provisional one,
each made by the service's own flows."""

from __future__ import annotations

from pathlib import Path

from api.dashboard.routes import TEMPLATES_DIR
from service.algorithm.topology import TopologySpec
from service.flows.campaign.finish import finish_campaign
from service.settings import Settings
from service.store import inventory
from tests.conftest import new_campaign

from .conftest import HU, SRL
from .stepping import drive
from .stream_seed import STREAM, seed_stream


def _topology(session, tag: str, local_isps: int = 1, remote_isps: int = 2) -> int:
    spec = TopologySpec.model_validate({
        "local": {**SRL, "name": SRL["name"] + tag, "isps": SRL["isps"][:local_isps]},
        "remote": {**HU, "name": HU["name"] + tag, "isps": HU["isps"][:remote_isps]}})
    return inventory.ensure_topology(session, spec=spec).id


def _bulk_answer(session) -> tuple[int, int]:
    topology_id = _topology(session, "b")
    c = new_campaign(session, topology_id, ccs=["reno"], runs=1, duration_s=2,
                     buffer_grid_mib=[0.1, 0.2, 0.4], mode="grid")
    drive(session, c, lambda s: 9.0 * min(1.0, s.bs_mib / 0.2) + 0.01 * s.run,
          Settings(run_campaigns=False, impact_max_runs=1, _env_file=None), ccs={"reno"})
    rec_id = finish_campaign(session, campaign_id=c.id).recommendation_id
    session.commit()
    return topology_id, rec_id


def _page(client, path: str) -> str:
    r = client.get(path)
    assert r.status_code == 200, (path, r.text[-2000:])
    return r.text


def test_every_page_showing_an_answer_renders_it_typed(client, auth, db_session):
    topology_id, rec_id = _bulk_answer(db_session)
    answer = client.get(f"/recommendations/{rec_id}", headers=auth).json()
    html = _page(client, f"/dashboard/recommendations/{rec_id}")
    assert 'id="arms-table"' in html and f"T* = {answer['t_star']['tp_mbps']:.2f}" in html
    assert "Subflows carrying data: " + ", ".join(answer["subflows_used"]) in html
    for path in (f"/dashboard/topologies/{topology_id}",
                 f"/dashboard/topologies/{topology_id}/recommendations"):
        assert f"{answer['obs_mib']:.2f} MiB" in _page(client, path)

    # a stream answer: its figures from `StreamOutputs`
    stream_topology = _topology(db_session, "s", 2, 2)
    seed_stream(db_session, stream_topology)
    db_session.commit()
    r = client.post("/recommendations", json={"topology_id": stream_topology,
                                              "objective": STREAM}, headers=auth)
    assert r.status_code == 200, r.text
    stream = r.json()["stream"]
    html = _page(client, f"/dashboard/recommendations/{r.json()['id']}")
    assert 'id="stream-figures"' in html and f"{stream['p99_ms']:.1f} ms" in html
    assert "Objective: stream of 8.000 Mbit/s, budget 150.0 ms" in html

    # a provisional one: its notes
    fresh = _topology(db_session, "p")
    db_session.commit()
    r = client.post("/recommendations", json={"topology_id": fresh}, headers=auth)
    assert r.status_code == 202, r.text
    html = _page(client, f"/dashboard/recommendations/{r.json()['id']}")
    assert "provisional" in html and r.json()["notes"][0][:40] in html


def test_no_template_reads_a_stored_answer_by_key():
    for template in Path(TEMPLATES_DIR).glob("*.html"):
        text = template.read_text()
        assert ".outputs" not in text and "out.get(" not in text, template.name

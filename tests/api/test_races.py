"""Issue 14, items 1 and 5: parallel writes against a real PostgreSQL database (not the per-test
savepoint: each request has its own connection and transaction, as in production)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from api.app import create_app
from models import Campaign, Site, Topology
from service.db import get_engine, session_scope
from service.settings import Settings
from service.store import tokens
from tests.conftest import migrated_database

from .conftest import HU, SRL

pytestmark = pytest.mark.postgres
PARALLEL = 20


@pytest.fixture(scope="module")
def race_url() -> Iterator[str]:
    with migrated_database("mpcoa_race") as url:
        yield url


@pytest.fixture
def race(race_url, tmp_path) -> Iterator[tuple[TestClient, dict[str, str]]]:
    settings = Settings(database_url=race_url, data_dir=tmp_path, run_campaigns=False,
                        db_pool_size=PARALLEL, _env_file=None)
    engine = get_engine(settings)
    with session_scope(engine) as s:
        for table in ("recommendations", "campaigns", "topologies", "sites", "api_tokens"):
            s.execute(Site.metadata.tables[table].delete())
        token = tokens.create_token(s, name="race")
    with TestClient(create_app(settings), raise_server_exceptions=False,
                    base_url="http://localhost") as client:
        yield client, {"Authorization": f"Bearer {token}"}


def _parallel(client: TestClient, calls) -> list:
    with ThreadPoolExecutor(PARALLEL) as pool:
        return list(pool.map(lambda call: call(client), calls))


def _count(race_url, model, *where) -> int:
    with session_scope(get_engine(Settings(database_url=race_url, _env_file=None))) as s:
        return s.scalar(select(func.count()).select_from(model).where(*where))


def test_parallel_site_and_topology_creation_is_201_or_409(race, race_url):
    client, auth = race
    posts = [lambda c: c.post("/sites", json=SRL, headers=auth)] * PARALLEL
    codes = Counter(r.status_code for r in _parallel(client, posts))
    assert codes == {201: 1, 409: PARALLEL - 1}, codes
    hu = client.post("/sites", json=HU, headers=auth).json()["id"]
    srl = client.get("/sites", headers=auth).json()["items"][0]["id"]
    body = {"local_site_id": srl, "remote_site_id": hu}
    posts = [lambda c: c.post("/topologies", json=body, headers=auth)] * PARALLEL
    replies = _parallel(client, posts)
    codes = Counter(r.status_code for r in replies)
    assert codes == {201: 1, 409: PARALLEL - 1}, codes
    assert all(r.headers["content-type"] == ("application/json" if r.status_code == 201
                                             else "application/problem+json") for r in replies)
    assert _count(race_url, Site) == 2 and _count(race_url, Topology) == 1


def test_parallel_inline_recommendations_share_one_topology_and_campaign(race, race_url):
    client, auth = race
    body = {"topology": {"local": SRL, "remote": HU}}
    posts = [lambda c: c.post("/recommendations", json=body, headers=auth)] * PARALLEL
    replies = _parallel(client, posts)
    assert Counter(r.status_code for r in replies) == {202: PARALLEL}, [r.text for r in replies]
    assert len({r.json()["campaign_id"] for r in replies}) == 1
    assert _count(race_url, Topology) == 1
    assert _count(race_url, Campaign, Campaign.state.in_(("queued", "running"))) == 1


def test_parallel_campaigns_one_is_queued_the_others_409(race, race_url):
    client, auth = race
    ids = [client.post("/sites", json=site, headers=auth).json()["id"] for site in (SRL, HU)]
    topo = client.post("/topologies", json={"local_site_id": ids[0], "remote_site_id": ids[1]},
                       headers=auth).json()["id"]
    body = {"topology_id": topo, "ccs": ["cubic"], "runs": 1, "duration_s": 1,
            "buffer_grid_mib": [1, 2, 4]}
    posts = [lambda c: c.post("/campaigns", json=body, headers=auth)] * PARALLEL
    codes = Counter(r.status_code for r in _parallel(client, posts))
    assert codes == {202: 1, 409: PARALLEL - 1}, codes
    assert _count(race_url, Campaign) == 1

"""Reads need a token by default on a shared server (PostgreSQL or a broker) and stay open on the
embedded demo (a SQLite file, no broker); the dashboard works through its login either way."""

from __future__ import annotations

import re

import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from service.settings import Settings
from service.store import tokens

pytestmark = pytest.mark.postgres
BASE = "http://localhost"
# open whatever the policy: liveness, the login page and its assets
OPEN = ("/health", "/dashboard/login", "/dashboard/static")


@pytest.fixture
def no_env(monkeypatch):
    for key in ("MPCOA_READS_NEED_TOKEN", "MPCOA_DATABASE_URL", "MPCOA_BROKER_URL"):
        monkeypatch.delenv(key, raising=False)


def test_the_default_follows_the_kind_of_server(no_env, tmp_path, pg_database_url):
    def default(**kw) -> bool:
        return Settings(data_dir=tmp_path, _env_file=None, **kw).reads_need_token

    assert default() is False  # the embedded default
    assert default(database_url=f"sqlite:///{tmp_path / 'demo.sqlite3'}") is False  # mpcoa demo
    assert default(database_url=pg_database_url) is True
    assert default(broker_url="redis://127.0.0.1:6379/0") is True  # workers on other hosts
    assert default(database_url=pg_database_url, reads_need_token=False) is False
    assert default(reads_need_token=True) is True


def test_the_setting_from_the_environment(no_env, tmp_path, pg_database_url, monkeypatch):
    monkeypatch.setenv("MPCOA_DATABASE_URL", pg_database_url)
    monkeypatch.setenv("MPCOA_READS_NEED_TOKEN", "")  # .env.example's: the default
    assert Settings(data_dir=tmp_path, _env_file=None).reads_need_token is True
    monkeypatch.setenv("MPCOA_READS_NEED_TOKEN", "false")
    assert Settings(data_dir=tmp_path, _env_file=None).reads_need_token is False
    monkeypatch.setenv("MPCOA_READS_NEED_TOKEN", "maybe")
    with pytest.raises(ValueError, match="reads_need_token"):
        Settings(data_dir=tmp_path, _env_file=None)


@pytest.fixture
def shared(no_env, pg_database_url, session_factory, tmp_path):
    settings = Settings(database_url=pg_database_url, data_dir=tmp_path, run_campaigns=False,
                        _env_file=None)
    assert settings.reads_need_token is True
    app = create_app(settings, session_factory=session_factory)
    with TestClient(app, base_url=BASE, follow_redirects=False,
                    raise_server_exceptions=False) as client:
        yield app, client


def _get_paths(app) -> list[str]:
    """Every GET of the API's schema, ids filled in; and the dashboard's front page."""
    paths = {re.sub(r"\{[^}/]+\}", "1", path) for path, ops in app.openapi()["paths"].items()
             if "get" in ops}
    return sorted(p for p in paths | {"/dashboard/", "/docs"} if not p.startswith(OPEN))


def test_every_read_needs_a_token_on_postgresql(shared, db_session):
    app, client = shared
    paths = _get_paths(app)
    for costly in ("/campaigns/1/bundle", "/topologies/1/apply-plan", "/sites"):
        assert costly in paths
    for path in paths:
        r = client.get(path)
        if path.startswith(("/dashboard", "/docs", "/redoc")):
            assert r.status_code == 303 and "/dashboard/login" in r.headers["location"], path
            continue
        assert r.status_code == 401, (path, r.status_code, r.text[:200])
        assert r.json()["detail"] == ("a valid API token is needed (Authorization: Bearer "
                                      "<token>)"), path
        assert r.headers["www-authenticate"] == "Bearer"
    assert client.get("/health").json()["reads_need_token"] is True

    reader = tokens.create_token(db_session, name="reader", scope="read")
    db_session.commit()
    r = client.get("/sites", headers={"Authorization": "Bearer not-a-token"})
    assert r.status_code == 401
    r = client.get("/topologies/999999/apply-plan", headers={"Authorization": f"Bearer {reader}"})
    assert r.status_code == 404  # past the token check: the topology is unknown
    assert client.get("/campaigns/999999/bundle",
                      headers={"Authorization": f"Bearer {reader}"}).status_code == 404


def test_the_dashboard_logs_in_and_reads_with_its_cookie(shared, db_session):
    _app, client = shared
    reader = tokens.create_token(db_session, name="dash-reader", scope="read")
    db_session.commit()
    assert client.get("/dashboard/").status_code == 303
    r = client.post("/dashboard/login", data={"token": reader, "next": "/dashboard/"},
                    headers={"Origin": BASE})
    assert r.status_code == 303 and r.headers["location"] == "/dashboard/"
    page = client.get("/dashboard/")
    assert page.status_code == 200 and "<html" in page.text
    assert client.get("/sites").status_code == 200  # the pages' own fetches, by cookie
    assert client.get("/topologies/999999/apply-plan").status_code == 404
    # never a write credential
    assert client.post("/sites", json={"name": "X", "isps": []}).status_code == 401

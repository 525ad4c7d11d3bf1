"""Issue 14, item 9: with reads needing a token, the dashboard and the docs work in a browser
through a login (a signed, HttpOnly, SameSite=Strict session cookie), stay closed without it, and
load no asset from another host; tokens have a scope and an optional expiry; free text and
bandwidths are checked."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from models import utcnow
from service.settings import Settings
from service.store import tokens

from .conftest import HU, SRL

pytestmark = pytest.mark.postgres
BASE = "http://localhost"


@pytest.fixture
def closed(pg_database_url, session_factory, tmp_path):
    settings = Settings(database_url=pg_database_url, data_dir=tmp_path, reads_need_token=True,
                        run_campaigns=False, _env_file=None)
    with TestClient(create_app(settings, session_factory=session_factory), base_url=BASE,
                    follow_redirects=False, raise_server_exceptions=False) as client:
        yield client


def _login(client, token, next_url="/dashboard/"):
    return client.post("/dashboard/login", data={"token": token, "next": next_url},
                       headers={"Origin": BASE})


def test_pages_and_docs_need_a_login_and_work_after_it(closed, token):
    for path in ("/dashboard/", "/docs", "/redoc"):
        r = closed.get(path)
        assert r.status_code == 303 and r.headers["location"].startswith("/dashboard/login?next=")
    assert closed.get("/openapi.json").status_code == 401
    assert closed.get("/sites").status_code == 401
    assert closed.get("/dashboard/login").status_code == 200
    assert closed.get("/dashboard/static/dashboard.css").status_code == 200
    r = _login(closed, token, "/docs")
    assert r.status_code == 303 and r.headers["location"] == "/docs"
    cookie = r.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie.replace("Strict", "strict")
    assert token not in cookie
    for path in ("/dashboard/", "/docs", "/redoc", "/openapi.json", "/sites"):
        assert closed.get(path).status_code == 200, path
    # The cookie is never a write credential.
    assert closed.post("/sites", json=SRL).status_code == 401
    r = closed.post("/dashboard/logout", headers={"Origin": BASE})
    assert r.status_code == 303
    closed.cookies.clear()
    assert closed.get("/docs").status_code == 303


def test_login_refuses_bad_tokens_other_origins_and_open_redirects(closed, token):
    r = _login(closed, "mpcoa_wrong")
    assert r.status_code == 401 and "not valid" in r.text and "set-cookie" not in r.headers
    r = closed.post("/dashboard/login", data={"token": token},
                    headers={"Origin": "https://evil.example"})
    assert r.status_code == 403 and "set-cookie" not in r.headers
    r = _login(closed, token, "//evil.example/x")
    assert r.status_code == 303 and r.headers["location"] == "/dashboard/"
    r = _login(closed, token, "https://evil.example/")
    assert r.headers["location"] == "/dashboard/"


def test_a_forged_or_revoked_session_is_no_session(closed, token, db_session):
    _login(closed, token)
    value = closed.cookies.get("mpcoa_session")
    session_id, expires, signature = value.split(".")
    closed.cookies.clear()
    forged = f"{session_id}.{int(expires) + 3600}.{signature}"
    closed.cookies.set("mpcoa_session", forged)
    assert closed.get("/sites").status_code == 401
    closed.cookies.set("mpcoa_session", value)
    assert closed.get("/sites").status_code == 200
    tokens.revoke_token(db_session, name="tests")
    db_session.commit()
    assert closed.get("/sites").status_code == 401


def test_docs_load_no_asset_from_another_host(closed, token):
    _login(closed, token)
    for page in ("/docs", "/redoc"):
        html = closed.get(page).text
        urls = re.findall(r"""(?:src|href)=["']([^"']+)""", html)
        assert urls and all(u.startswith("/") for u in urls), urls
        assert "cdn" not in html.lower() and "googleapis" not in html
        for url in urls:
            if url.startswith("/docs-assets/"):
                assert closed.get(url).status_code == 200, url


def test_token_scope_and_expiry(client, db_session):
    reader = tokens.create_token(db_session, name="reader", scope="read")
    old = tokens.create_token(db_session, name="old", expires_at=utcnow() - timedelta(seconds=1))
    soon = tokens.create_token(db_session, name="soon", expires_at=utcnow() + timedelta(hours=1))
    db_session.commit()
    r = client.post("/sites", json=SRL, headers={"Authorization": f"Bearer {reader}"})
    assert r.status_code == 403 and "scope" in r.json()["detail"]
    r = client.post("/sites", json=SRL, headers={"Authorization": f"Bearer {old}"})
    assert r.status_code == 401
    r = client.post("/sites", json=SRL, headers={"Authorization": f"Bearer {soon}"})
    assert r.status_code == 201


def test_descriptions_reject_control_and_bidi_characters(client, auth):
    for bad in ("evil\u202eexe.txt", "a\u2066b", "x\u200fy", "z\u061c", "line\nbreak", "nul\x00",
                "del\x7f", "c1\x85"):
        r = client.post("/sites", json={**SRL, "description": bad}, headers=auth)
        assert r.status_code == 422, repr(bad)
        assert r.json()["errors"][0]["loc"] == ["body", "description"]
    r = client.post("/sites", json={**SRL, "description": "Simula — Fornebu, Norge ✓"},
                    headers=auth)
    assert r.status_code == 201


def test_bandwidths_are_numbers_not_strings(client, auth):
    isp = {**HU["isps"][0], "down_kbps": "100000"}
    r = client.post("/sites", json={**HU, "isps": [isp, HU["isps"][1]]}, headers=auth)
    assert r.status_code == 422
    assert r.json()["errors"][0]["loc"] == ["body", "isps", 0, "down_kbps"]
    for value in (True, "1e5", None):
        isp = {**HU["isps"][0], "up_kbps": value}
        assert client.post("/sites", json={**HU, "isps": [isp]}, headers=auth).status_code == 422
    assert client.post("/sites", json=HU, headers=auth).status_code == 201

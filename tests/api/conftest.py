"""API fixtures: the app on the test's PostgreSQL transaction, a write token, paper data."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from service.settings import Settings
from service.store import tokens

# Table 1 of the paper (kbit/s).
SRL = {
    "name": "SRL",
    "isps": [
        {"name": "Uninett", "label": "U", "down_kbps": 100000, "up_kbps": 100000},
        {"name": "Kvantel", "label": "K", "down_kbps": 1000000, "up_kbps": 1000000},
        {"name": "PowerTech", "label": "P", "down_kbps": 6000, "up_kbps": 256},
        {"name": "Telenor", "label": "T", "down_kbps": 3000, "up_kbps": 768},
    ],
}
HU = {
    "name": "HU",
    "isps": [
        {"name": "CERNET", "label": "C", "down_kbps": 100000, "up_kbps": 100000},
        {"name": "CnUnicom", "label": "CU", "down_kbps": 20000, "up_kbps": 20000},
    ],
}
UIT = {
    "name": "UiT",
    "isps": [
        {"name": "PowerTech", "label": "P", "down_kbps": 6000, "up_kbps": 512},
        {"name": "Telenor", "label": "T", "down_kbps": 2000, "up_kbps": 384},
    ],
}
HAW = {
    "name": "HAW",
    "isps": [{"name": "DFN", "label": "D", "down_kbps": 100000, "up_kbps": 100000}],
}


@pytest.fixture
def settings(tmp_path, database_url) -> Settings:
    # The API's own tests only queue campaigns; running them is tests/workers' business. On
    # PostgreSQL reads need a token by default: these tests read the pages and answers
    # themselves, so reads are open here; the policy has tests of its own
    # (test_read_tokens.py, test_browser_session.py).
    return Settings(
        database_url=database_url, data_dir=tmp_path, run_campaigns=False,
        reads_need_token=False, _env_file=None
    )


@pytest.fixture
def app(settings, session_factory):
    return create_app(settings, session_factory=session_factory)


@pytest.fixture
def client(app) -> Iterator[TestClient]:
    with TestClient(app, raise_server_exceptions=False, base_url="http://localhost") as c:
        yield c


@pytest.fixture
def token(db_session) -> str:
    value = tokens.create_token(db_session, name="tests")
    db_session.commit()
    return value


@pytest.fixture
def auth(token) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}

"""What the CLI tests share: `mpcoa ARGS...` run in process on the test's database."""

from __future__ import annotations

import os

import pytest
from typer.testing import CliRunner

from cli.main import app
from service.db import _engines
from service.settings import get_settings


@pytest.fixture
def mpcoa(database_url, tmp_path, monkeypatch):
    """Run `mpcoa ARGS...` on the test's database; (status, stdout, stderr)."""
    for key in [k for k in os.environ if k.startswith("MPCOA_")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("MPCOA_DATABASE_URL", database_url)
    monkeypatch.setenv("MPCOA_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("MPCOA_RUN_CAMPAIGNS", "false")
    get_settings.cache_clear()

    def run(*args: str) -> tuple[int, str, str]:
        r = CliRunner().invoke(app, list(args), catch_exceptions=False)
        return r.exit_code, r.stdout, r.stderr

    yield run
    get_settings.cache_clear()
    engine = _engines.pop(database_url, None)
    if engine is not None:
        engine.dispose()

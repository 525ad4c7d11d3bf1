"""Alembic from an empty database: upgrade, models match, downgrade, upgrade again."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import inspect

from models import Base
from service import db

from ..conftest import create_database, drop_database, pg_url

REPO = Path(__file__).resolve().parents[2]


def _roundtrip(url: str) -> None:
    db.upgrade(url)
    engine = db.make_engine(url)
    try:
        with engine.connect() as conn:
            assert set(Base.metadata.tables) <= set(inspect(conn).get_table_names())
            diff = compare_metadata(
                MigrationContext.configure(conn, opts={"compare_type": True}), Base.metadata
            )
            assert diff == [], diff
        assert db.current_revision(url) is not None
        db.downgrade(url, "base")
        with engine.connect() as conn:
            assert set(inspect(conn).get_table_names()) <= {"alembic_version"}
        assert db.current_revision(url) is None
        db.upgrade(url)
        with engine.connect() as conn:
            assert set(Base.metadata.tables) <= set(inspect(conn).get_table_names())
    finally:
        engine.dispose()


@pytest.mark.postgres
def test_upgrade_downgrade_postgres():
    name = create_database("mpcoa_migr")
    try:
        _roundtrip(pg_url(name))
    finally:
        drop_database(name)


def test_upgrade_downgrade_sqlite(tmp_path):
    _roundtrip(f"sqlite:///{tmp_path / 'sub' / 'm.sqlite3'}")


def test_alembic_command_line_works_from_the_repo(tmp_path):
    url = f"sqlite:///{tmp_path / 'cli.sqlite3'}"
    env = {"MPCOA_DATABASE_URL": url, "PATH": "/usr/bin:/bin"}
    alembic = Path(sys.executable).with_name("alembic")
    out = subprocess.run([str(alembic), "upgrade", "head"], cwd=REPO, env=env,
                         capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    assert db.current_revision(url) is not None

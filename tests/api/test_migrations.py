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

pytestmark = pytest.mark.slow  # starts server processes or subprocesses (docs/testing.md)

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


def _two_active_campaigns_at_0003(url: str) -> None:
    from sqlalchemy import text

    db.upgrade(url, "0003")
    engine = db.make_engine(url)
    try:
        with engine.begin() as conn:
            for name in ("A", "B"):
                conn.execute(text("INSERT INTO sites (name, description, created_at, updated_at)"
                                  " VALUES (:n, '', CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)"),
                             {"n": name})
            conn.execute(text("INSERT INTO topologies (local_site_id, remote_site_id, created_at,"
                              " updated_at) VALUES (1, 2, CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)"))
            for state in ("queued", "running", "done"):
                conn.execute(text(
                    "INSERT INTO campaigns (topology_id, state, reason, ccs, pms, buffer_grid_mib,"
                    " runs, duration_s, delta, model_kind, probes_total, probes_done,"
                    " probe_seconds_used, notes, dropped_ccs, extra_rounds, budget_exhausted,"
                    " extra_impact_runs, seed, created_at, updated_at) VALUES (1, :s, 'test',"
                    " '[]', '[]', '[]', 1, 1, 0.07, 'paper', 0, 0, 0, '{}', '{}', 0, false,"
                    " '{}', 0, CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)"), {"s": state})
    finally:
        engine.dispose()


@pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_0004_keeps_one_active_campaign_per_topology(backend, tmp_path):
    """Two active campaigns a race left behind: the upgrade cancels the newer, then the index
    refuses a second active one."""
    from sqlalchemy import text
    from sqlalchemy.exc import IntegrityError

    name = create_database("mpcoa_m4") if backend == "postgres" else None
    url = pg_url(name) if name else f"sqlite:///{tmp_path / 'm4.sqlite3'}"
    try:
        _two_active_campaigns_at_0003(url)
        db.upgrade(url)
        engine = db.make_engine(url)
        try:
            with engine.connect() as conn:
                rows = conn.execute(text("SELECT id, state, error FROM campaigns ORDER BY id"))
                states = [(r.id, r.state, bool(r.error)) for r in rows]
            assert states == [(1, "queued", False), (2, "cancelled", True), (3, "done", False)]
            with pytest.raises(IntegrityError), engine.begin() as conn:
                conn.execute(text("UPDATE campaigns SET state = 'running' WHERE id = 3"))
        finally:
            engine.dispose()
        db.downgrade(url, "0003")
        assert db.current_revision(url) == "0003"
    finally:
        if name:
            drop_database(name)


def _paced_campaign_at_0027(url: str) -> None:
    from sqlalchemy import text

    db.upgrade(url, "0027")
    engine = db.make_engine(url)
    try:
        with engine.begin() as conn:
            for name in ("A", "B"):
                conn.execute(text("INSERT INTO sites (name, description, created_at, updated_at)"
                                  " VALUES (:n, '', CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)"),
                             {"n": name})
            conn.execute(text("INSERT INTO topologies (local_site_id, remote_site_id, created_at,"
                              " updated_at) VALUES (1, 2, CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)"))
            conn.execute(text(
                "INSERT INTO campaigns (topology_id, state, reason, ccs, pms, buffer_grid_mib,"
                " runs, duration_s, delta, model_kind, dropped_ccs, seed, run_state, probe_tool,"
                " created_at, updated_at) VALUES (1, 'done', 'test', '[]', '[]', '[]', 1, 1,"
                " 0.07, 'paper', '{}', 0, '{}', 'iperf3', CURRENT_TIMESTAMP,"
                " CURRENT_TIMESTAMP)"))
            conn.execute(text(
                "INSERT INTO measurements (campaign_id, phase, pm, cc, bs_mib, run,"
                " excluded_subflow, subflows, duration_s, interval_s, goodput_mbps,"
                " subflow_bytes, rtt_ms, rto_ms, tool, tool_version, raw_output, status,"
                " started_at, finished_at, created_at, observed_subflows, effective_buffers,"
                " warmup_s) VALUES (1, 'buffer', 'FullMesh', 'cubic', 1, 0, '', '[]', 1, 1,"
                " '[]', '{}', '{}', '{}', 'mpcoa-paced', '1', '', 'ok', CURRENT_TIMESTAMP,"
                " CURRENT_TIMESTAMP, CURRENT_TIMESTAMP, '[]', '{}', 0)"))
    finally:
        engine.dispose()


@pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_0028_takes_any_tool_and_gives_the_paced_tool_one_name(backend, tmp_path):
    """After 0028 the table takes a tool the plan validated (a registered plug-in), the paced
    tool's measurements carry its one name; the downgrade keeps every row (a plug-in tool's
    campaign asked as auto) and the CHECK refuses an unknown tool again."""
    from sqlalchemy import text
    from sqlalchemy.exc import IntegrityError

    name = create_database("mpcoa_m28") if backend == "postgres" else None
    url = pg_url(name) if name else f"sqlite:///{tmp_path / 'm28.sqlite3'}"
    try:
        _paced_campaign_at_0027(url)
        db.upgrade(url, "0028")
        engine = db.make_engine(url)
        try:
            with engine.begin() as conn:
                assert conn.execute(text("SELECT tool FROM measurements")).scalar() == "paced"
                conn.execute(text("INSERT INTO campaigns (topology_id, state, reason, ccs, pms,"
                                  " buffer_grid_mib, runs, duration_s, delta, model_kind,"
                                  " dropped_ccs, seed, run_state, probe_tool, created_at,"
                                  " updated_at) SELECT topology_id, state, reason, ccs, pms,"
                                  " buffer_grid_mib, runs, duration_s, delta, model_kind,"
                                  " dropped_ccs, seed, run_state, 'toy', created_at, updated_at"
                                  " FROM campaigns WHERE id = 1"))
            db.downgrade(url, "0027")
            with engine.begin() as conn:
                tools = conn.execute(text("SELECT id, probe_tool FROM campaigns ORDER BY id"))
                assert [tuple(r) for r in tools] == [(1, "iperf3"), (2, "auto")]
                assert conn.execute(text("SELECT tool FROM measurements")).scalar() == (
                    "mpcoa-paced")
            with pytest.raises(IntegrityError), engine.begin() as conn:
                conn.execute(text("UPDATE campaigns SET probe_tool = 'toy' WHERE id = 1"))
        finally:
            engine.dispose()
        db.upgrade(url)
    finally:
        if name:
            drop_database(name)

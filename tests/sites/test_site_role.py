"""The site hosts' database role (deploy/site-role.sql) on the real PostgreSQL: a site worker's
credentials do what a site worker does, through the service's own code, and cannot mint a token,
read a dashboard login, change a schedule, a topology or a site, delete measurements or touch
the schema. (tests/sites/test_deploy_guide.py runs a whole campaign, apply and rollback with the
site workers on this role.)"""

from __future__ import annotations

import os
import re
import subprocess
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import select, text
from sqlalchemy.exc import ProgrammingError

from models import Base, Campaign, utcnow
from service import db
from service.flows.campaign import recording
from service.store import applied, artifacts, probesessions, sitelocks, tokens
from service.store.measurements import MeasurementRecord
from tests.api.migration_walk import populate
from tests.conftest import PG_HOST, PG_USER, create_database, drop_database, pg_admin, pg_url

REPO = Path(__file__).resolve().parents[2]
SQL = REPO / "deploy" / "site-role.sql"


def test_every_table_is_named_in_the_site_role():
    """A new table must be decided on: granted to the site role, or listed as not."""
    named = set(re.findall(r"\b([a-z_]+)\b", SQL.read_text()))
    tables = set(Base.metadata.tables) | {"alembic_version"}
    assert tables - named == set()


@pytest.fixture
def site_role():
    """A migrated, populated database and a login role given deploy/site-role.sql's grants,
    as the guide does; (owner's URL, the role's URL). Both dropped afterwards."""
    name = create_database("mpcoa_role")
    role = f"mpcoa_site_{os.getpid()}_{uuid.uuid4().hex[:6]}"
    engines = []
    try:
        with pg_admin() as conn:
            conn.execute(f'CREATE ROLE "{role}" LOGIN')
        url = pg_url(name)
        db.upgrade(url)
        populate(url)
        done = subprocess.run(
            ["psql", "-h", PG_HOST, "-U", PG_USER, "-d", name, "-v", "ON_ERROR_STOP=1", "-v",
             f"site_role={role}", "-q"], stdin=SQL.open(), capture_output=True, text=True,
            timeout=60, check=False)
        assert done.returncode == 0, done.stderr
        yield url, f"postgresql+psycopg://{role}@{PG_HOST}/{name}", engines
    finally:
        for engine in engines:
            engine.dispose()
        drop_database(name)
        with pg_admin() as conn:
            conn.execute(f'DROP ROLE IF EXISTS "{role}"')


def _engine(engines, url):
    engine = db.make_engine(url, pool_size=1)
    engines.append(engine)
    return engine


@pytest.mark.postgres
def test_a_site_workers_role_writes_what_a_site_worker_writes(site_role):
    _owner, url, engines = site_role
    engine = _engine(engines, url)
    with db.session_scope(engine) as s:
        campaign = s.scalars(select(Campaign)).one()
        start = utcnow()
        _row, created = recording.record(s, MeasurementRecord(
            campaign_id=campaign.id, phase="buffer", pm="FullMesh", cc="cubic", bs_mib=9.5,
            run=0, subflows=["K-C"], goodput_mbps=[10.0], duration_s=1, tool="synthetic",
            tool_version="1", raw_output="{}", started_at=start,
            finished_at=start + timedelta(seconds=1), rtt_ms={"K-C": 30.0}))
        assert created
        session = probesessions.open_session(s, campaign_id=campaign.id, lease_id="site",
                                             step_key="buffer/x", deadline=utcnow())
        probesessions.mark_ready(s, row=session, port=5201, receiver_addrs={"C": "192.0.2.1"},
                                 pid=1, report={})
        # the populated database's hold on the sites has run out an hour from now
        assert sitelocks.acquire_sites(s, sites=["SRL"], holder="site-worker",
                                       lasts=timedelta(minutes=1),
                                       now=utcnow() + timedelta(hours=1))
        artifacts.save_capabilities(s, site_name="HU", report={"kernel": "6.1.0-site"})
        apply_id = s.execute(text("SELECT id FROM applied_answers")).scalar_one()
        applied.report_site(s, apply_id=apply_id, site="SRL", report={"state": "applied"})


@pytest.mark.postgres
@pytest.mark.parametrize(("what", "statement"), [
    ("mint a token", None),
    ("read the dashboard's logins", "SELECT id FROM browser_sessions"),
    ("read the tokens' hashes", "SELECT token_hash FROM api_tokens"),
    ("revoke or re-scope a token", "UPDATE api_tokens SET scope = 'write'"),
    ("change a schedule", "UPDATE recalibration_schedules SET cron = '* * * * *'"),
    ("re-point a topology", "UPDATE topologies SET remote_site_id = local_site_id"),
    ("change a site's ISPs", "UPDATE isps SET down_kbps = 1"),
    ("delete measurements", "DELETE FROM measurements"),
    ("create a table", "CREATE TABLE site_owned (x int)"),
    ("drop a table", "DROP TABLE measurements"),
    ("change the schema's version", "UPDATE alembic_version SET version_num = '0001'"),
])
def test_a_site_workers_role_cannot(site_role, what, statement):
    owner, url, engines = site_role
    engine = _engine(engines, url)
    with (pytest.raises(ProgrammingError, match=r"permission denied|must be owner"),  # noqa: PT012
          db.session_scope(engine) as s):
        if statement is None:
            tokens.create_token(s, name="from-a-site-host")
        else:
            s.execute(text(statement))
    with _engine(engines, owner).connect() as conn:  # nothing changed
        assert conn.execute(text("SELECT count(*) FROM api_tokens")).scalar() == 1
        assert conn.execute(text("SELECT count(*) FROM measurements")).scalar() > 100
        assert conn.execute(text("SELECT count(*) FROM isps WHERE down_kbps = 1")).scalar() == 0

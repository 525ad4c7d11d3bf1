"""The API reads the answer generation on one connection it keeps (autocommit, no checkout): a read
sees every change committed before it, and a connection the server dropped is replaced."""

from __future__ import annotations

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from service import db
from service.algorithm.topology import TopologySpec
from service.store import answer_generation, inventory

from ..conftest import migrated_database
from .conftest import HU, SRL


def _add_topology(engine) -> None:
    """A change an answer depends on, made the way the API makes it."""
    with db.session_scope(engine) as s:
        inventory.ensure_topology(s, spec=TopologySpec.model_validate({"local": SRL, "remote": HU}))


def _reads_see_each_commit(engine) -> answer_generation.HeldReader:
    reader = answer_generation.HeldReader(db.make_sessionmaker(engine))
    before = reader.read()
    _add_topology(engine)
    after = reader.read()
    assert after > before
    assert reader.read() == after  # nothing new: the same value, on the same connection
    return reader


@pytest.mark.postgres
def test_a_held_read_sees_each_commit_and_outlives_a_dropped_connection():
    with migrated_database() as url:
        engine = db.make_engine(url, pool_size=2)
        try:
            reader = _reads_see_each_commit(engine)
            value = reader.read()
            with engine.connect() as admin:
                dropped = admin.execute(text(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE datname = current_database() AND pid <> pg_backend_pid() "
                    "AND query LIKE '%answer_generation%'")).scalars().all()
            assert dropped == [True]
            with pytest.raises(DBAPIError):
                reader.read()  # the caller sees the failure (the API answers 503 for it) ...
            assert reader.read() == value  # ... and the next read opens a new connection
            reader.close()
        finally:
            engine.dispose()


@pytest.fixture
def sqlite_engine(tmp_path):
    url = f"sqlite:///{tmp_path / 'mpcoa.db'}"
    db.upgrade(url)
    engine = db.make_engine(url)
    yield engine
    engine.dispose()


def test_a_held_read_on_sqlite_sees_each_commit(sqlite_engine):
    _reads_see_each_commit(sqlite_engine).close()


def test_a_factory_that_is_not_a_sessionmaker_is_read_through_its_sessions(sqlite_engine):
    sessions = db.make_sessionmaker(sqlite_engine)
    reader = answer_generation.HeldReader(lambda: sessions())  # as a test app picks its own
    before = reader.read()
    _add_topology(sqlite_engine)
    assert reader.read() > before
    reader.close()

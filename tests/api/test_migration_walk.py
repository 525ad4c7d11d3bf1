"""Every migration, down and up, on a database full of rows, on PostgreSQL and SQLite: no row is
lost and no value changes; an automatic upgrade of a SQLite file keeps a copy until its check
passed, and `mpcoa serve` on a populated database at an older revision keeps every row."""

from __future__ import annotations

import itertools
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from sqlalchemy import text

from service import db
from service.upgrade_guard import UpgradeFailed
from tests.support import SERVE_START_S, free_port, wait_for

from ..conftest import create_database, drop_database, pg_url
from .migration_walk import MOVED, lost, populate, restrict, revisions, snapshot

pytestmark = pytest.mark.slow  # about 10 s of migrations per engine, and `mpcoa serve`

BIN = Path(sys.executable).parent


@pytest.fixture
def backend_url(request, tmp_path):
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'walk.sqlite3'}"
        return
    name = create_database("mpcoa_walk")
    try:
        yield pg_url(name)
    finally:
        drop_database(name)


@pytest.mark.parametrize(
    "backend_url", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)],
    indirect=True)
def test_every_migration_down_and_up_keeps_every_row(backend_url):
    url = backend_url
    db.upgrade(url)
    populate(url)
    revs = revisions()
    head = snapshot(url)
    assert all(head.values()), [t for t, rows in head.items() if not rows]  # every table has rows
    at = {revs[-1]: head}
    for older, newer in reversed(list(itertools.pairwise(revs))):
        db.downgrade(url, older)
        at[older] = snapshot(url)
        assert lost(at[newer], at[older], MOVED.get(newer, ())) == [], f"down to {older}"
    bottom = at[revs[0]]
    assert bottom["measurements"] and bottom["campaigns"]
    now = bottom
    for newer in revs[1:]:
        db.upgrade(url, newer)  # the path every automatic upgrade takes
        before, now = now, snapshot(url)
        assert lost(before, now, MOVED.get(newer, ())) == [], f"up to {newer}"
    # Back at head: every row of the tables the first revision has, each column it has as it was
    # written at head (the columns later revisions added were dropped on the way down).
    assert lost(restrict(head, bottom), now) == []
    assert len(now["measurements"]) == len(head["measurements"]) > 100


def _at(url: str, revision: str) -> None:
    db.upgrade(url)
    populate(url)
    db.downgrade(url, revision)


def test_a_failed_check_keeps_the_copy(tmp_path, caplog):
    """A row whose parent is gone (written with foreign keys off) fails the upgrade's check: the
    error names the copy, and the copy is the database as it was."""
    path = tmp_path / "old.sqlite3"
    url = f"sqlite:///{path}"
    _at(url, "0016")
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA foreign_keys=OFF")
        conn.execute("UPDATE measurements SET campaign_id = 999 WHERE id = 1")
    rows_before = snapshot(url)
    with pytest.raises(UpgradeFailed) as failed:
        db.upgrade(url)
    message = str(failed.value)
    assert "point at missing parents (measurements -> campaigns)" in message
    copies = list(tmp_path.glob("old.sqlite3.before-upgrade-from-0016-*"))
    assert len(copies) == 1 and str(copies[0]) in message
    assert str(copies[0]) in caplog.text  # named before the upgrade started
    assert snapshot(f"sqlite:///{copies[0]}") == rows_before
    assert oct(copies[0].stat().st_mode & 0o777) == "0o600"


def test_an_upgrade_that_passed_removes_its_copy(tmp_path, caplog):
    path = tmp_path / "old.sqlite3"
    url = f"sqlite:///{path}"
    _at(url, "0016")
    before = snapshot(url)
    db.upgrade(url)
    assert lost(before, snapshot(url)) == []
    assert "copied to" in caplog.text and "every row kept; removed the copy" in caplog.text
    assert list(tmp_path.glob("old.sqlite3.before-upgrade-*")) == []
    caplog.clear()
    db.upgrade(url)  # at head: nothing to copy
    assert "copied to" not in caplog.text


def test_serve_on_a_populated_database_at_the_first_revision_keeps_every_row(tmp_path):
    """An embedded user who updates mpcoa: `mpcoa serve` upgrades by itself, from the oldest
    revision there is, and every row is there; the log named the copy it kept meanwhile."""
    data = tmp_path / "data" / "mpcoa"
    url = f"sqlite:///{data / 'mpcoa.sqlite3'}"
    first = revisions()[0]
    _at(url, first)
    before = snapshot(url)
    assert before["measurements"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("MPCOA_")}
    env.update({"HOME": str(tmp_path), "XDG_DATA_HOME": str(tmp_path / "data"),
                "MPCOA_RUN_CAMPAIGNS": "false"})
    port = free_port()
    proc = subprocess.Popen([str(BIN / "mpcoa"), "serve", "--port", str(port)], env=env,
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    try:
        def health():
            try:
                return httpx.get(f"http://127.0.0.1:{port}/health", timeout=2)
            except httpx.TransportError:
                assert proc.poll() is None, proc.stdout.read()
                return None

        assert wait_for(health, SERVE_START_S, "mpcoa serve to answer").status_code == 200
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=30)
    assert f"is at revision {first}: copied to {data / 'mpcoa.sqlite3'}.before-upgrade-from-" in out
    assert "every row kept; removed the copy" in out
    after = snapshot(url)
    assert db.current_revision(url) == revisions()[-1]
    assert lost(before, after, MOVED["0003"]) == []
    engine = db.make_engine(url)
    try:
        with engine.connect() as conn:
            assert conn.execute(text("SELECT count(*) FROM measurements")).scalar() == len(
                before["measurements"])
    finally:
        engine.dispose()


def test_an_upgrade_to_head_from_every_earlier_revision_keeps_every_row(tmp_path):
    """What `mpcoa serve` does with an embedded database at any earlier revision, full of rows:
    one upgrade to head (the path every automatic upgrade takes), from each revision in turn."""
    path = tmp_path / "walk.sqlite3"
    url = f"sqlite:///{path}"
    db.upgrade(url)
    populate(url)
    revs = revisions()
    at: dict[str, dict] = {}
    for older in reversed(revs[:-1]):
        db.downgrade(url, older)
        copy = tmp_path / f"at-{older}.sqlite3"
        with sqlite3.connect(path) as source, sqlite3.connect(copy) as target:
            source.backup(target)
        at[older] = snapshot(f"sqlite:///{copy}")
    for older, before in at.items():
        copy = f"sqlite:///{tmp_path / f'at-{older}.sqlite3'}"
        db.upgrade(copy)
        assert db.current_revision(copy) == revs[-1]
        moved = MOVED["0003"] if older < "0003" else ()
        assert lost(before, snapshot(copy), moved) == [], f"from {older}"
    assert list(tmp_path.glob("*.before-upgrade-*")) == []  # every copy passed and was removed

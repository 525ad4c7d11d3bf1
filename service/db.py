"""Engines, sessions and schema migrations (Alembic, configured programmatically)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.orm import Session, sessionmaker

from .errors import Invalid
from .settings import Settings, get_settings
from .upgrade_guard import guarded_upgrade, sqlite_file

if TYPE_CHECKING:
    from alembic.config import Config

MIGRATIONS_DIR = Path(__file__).resolve().parent.parent / "migrations"

_engines: dict[str, Engine] = {}


def _sqlite_pragmas(dbapi_connection, _record) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA busy_timeout=5000")
    cursor.close()


def make_engine(url: str, pool_size: int = 10) -> Engine:
    """A new engine; SQLite gets foreign keys, WAL and a busy timeout; its folder is created."""
    if url.startswith("sqlite"):
        path = url.split("///", 1)[-1]
        if path and path != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(url, connect_args={"check_same_thread": False})
        event.listen(engine, "connect", _sqlite_pragmas)
        return engine
    return create_engine(url, pool_size=pool_size, max_overflow=pool_size, pool_pre_ping=True)


def get_engine(settings: Settings | None = None) -> Engine:
    """The process-wide engine for the settings' database URL (one per URL)."""
    settings = settings or get_settings()
    url = settings.effective_database_url
    if url not in _engines:
        _engines[url] = make_engine(url, settings.db_pool_size)
    return _engines[url]


def make_sessionmaker(engine: Engine) -> sessionmaker[Session]:
    return sessionmaker(bind=engine, expire_on_commit=False)


@contextmanager
def session_scope(engine: Engine | None = None) -> Iterator[Session]:
    """A session that commits on success and rolls back on error (for workers and the CLI)."""
    factory = make_sessionmaker(engine or get_engine())
    session = factory()
    try:
        yield session
        session.commit()
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()


def alembic_config(url: str) -> Config:
    """Alembic's config pointing at the packaged migrations, whatever the CWD. Alembic (with
    Mako and Pygments) is imported here, where a migration runs, not by every command's start."""
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    cfg.attributes["configured_by_mpcoa"] = True
    return cfg


def upgrade(url: str | None = None, revision: str = "head") -> None:
    """Upgrade the schema to `revision`. A SQLite file with rows at an older revision is copied
    first and checked afterwards (`service.upgrade_guard`); an unknown revision is `Invalid`."""
    url = url or get_settings().effective_database_url
    from alembic import command

    cfg = alembic_config(url)
    target = _target(cfg, revision)
    path = sqlite_file(url)
    if path is None:
        _alembic(command.upgrade, cfg, revision)
        return
    make_engine(url).dispose()  # creates the file's folder
    current = current_revision(url) if path.exists() else None
    guarded_upgrade(path, current, at_target=current is not None and current == target,
                    run=lambda: _alembic(command.upgrade, cfg, revision))


def downgrade(url: str | None = None, revision: str = "base") -> None:
    from alembic import command

    cfg = alembic_config(url or get_settings().effective_database_url)
    _target(cfg, revision)
    _alembic(command.downgrade, cfg, revision)


def _target(cfg: Config, revision: str) -> str | None:
    """The revision id `revision` names (None: base, or relative like +1, resolved by Alembic
    against the database); one that names none is `Invalid`, with the ones there are."""
    from alembic.script import ScriptDirectory
    from alembic.util import CommandError

    if revision == "base" or re.fullmatch(r"[+-]\d{1,4}|\w+@[+-]?\w+", revision):
        return None
    script = ScriptDirectory.from_config(cfg)
    try:
        found = script.get_revision("head" if revision == "heads" else revision)
    except CommandError:
        found = None
    if found is None or not isinstance(found.revision, str):
        known = [r.revision for r in script.walk_revisions()]
        raise Invalid(f"no revision {revision[:40]!r}: give head, base or one of "
                      f"{known[-1]}..{known[0]}", ("revision",))
    return found.revision


def _alembic(run, cfg: Config, revision: str) -> None:
    """An Alembic command; its refusals (a relative step past base or head) are `Invalid`."""
    from alembic.util import CommandError

    try:
        run(cfg, revision)
    except CommandError as exc:
        raise Invalid(str(exc).splitlines()[0][:300], ("revision",)) from None


def current_revision(url: str) -> str | None:
    from alembic.runtime.migration import MigrationContext

    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            return MigrationContext.configure(conn).get_current_revision()
    finally:
        engine.dispose()


@contextmanager
def memory_database() -> Iterator[Engine]:
    """A private SQLite database in this process's memory, migrated to head by the same Alembic
    path as a file (what reading a bundle with no database uses): nothing on disk to remove, and
    gone when the block ends, however it ends. One connection (StaticPool): an in-memory SQLite
    database lives as long as its connection."""
    from alembic import command
    from sqlalchemy.pool import StaticPool

    engine = create_engine("sqlite://", poolclass=StaticPool,
                           connect_args={"check_same_thread": False})
    event.listen(engine, "connect", _sqlite_pragmas)
    try:
        cfg = alembic_config("sqlite://")
        with engine.connect() as connection:
            cfg.attributes["connection"] = connection
            _alembic(command.upgrade, cfg, "head")
        yield engine
    finally:
        engine.dispose()

"""Engines, sessions and schema migrations (Alembic, configured programmatically)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.orm import Session, sessionmaker

from .settings import Settings, get_settings

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
    url = url or get_settings().effective_database_url
    if url.startswith("sqlite"):
        make_engine(url).dispose()  # creates the file's folder
    from alembic import command

    command.upgrade(alembic_config(url), revision)


def downgrade(url: str | None = None, revision: str = "base") -> None:
    from alembic import command

    command.downgrade(alembic_config(url or get_settings().effective_database_url), revision)


def current_revision(url: str) -> str | None:
    from alembic.runtime.migration import MigrationContext

    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            return MigrationContext.configure(conn).get_current_revision()
    finally:
        engine.dispose()

"""Alembic environment: the URL comes from the caller's config or from MPCOA_DATABASE_URL."""

from __future__ import annotations

from alembic import context

from models import Base

config = context.config
target_metadata = Base.metadata


def _url() -> str:
    url = config.get_main_option("sqlalchemy.url")
    if url:
        return url
    from service.settings import Settings

    return Settings().effective_database_url


def run_offline() -> None:
    url = _url()
    context.configure(
        url=url,
        target_metadata=target_metadata,
        literal_binds=True,
        render_as_batch=url.startswith("sqlite"),
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    from service.db import make_engine

    engine = make_engine(_url())
    try:
        with engine.connect() as conn:
            _run(conn)
            conn.commit()
    finally:
        engine.dispose()


def _run(connection) -> None:
    sqlite = connection.dialect.name == "sqlite"
    if sqlite:
        _foreign_keys(connection, on=False)
    try:
        context.configure(
            connection=connection,
            target_metadata=target_metadata,
            render_as_batch=sqlite,
            compare_type=True,
            on_version_apply=[_no_orphans] if sqlite else [],
        )
        with context.begin_transaction():
            context.run_migrations()
    finally:
        if sqlite:
            connection.commit()
            _foreign_keys(connection, on=True)


def _foreign_keys(connection, *, on: bool) -> None:
    """SQLite's batch migrations copy a table, DROP the old one and rename the copy: with foreign
    keys enforced that DROP deletes every child row through ON DELETE CASCADE. So they are off
    while migrating (SQLite's own procedure for altering a table), and each migration's result
    is checked instead (`_no_orphans`). The pragma does nothing inside a transaction: read back."""
    connection.exec_driver_sql(f"PRAGMA foreign_keys={'ON' if on else 'OFF'}")
    if bool(connection.exec_driver_sql("PRAGMA foreign_keys").scalar()) != on:
        raise RuntimeError("cannot switch SQLite's foreign keys inside a transaction")


class OrphanedRows(RuntimeError):
    """A migration left rows whose parent row is gone: the upgrade stops there."""


def _no_orphans(*, ctx, step, heads, run_args) -> None:
    """After each migration: no row may point at a parent that is not there."""
    rows = ctx.connection.exec_driver_sql("PRAGMA foreign_key_check").fetchall()
    if rows:
        tables = sorted({f"{r[0]} -> {r[2]}" for r in rows})
        way = "up to" if step.is_upgrade else "down from"
        raise OrphanedRows(f"migration {way} {step.up_revision_id}: {len(rows)} rows point at "
                           f"missing parents ({', '.join(tables)})")


if context.is_offline_mode():
    run_offline()
else:
    run_online()

"""A SQLite database is copied before its schema is upgraded, and the copy is kept until the
upgraded database passed its check: no row lost, none pointing at a parent that is gone.

The embedded database is one file that every `mpcoa` command upgrades by itself when mpcoa was
updated (`mpcoa serve` at each start): a migration that went wrong would otherwise take the
user's measurements with it, silently. PostgreSQL runs each migration in a transaction of its
own and is backed up by its operator; it is upgraded as it is.
"""

from __future__ import annotations

import logging
import os
import sqlite3
from collections.abc import Callable
from contextlib import closing
from datetime import UTC, datetime
from pathlib import Path

from .errors import Invalid

log = logging.getLogger("mpcoa.db")


class UpgradeFailed(RuntimeError):
    """The upgrade stopped or failed its check; the message names the copy that was kept."""


def sqlite_file(url: str) -> Path | None:
    """The file of a SQLite URL (None: in memory, or not SQLite)."""
    if not url.startswith("sqlite"):
        return None
    path = url.split("///", 1)[-1] if "///" in url else ""
    return Path(path) if path and path != ":memory:" else None


def guarded_upgrade(path: Path, current: str | None, at_target: bool,
                    run: Callable[[], None]) -> None:
    """Run the upgrade `run` on the SQLite file `path` at revision `current`: a database with
    rows at an older revision is copied first (the copy's name is logged), checked afterwards,
    and the copy removed only when the check passed. A new database, or one already at the
    target (`at_target`), is upgraded as it is: there is nothing to keep."""
    if current is None or at_target or not path.exists():
        run()
        return
    copy = _copy(path, f"{path.name}.before-upgrade-from-{current}-"
                       f"{datetime.now(UTC):%Y%m%dT%H%M%S}")
    log.warning("mpcoa: database %s is at revision %s: copied to %s before upgrading it",
                path, current, copy)
    before = _row_counts(path)
    try:
        run()
    except Invalid:  # Alembic refused the target before it ran anything
        copy.unlink()
        raise
    except Exception as exc:
        raise UpgradeFailed(f"upgrading {path} from revision {current} failed: "
                            f"{_first_line(exc)}; the database as it was is kept in {copy}"
                            ) from exc
    problems = _check(path, before)
    if problems:
        raise UpgradeFailed(f"upgrading {path} from revision {current} failed its check: "
                            f"{'; '.join(problems)}; the database as it was is kept in {copy}")
    copy.unlink()
    log.warning("mpcoa: upgraded %s from revision %s, every row kept; removed the copy %s",
                path, current, copy)


def _copy(path: Path, name: str) -> Path:
    """A consistent copy beside `path` under a new name (SQLite's backup API: whatever the
    write-ahead log holds), readable by the database file's owner only."""
    for n in range(100):
        copy = path.with_name(name if n == 0 else f"{name}.{n}")
        try:
            os.close(os.open(copy, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
            break
        except FileExistsError:
            continue
    else:
        raise UpgradeFailed(f"cannot name a copy of {path}: {name} and 99 more exist")
    with closing(sqlite3.connect(path)) as source, closing(sqlite3.connect(copy)) as target:
        source.backup(target)
    return copy


def _row_counts(path: Path) -> dict[str, int]:
    with closing(sqlite3.connect(path)) as conn:
        tables = [r[0] for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")]
        return {t: conn.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0]  # noqa: S608
                for t in tables}


def _check(path: Path, before: dict[str, int]) -> list[str]:
    """What is wrong with the upgraded file: no upgrade deletes rows (only downgrades drop what
    an older schema cannot hold), so every table keeps at least the rows it had."""
    after = _row_counts(path)
    problems = [f"{table}: {n} rows before, {after.get(table, 0)} after"
                for table, n in sorted(before.items()) if after.get(table, 0) < n]
    with closing(sqlite3.connect(path)) as conn:
        orphans = conn.execute("PRAGMA foreign_key_check").fetchall()
        integrity = conn.execute("PRAGMA quick_check").fetchone()[0]
    if orphans:
        tables = sorted({f"{r[0]} -> {r[2]}" for r in orphans})
        problems.append(f"{len(orphans)} rows point at missing parents ({', '.join(tables)})")
    if integrity != "ok":
        problems.append(f"integrity check: {integrity}")
    return problems


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]

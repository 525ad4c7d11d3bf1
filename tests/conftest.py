"""Shared database fixtures: the database a test's markers ask for, and the `fast` marker.

A test marked `postgres` gets a real PostgreSQL database for the session, created under a unique
name through the `postgres` maintenance database, migrated with Alembic, and dropped at the end
even when tests fail; it runs inside an outer transaction that is rolled back, the code under
test committing to savepoints inside it. Any other test that asks for a session (`db_session`,
`session_factory`, `database_url`) gets a SQLite file of its own, migrated by Alembic as the
service migrates its SQLite database (`service.db.upgrade`, once per test process, then copied):
the flows that only read and write rows run there, in the fast tier. What needs PostgreSQL itself
(row locks, concurrent sessions, its maintenance database) keeps the marker.
"""

from __future__ import annotations

import os
import re
import secrets
import signal
import sqlite3
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path
from types import SimpleNamespace

import psycopg
import pytest
from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

import service.settings  # noqa: F401  (installs the probes' settings reader, as every entry point)
from tests import support

# Keep pytest's rewritten test modules: where PYTHONDONTWRITEBYTECODE is set (this machine kind
# sets it) pytest would otherwise rewrite and compile every test module on every run, in every
# xdist worker.
sys.dont_write_bytecode = False


def _stop(signum, _frame) -> None:
    from probes.testbed.interrupts import Stopped

    raise Stopped(signum)


def pytest_configure(config) -> None:
    """SIGTERM stops a test run as Ctrl-C does: pytest unwinds and the fixtures' teardowns run
    (testbed namespaces, servers, databases), where by default the process would just end and
    leave them behind."""
    _real_monotonic_under_faketime(config)
    signal.signal(signal.SIGTERM, _stop)


def _real_monotonic_under_faketime(config) -> None:
    """A run under Debian's `faketime -f '+366d'` (libfaketime 0.9.10) starts again at once
    with the monotonic clock left real and a libfaketime that honours that (the `libfaketime`
    package's, a dev dependency; the same wall-clock shift, FAKETIME, for this process and
    every one it starts: they inherit LD_PRELOAD and FAKETIME). Debian's moves CLOCK_MONOTONIC
    by the same year but not the deadline of a wait on it (`sem_clockwait`, which it does not
    wrap), so every lock or event wait with a timeout -- a scheduler thread's, Celery's --
    would wait that year; told to leave that clock alone, its `clock_nanosleep` turns every
    `time.sleep` into EINVAL. The monotonic clock carries no date: leaving it real tests what
    the shift is for."""
    preload = re.split(r"[\s:]+", os.environ.get("LD_PRELOAD", "").strip())
    if not any("faketime" in p for p in preload) or os.environ.get(
            "FAKETIME_DONT_FAKE_MONOTONIC") == "1":
        return
    import importlib.util

    spec = importlib.util.find_spec("libfaketime")
    assert spec is not None and spec.origin, "faketime: the dev dependency libfaketime is missing"
    fixed = Path(spec.origin).parent / "vendor" / "libfaketime" / "src" / "libfaketime.so.1"
    os.environ["LD_PRELOAD"] = " ".join(str(fixed) if "faketime" in p else p for p in preload)
    os.environ["FAKETIME_DONT_FAKE_MONOTONIC"] = "1"
    capture = config.pluginmanager.getplugin("capturemanager")
    if capture is not None:
        capture.suspend_global_capture(in_=True)  # the new run's output goes where this one's
    os.execv(sys.executable, [sys.executable, *sys.orig_argv[1:]])


# `slow`: needs none of the others, but starts server processes or subprocesses (`mpcoa serve`,
# the CLI, Alembic's command line) or takes more than about two seconds of CPU.
SLOW_MARKERS = ("netns", "postgres", "broker", "slow", "netperfmeter")


def netperfmeter_2() -> str | None:
    """The version of the NetPerfMeter MPCOA_NETPERFMETER names (or PATH's), when it is 2.x."""
    from probes.tools.capabilities import NETPERFMETER_VERSION, tool_version
    from probes.tools.netperfmeter import default_binary
    from probes.tools.plugins.netperfmeter import is_netperfmeter_2

    version = tool_version(default_binary(), ["--version"], NETPERFMETER_VERSION)
    return version if is_netperfmeter_2(version) else None


def pytest_report_header(config) -> list[str]:
    version = netperfmeter_2()
    lines = ["netperfmeter tests: run on NetPerfMeter " + version if version else
             "netperfmeter tests: deselected (MPCOA_NETPERFMETER names no NetPerfMeter 2.x)"]
    if "FAKETIME" in os.environ:
        lines.append(f"clock: FAKETIME={os.environ['FAKETIME']} for this run and every process "
                     f"it starts (now {support.now():%Y-%m-%d %H:%M} UTC; monotonic clock real)")
    return lines


def pytest_collection_modifyitems(config, items) -> None:
    """`fast`: every test that needs neither root nor a server and starts no process of its own
    (`pytest -m fast`, the tier run on every change). Given here from the other markers, so it
    cannot be forgotten; the full suite (no -m) runs every tier.

    `netperfmeter`: a test that needs NetPerfMeter 2.x is deselected (counted as deselected,
    never as a skip or a pass) where MPCOA_NETPERFMETER names none: Debian 12, and so CI,
    has only 1.9. It runs by hand with a 2.x binary built outside this repository."""
    if any(item.get_closest_marker("netperfmeter") for item in items) and not netperfmeter_2():
        dropped = [item for item in items if item.get_closest_marker("netperfmeter")]
        items[:] = [item for item in items if not item.get_closest_marker("netperfmeter")]
        config.hook.pytest_deselected(items=dropped)
        if hasattr(config, "workeroutput"):  # a pytest-xdist worker: tell the controller
            config.workeroutput["deselected"] = [item.nodeid for item in dropped]
    for item in items:
        if not any(item.get_closest_marker(m) for m in SLOW_MARKERS):
            item.add_marker(pytest.mark.fast)
    # The longest live modules first (a stable sort: the rest keep their order), so that with
    # `--dist loadfile` none of them starts last, beside idle workers.
    items.sort(key=lambda item: LONG_MODULES.get(item.nodeid.split("::")[0], len(LONG_MODULES)))


#: the modules that took longest in the whole suite (`--durations`, docs/testing.md), longest
#: first: scheduled before the rest (pyproject's `--no-loadscope-reorder` keeps this order)
LONG_MODULES = {path: rank for rank, path in enumerate([
    "tests/sites/test_three_hosts.py",
    "tests/workers/test_campaigns_celery.py",
    "tests/workers/test_apply_embedded.py",
    "tests/workers/test_reapply_live.py",
    "tests/workers/test_apply_kills.py",
    "tests/workers/test_dashboard_after_a_campaign.py",
    "tests/workers/test_embedded_schedule.py",
    "tests/workers/test_calibrate_embedded.py",
    "tests/test_stopping.py",
    "tests/api/test_schemathesis.py",
    "tests/workers/test_takeaway_live.py",
    "tests/sites/test_deploy_guide.py",
    "tests/dashboard/test_dashboard.py",
    "tests/apply/test_apply_live.py",
    "tests/probes/test_field_live.py",
    "tests/api/test_bundle_fuzz.py",
    "tests/sites/test_site_role.py",
    "tests/api/test_migration_walk.py",
    "tests/probes/test_bpf_coupled.py",
    "tests/workers/test_toy_tool_live.py",
    "tests/apply/test_journal_sequences.py",
    "tests/workers/test_apply_celery.py",
    "tests/probes/test_bpf_cc.py",
    "tests/probes/test_testbed_live.py",
    "tests/probes/test_paced_live.py",
    "tests/probes/test_stream_selection_live.py",
    "tests/probes/test_ipv6_live.py",
    "tests/workers/test_outages.py",
])}


_deselected_by_workers: set[str] = set()


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error) -> None:
    """pytest-xdist's controller collects nothing itself: the tests its workers deselected are
    counted here, so that the summary line says "N deselected" as a run without -n does."""
    ids = set(getattr(node, "workeroutput", {}).get("deselected", [])) - _deselected_by_workers
    _deselected_by_workers.update(ids)
    reporter = node.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None and ids:
        # stand-ins for the items (other plugins read the stats' entries as objects)
        reporter.stats.setdefault("deselected", []).extend(
            SimpleNamespace(nodeid=nodeid) for nodeid in sorted(ids))


PG_HOST = os.environ.get("MPCOA_TEST_PG_HOST", "localhost")
PG_USER = os.environ.get("MPCOA_TEST_PG_USER", "postgres")


def new_campaign(session, topology_id: int, reason: str = "tests", **params):
    """A queued campaign through the service's one create-and-dispatch flow, never sent to an
    executor (the tests drive it themselves)."""
    from service.flows.campaign.dispatch import start_campaign
    from service.flows.campaign.plan import CampaignParameters
    from service.settings import Settings

    return start_campaign(
        session,
        topology_id=topology_id,
        params=CampaignParameters(**params),
        reason=reason,
        settings=Settings(run_campaigns=False),
    )


def pg_admin() -> psycopg.Connection:
    return psycopg.connect(host=PG_HOST, user=PG_USER, dbname="postgres", autocommit=True)


def pg_url(dbname: str) -> str:
    return f"postgresql+psycopg://{PG_USER}@{PG_HOST}/{dbname}"


def create_database(prefix: str = "mpcoa_test", template: str | None = None) -> str:
    """A new database (a copy of `template` when given, else empty)."""
    support.require("postgres", "PostgreSQL")
    name = f"{prefix}_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    with pg_admin() as conn:
        conn.execute(f'CREATE DATABASE "{name}"'
                     + (f' TEMPLATE "{template}"' if template else ""))
    return name


_template: str | None = None


def migrated_template() -> str:
    """This test process's migrated database, made once (the service's own `db.upgrade`) and
    copied for every migrated database it asks for: a copy costs a file copy, not the
    migrations. No connection stays open to it (PostgreSQL copies only an idle template);
    dropped when the process ends (`_drop_the_template`)."""
    global _template
    if _template is None:
        from service import db

        name = create_database("mpcoa_template")
        try:
            db.upgrade(pg_url(name))
        finally:
            for key in [k for k in db._engines if name in k]:
                db._engines.pop(key).dispose()
        _template = name
    return _template


@pytest.fixture(scope="session", autouse=True)
def _drop_the_template() -> Iterator[None]:
    yield
    if _template is not None:
        drop_database(_template)


def drop_database(name: str) -> None:
    with pg_admin() as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextmanager
def migrated_database(prefix: str = "mpcoa_test") -> Iterator[str]:
    """A new, migrated database (a copy of `migrated_template`); dropped afterwards even when
    the tests failed."""
    from service import db

    name = create_database(prefix, template=migrated_template())
    url = pg_url(name)
    try:
        yield url
    finally:
        for key in [k for k in db._engines if name in k]:
            db._engines.pop(key).dispose()
        drop_database(name)


REDIS_HOST = os.environ.get("MPCOA_TEST_REDIS_HOST", "127.0.0.1")


REDIS_CLAIM = "mpcoa-tests:claimed-by"


@contextmanager
def redis_database() -> Iterator[int]:
    """A Redis database number of its own (2-15; 0 and 1 are left to people), emptied
    afterwards even when the tests failed."""
    import redis

    support.require("broker", "Redis")
    # Claimed with SET NX: test processes side by side (pytest-xdist) never share a database.
    for index in secrets.SystemRandom().sample(range(2, 16), 14):
        client = redis.Redis(host=REDIS_HOST, port=6379, db=index)
        if client.set(REDIS_CLAIM, os.getpid(), nx=True, ex=3600):
            break
        client.close()
    else:
        pytest.fail("every Redis database 2-15 is claimed by another test process")
    try:
        yield index
    finally:
        client.flushdb()
        client.close()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """Keep `support.current_item` on the running test, for `support.require`."""
    support.current_item = item
    try:
        return (yield)
    finally:
        support.current_item = None


@pytest.fixture(scope="session", autouse=True)
def _testbeds_need_the_netns_marker():
    """Every testbed the tests bring up (fixtures, the demo run in-process) goes through
    `Testbed.up`: an unmarked test that reaches it fails instead of needing root unseen."""
    from probes.testbed.lifecycle import Testbed

    real_up = Testbed.up

    def up(self):
        support.require("netns", f"the testbed {self.name} (root, network namespaces)")
        return real_up(self)

    Testbed.up = up
    try:
        yield
    finally:
        Testbed.up = real_up


class Clock:
    """The test's clock: this process's, started at the real now and moved only by the test
    (`shift`). Every clock of the process moves with it -- the product's `utcnow`, the answer
    cache's, `time.time` -- but not `time.monotonic` (timeouts stay real), nor the clock of the
    PostgreSQL server or of a process the test starts."""

    def __init__(self, traveller) -> None:
        self._traveller = traveller

    def now(self) -> datetime:
        return support.now()

    def shift(self, delta: timedelta) -> datetime:
        """Move the clock on by `delta` (it goes on ticking from there); the new now."""
        self._traveller.shift(delta)
        return support.now()


@pytest.fixture
def clock(time_machine) -> Clock:
    """The one clock fixture: a test that needs time to pass (data turning stale, a token
    expiring) takes it and shifts it; seeds date their rows from `support.now()`, which it
    moves."""
    time_machine.move_to(support.now(), tick=True)
    return Clock(time_machine)


@pytest.fixture(scope="session")
def pg_database_url() -> Iterator[str]:
    with migrated_database() as url:
        yield url


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory) -> Path:
    """A SQLite database migrated to head by the service's own path (`service.db.upgrade`:
    Alembic, the engine's pragmas), once per test process; tests get copies of it."""
    from service import db

    path = tmp_path_factory.mktemp("sqlite-template") / "mpcoa.db"
    db.upgrade(f"sqlite:///{path}")
    return path


def _on_postgres(request) -> bool:
    return request.node.get_closest_marker("postgres") is not None


@pytest.fixture
def database_url(request, tmp_path) -> str:
    """The test's database: the session's PostgreSQL one for a `postgres` test, else a copy of
    the migrated SQLite template in the test's own folder (removed with it)."""
    if _on_postgres(request):
        return request.getfixturevalue("pg_database_url")
    template = request.getfixturevalue("sqlite_template")
    path = tmp_path / "mpcoa.db"
    # the backup API copies a consistent database, whatever the template's WAL holds
    source, target = sqlite3.connect(template), sqlite3.connect(path)
    try:
        source.backup(target)
    finally:
        source.close()
        target.close()
    return f"sqlite:///{path}"


@pytest.fixture
def sqlite_engine(database_url: str) -> Iterator[Engine]:
    from service.db import make_engine

    engine = make_engine(database_url)
    yield engine
    engine.dispose()


@pytest.fixture(scope="session")
def pg_engine(pg_database_url: str) -> Iterator[Engine]:
    from service.db import make_engine

    engine = make_engine(pg_database_url, pool_size=2)
    yield engine
    engine.dispose()


@pytest.fixture
def pg_connection(pg_engine: Engine):
    """One connection in an outer transaction, rolled back after the test."""
    connection = pg_engine.connect()
    outer = connection.begin()
    try:
        yield connection
    finally:
        if outer.is_active:
            outer.rollback()
        connection.close()


@pytest.fixture
def session_factory(request, database_url) -> sessionmaker[Session]:
    """On PostgreSQL, sessions bound to the test's connection, their commits savepoints of its
    rolled-back transaction; on SQLite, sessions of the test's own database, as the service
    makes them (`service.db.make_sessionmaker`)."""
    if _on_postgres(request):
        return sessionmaker(
            bind=request.getfixturevalue("pg_connection"),
            join_transaction_mode="create_savepoint", expire_on_commit=False,
        )
    from service.db import make_sessionmaker

    return make_sessionmaker(request.getfixturevalue("sqlite_engine"))


@pytest.fixture
def db_session(session_factory) -> Iterator[Session]:
    session = session_factory()
    try:
        yield session
    finally:
        session.close()


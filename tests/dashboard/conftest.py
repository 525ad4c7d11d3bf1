"""A live server and a real browser for the dashboard tests.

- Database: a PostgreSQL database of its own (unique name, created, migrated, seeded and committed
  through the service layer, dropped at the end), because a live server in another thread must see
  committed data rather than a test's rolled-back transaction.
- Server: the project's app factory (`api.app.create_app`) under uvicorn, in a thread, on
  127.0.0.1 and a port the OS picks.
- Browser: Debian's Chromium (`/usr/bin/chromium`, from scripts/debian-packages.txt) driven by
  Playwright; Playwright's own browser downloads are never used.
Everything is torn down even when a test fails.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import uvicorn

from service import db
from service.settings import Settings
from service.store import tokens
from tests.conftest import create_database, drop_database, migrated_template, pg_url
from tests.support import real_clock_env

from .seed import Seeded, seed

CHROMIUM = os.environ.get("MPCOA_TEST_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
VIEWPORT = {"width": 1366, "height": 768}  # a laptop screen


@dataclass
class Live:
    base_url: str
    database_url: str
    seeded: Seeded
    token: str
    session_factory: object
    shots: Path

    def url(self, path: str) -> str:
        return self.base_url + path


@pytest.fixture(scope="session")
def dashboard_db() -> Iterator[tuple[str, Seeded, str]]:
    name = create_database("mpcoa_dash", template=migrated_template())
    url = pg_url(name)
    engine = None
    try:
        engine = db.make_engine(url, pool_size=2)
        with db.make_sessionmaker(engine)() as session:
            seeded = seed(session)
            token = tokens.create_token(session, name="dashboard-tests")
            session.commit()
        yield url, seeded, token
    finally:
        if engine is not None:
            engine.dispose()
        for key in [k for k in db._engines if name in k]:
            db._engines.pop(key).dispose()
        drop_database(name)


@pytest.fixture(scope="session")
def live(dashboard_db, tmp_path_factory) -> Iterator[Live]:
    from api.app import create_app

    url, seeded, token = dashboard_db
    data_dir = tmp_path_factory.mktemp("dashboard-data")
    # Campaigns are recorded but never run here: the tests play the workers themselves.
    # Reads open: these tests look at the pages, not at the login (test_browser_session.py
    # and test_read_tokens.py: the pages behind PostgreSQL's default, closed reads).
    settings = Settings(database_url=url, data_dir=data_dir, run_campaigns=False,
                        reads_need_token=False, _env_file=None)
    app = create_app(settings)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off")
    )
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 20
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the dashboard test server did not start")
            time.sleep(0.05)
        engine = db.make_engine(url, pool_size=2)
        try:
            yield Live(
                base_url=f"http://127.0.0.1:{port}",
                database_url=url,
                seeded=seeded,
                token=token,
                session_factory=db.make_sessionmaker(engine),
                shots=Path(
                    os.environ.get("MPCOA_DASHBOARD_SHOTS")
                    or tmp_path_factory.mktemp("screenshots")
                ),
            )
        finally:
            engine.dispose()
    finally:
        server.should_exit = True
        thread.join(timeout=15)
        sock.close()


@pytest.fixture(scope="session")
def browser() -> Iterator[object]:
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).is_file():
        pytest.fail(f"{CHROMIUM} is missing: install Debian's chromium (debian-packages.txt)")
    playwright = sync_playwright().start()
    try:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS, env=real_clock_env()
        )
        try:
            yield browser
        finally:
            browser.close()
    finally:
        playwright.stop()


@dataclass
class Tab:
    """A browser page that records every console error, page error and failed request."""

    page: object
    errors: list[str] = field(default_factory=list)


@pytest.fixture
def tab(browser) -> Iterator[Tab]:
    context = browser.new_context(viewport=VIEWPORT, service_workers="block")
    page = context.new_page()
    result = Tab(page)
    page.on(
        "console",
        lambda msg: (
            result.errors.append(f"console {msg.type}: {msg.text}") if msg.type == "error" else None
        ),
    )
    page.on("pageerror", lambda exc: result.errors.append(f"page error: {exc}"))
    page.on("requestfailed", lambda req: result.errors.append(f"request failed: {req.url}"))
    try:
        yield result
    finally:
        context.close()

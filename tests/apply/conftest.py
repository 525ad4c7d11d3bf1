"""Fixtures the apply tests share: the emulated 2 x 2 testbed (`tests.apply.livebed`). They
compare a site with how they found it without the host's BPF controls (`sitestate.as_found`),
so they hold no lock beside the modules that register those."""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import pytest

from tests.apply import livebed
from tests.support import running_testbed


@pytest.fixture(scope="module")
def bed():
    """The 2 x 2 testbed of `livebed.SITES`, one per test module."""
    with running_testbed(livebed.spec(f"ap{secrets.token_hex(3)}")) as testbed:
        yield testbed


@pytest.fixture
def embedded_default(database_url, tmp_path, monkeypatch) -> Iterator[str]:
    """The flows' default engine on this test's own SQLite database (the embedded default's,
    migrated), the appliers' journals under tmp_path; its URL."""
    from probes.site import apply as siteapply
    from service import db
    from service.settings import get_settings

    monkeypatch.setenv("MPCOA_DATABASE_URL", database_url)
    monkeypatch.setattr(siteapply, "STATE_ROOT", tmp_path / "apply")
    get_settings.cache_clear()
    try:
        yield database_url
    finally:
        for key in [k for k in db._engines if str(tmp_path) in k]:
            db._engines.pop(key).dispose()
        get_settings.cache_clear()

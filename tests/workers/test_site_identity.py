"""A site's worker runs its own site's tasks only: one that reaches it for another site is
refused and reported, and a second host cannot start as a site another host already serves
(compose's site worker has no default site any more)."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

from probes.base import MeasurementRequest, ProbeError
from probes.localsite import LocalSite
from tests.processes import stop_group
from tests.support import wait_for
from workers import tasks
from workers.site import set_local_site

from .conftest import worker_env

BIN = Path(sys.executable).parent


@pytest.fixture
def at_site_hu():
    set_local_site(LocalSite("HU", {"C": "192.0.2.10"}))
    try:
        yield
    finally:
        set_local_site(None)


def test_another_sites_apply_is_refused_and_reported(at_site_hu, caplog):
    """Nothing of SRL's plan is applied, nor rolled back, on HU's host (no database is touched
    before the refusal: the apply id does not even exist)."""
    for action in ("apply", "rollback", "revert", "watch"):
        state = tasks.apply_site.run(987654, "SRL", action)
        assert state == (f"refused {action} of apply 987654 for site 'SRL': this worker is "
                         "site 'HU''s"), state
    assert any(r.levelname == "ERROR" and "for site 'SRL'" in r.getMessage()
               for r in caplog.records)


def test_another_sites_probe_is_refused(at_site_hu):
    request = MeasurementRequest(sender="SRL", receiver="HU", duration_s=5)
    with pytest.raises(ProbeError, match="refused a probe's sending side for site 'SRL'"):
        tasks._measure(None, 1, None, request, "lease", None)
    assert tasks.foreign_site("HU", "anything") is None


def test_a_testbed_worker_runs_every_site():
    set_local_site(None)
    assert tasks.foreign_site("SRL", "apply") is None


@pytest.mark.broker
def test_a_second_host_cannot_start_as_a_served_site(broker_url, tmp_path):
    """Host A serves site X (a Celery worker named mpcoa-X@host-a on site.X); this host's
    `mpcoa worker --site X` refuses to start and names it."""
    site = f"X{secrets.token_hex(3)}"
    env = worker_env("", broker_url, tmp_path)
    log = open(tmp_path / "host-a.log", "w")  # noqa: SIM115
    other = subprocess.Popen(
        [str(BIN / "celery"), "-A", "workers.app", "worker", "-Q", f"site.{site}", "-P", "solo",
         "-n", f"mpcoa-{site}@host-a.example", "--loglevel", "INFO"],
        env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_for(lambda: "ready" in (tmp_path / "host-a.log").read_text()
                 or other.poll() is not None, 60, "host A's worker to be ready")
        assert other.poll() is None, (tmp_path / "host-a.log").read_text()
        cp = subprocess.run([str(BIN / "mpcoa"), "worker", "--site", site, "--no-control"],
                            env=env, capture_output=True, text=True, timeout=60, check=False)
        assert cp.returncode == 2, cp.stdout + cp.stderr
        assert (f"site {site} is already served from another host (mpcoa-{site}@host-a.example)"
                in cp.stderr), cp.stderr
    finally:
        stop_group(other)
        log.close()


def test_an_empty_site_is_refused(tmp_path):
    """compose's site worker with MPCOA_SITE unset gets `--site ''`: no silent default."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MPCOA_")}
    cp = subprocess.run([str(BIN / "mpcoa"), "worker", "--site", ""], env=env, cwd=tmp_path,
                        capture_output=True, text=True, timeout=60, check=False)
    assert cp.returncode != 0 and "--site is empty" in cp.stderr, cp.stderr

"""A site's worker runs its own site's tasks only: one that reaches it for another site is
refused and reported, and a second host cannot start as a site another host already serves
(compose's site worker has no default site any more)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from probes.base import MeasurementRequest, ProbeError
from probes.site.local import LocalSite
from workers import tasks
from workers.site import set_local_site

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
        tasks._measure(None, 1, ("SRL", "HU"), None, request, "lease", None)
    assert tasks.foreign_site("HU", "anything") is None


def test_a_testbed_worker_runs_every_site():
    set_local_site(None)
    assert tasks.foreign_site("SRL", "apply") is None


@pytest.mark.broker
def test_an_empty_site_is_refused(tmp_path):
    """compose's site worker with MPCOA_SITE unset gets `--site ''`: no silent default."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MPCOA_")}
    cp = subprocess.run([str(BIN / "mpcoa"), "worker", "--site", ""], env=env, cwd=tmp_path,
                        capture_output=True, text=True, timeout=60, check=False)
    assert cp.returncode != 0 and "--site is empty" in cp.stderr, cp.stderr

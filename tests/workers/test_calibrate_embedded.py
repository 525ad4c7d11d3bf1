"""The embedded default end to end: `mpcoa calibrate` on SQLite, campaign steps run in-process
by the same code the Celery tasks run, on the emulated testbed; its answer from measured data."""

from __future__ import annotations

import sqlite3
import subprocess

import pytest

from .conftest import BIN, embedded_database

pytestmark = pytest.mark.netns


def test_calibrate_command_runs_a_campaign_in_process(sites, testbed, tmp_path):
    topology_id, env = embedded_database(sites, tmp_path)
    args = ["calibrate", str(topology_id), "--cc", "reno", "--cc", "cubic", "--cc", "nosuchcc",
            "--buffer", "0.03125", "--buffer", "0.125", "--buffer", "0.5", "--runs", "1",
            "--duration", "2", "--budget", "36", "--mode", "grid"]  # the paper's 18 probes
    out = subprocess.run([str(BIN / "mpcoa"), *args], env=env, capture_output=True, text=True,
                         timeout=300, check=False)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "campaign 1 done: OPM=" in out.stdout
    # the plan and what it spent, against its budget
    assert "campaign 1: grid, CCs reno, cubic, nosuchcc, 3 buffers" in out.stdout
    assert "budget 36 probe-seconds" in out.stdout
    assert "probed 36 probe-seconds in 18 probes of a 36 probe-second budget" in out.stdout
    assert "dropped_ccs:nosuchcc" in out.stdout  # the kernels do not offer it: said, not hidden

    db = sqlite3.connect(tmp_path / "mpcoa.sqlite3")
    state, done, total = db.execute(
        "select state, probes_done, probes_total from campaigns").fetchone()
    assert (state, done, total) == ("done", 18, 18)
    statuses = db.execute("select status, count(*) from measurements group by status").fetchall()
    assert statuses == [("ok", 18)]
    occ, obs = db.execute(
        "select occ, obs_mib from recommendations where kind = 'calibrated'").fetchone()
    assert occ in ("reno", "cubic") and 0.03125 <= obs <= 0.5
    db.close()

    bad = subprocess.run([str(BIN / "mpcoa"), "calibrate", "999"], env=env, capture_output=True,
                         text=True, timeout=60, check=False)
    assert bad.returncode == 3 and "topology 999 not found" in bad.stderr  # not found: 3


def test_an_adaptive_campaign_settles_on_the_real_testbed(sites, testbed, tmp_path):
    """Issue 12: `mpcoa calibrate --mode adaptive` on the emulated testbed; the answer is read
    off measured buffers, with fewer buffer probes than the grid's."""
    topology_id, env = embedded_database(sites, tmp_path)
    grid = ["0.0156", "0.0221", "0.0313", "0.0442", "0.0625", "0.0884", "0.125", "0.177",
            "0.25", "0.354", "0.5", "0.707"]
    args = ["calibrate", str(topology_id), "--cc", "reno", "--runs", "2", "--duration", "2",
            "--mode", "adaptive", *[a for b in grid for a in ("--buffer", b)]]
    out = subprocess.run([str(BIN / "mpcoa"), *args], env=env, capture_output=True, text=True,
                         timeout=400, check=False)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "adaptive:settled" in out.stdout or "adaptive:budget" in out.stdout, out.stdout
    db = sqlite3.connect(tmp_path / "mpcoa.sqlite3")
    mode, state, done, total = db.execute(
        "select mode, state, probes_done, probes_total from campaigns").fetchone()
    assert (mode, state) == ("adaptive", "done") and done == total  # progress ends at 100 %
    (buffer_probes,) = db.execute(
        "select count(*) from measurements where phase = 'buffer'").fetchone()
    print(f"adaptive: {buffer_probes} buffer probes, the grid {2 * len(grid) * 2}")
    assert buffer_probes < 2 * len(grid) * 2  # the grid: 2 PMs x 12 buffers x 2 runs
    obs, = db.execute("select obs_mib from recommendations where kind = 'calibrated'").fetchone()
    measured = {float(b) for (b,) in db.execute(
        "select distinct bs_mib from measurements where phase = 'buffer'")}
    assert obs in measured  # OBS is a buffer that was measured reaching the target
    db.close()
    bad = subprocess.run([str(BIN / "mpcoa"), "calibrate", str(topology_id), "--mode", "fast"],
                         env=env, capture_output=True, text=True, timeout=60, check=False)
    assert bad.returncode != 0 and "mode" in (bad.stderr + bad.stdout) and "Traceback" not in (
        bad.stderr)

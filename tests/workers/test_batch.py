"""`mpcoa calibrate --batch FILE`: several topologies in a seeded shuffled order, the state file
after each campaign, resumed: a done topology is skipped, the others get a campaign (tried again
once per run when theirs failed). No testbed here runs these sites, so their campaigns fail at
once, through the same executor a real one runs."""

from __future__ import annotations

import secrets
import subprocess

import pytest

from service.algorithm.topology import TopologySpec
from service.db import make_engine, session_scope, upgrade
from service.flows.campaign.batch import BatchState
from service.store import campaigns, inventory
from tests.api.calibration import seed_srl_hu
from tests.builders import paper_site

from .conftest import BIN

pytestmark = pytest.mark.slow  # starts server processes or subprocesses (docs/testing.md)

TAG = secrets.token_hex(2)


def _site(name: str):
    """The paper's site under a name of this test's own: a testbed of the paper's scenario that
    happens to be up on this host (a benchmark's) must not be the one these campaigns measure."""
    return paper_site(name, f"{name}{TAG}")


def mpcoa(args, env) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "mpcoa"), *args], env=env, capture_output=True, text=True,
                          timeout=300, check=False)


def test_a_batch_runs_shuffled_and_resumes(tmp_path):
    url = f"sqlite:///{tmp_path / 'mpcoa.sqlite3'}"
    upgrade(url)
    engine = make_engine(url)
    with session_scope(engine) as s:
        ids = [inventory.ensure_topology(s, spec=TopologySpec(local=_site(a), remote=_site(b))).id
               for a, b in (("SRL", "HU"), ("UiT", "HAW"), ("HAW", "UiT"), ("HU", "SRL"))]
        done = seed_srl_hu(s, ids[0], runs=1, commit=False)["campaign"].id
    env = {"PATH": "/usr/bin:/bin", "MPCOA_DATABASE_URL": url, "MPCOA_DATA_DIR": str(tmp_path),
           "HOME": str(tmp_path)}
    batch = tmp_path / "sites.txt"
    batch.write_text("# the fleet\n" + "\n".join(map(str, ids)) + "\n\n")
    state_path = tmp_path / "sites.txt.state.json"
    plan = BatchState.new(ids, seed=5)
    plan.campaigns[ids[0]] = done  # calibrated before an interruption
    plan.save(state_path)
    args = ["calibrate", "--batch", str(batch), "--cc", "reno", "--runs", "1", "--duration", "1"]

    first = mpcoa([*args, "--seed", "5"], env)
    assert first.returncode == 1, first.stdout + first.stderr  # three campaigns failed
    assert "resuming batch" in first.stdout and "(seed 5)" in first.stdout
    assert "1 of 4 topologies calibrated (seed 5)" in first.stdout
    after = BatchState.from_json(state_path.read_text())
    assert (after.seed, after.order) == (5, plan.order)
    assert after.campaigns[ids[0]] == done and set(after.campaigns) == set(ids)
    started = [after.campaigns[t] for t in after.order if t != ids[0]]
    assert started == sorted(started)  # started in the shuffled order
    with session_scope(engine) as s:
        assert all(campaigns.get_campaign(s, campaign_id=c).state == "failed" for c in started)

    again = mpcoa(args, env)  # resumed: the failed ones tried once more, the done one skipped
    assert again.returncode == 1
    retried = BatchState.from_json(state_path.read_text())
    assert retried.campaigns[ids[0]] == done
    assert all(retried.campaigns[t] > max(started) for t in retried.order if t != ids[0])

    for bad_args, said in (
        ([*args, "--seed", "6"], "the batch's seed is 5, not 6"),
        (["calibrate", "1", "--batch", str(batch)], "give a TOPOLOGY_ID or --batch FILE"),
        (["calibrate", "--seed", "3"], "give a TOPOLOGY_ID or --batch FILE"),
    ):
        out = mpcoa(bad_args, env)
        assert out.returncode == 2 and said in out.stderr, out.stderr
    batch.write_text("1\nabc\n")
    out = mpcoa([*args[:3]], env)
    assert out.returncode == 2 and "line 2: 'abc' is not a topology id" in out.stderr
    engine.dispose()

"""A rollback belongs to its apply, and a failed apply leaves the previous one in force: the
flows and `mpcoa apply` (embedded: SQLite, the testbed's namespaces, real journals).

* apply P is in force; apply N fails on the second site: the first site, which had applied N,
  goes back to P; the row of N says "previous apply P still in force", P's row stays applied
  and a rollback rolls P back (both sites as before P); a second rollback: "already rolled
  back", exit 0;
* a rollback whose row is not the apply a site's journal holds leaves that site alone and says so;
* no apply is accepted while a rollback is under way.
"""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from probes.site import apply as siteapply
from probes.testbed import lifecycle as tbmod
from service.db import make_engine, session_scope
from service.store import applied
from tests.apply.sitestate import site_state
from tests.support import running_testbed
from tests.workers.conftest import BIN, embedded_database, site_names
from tests.workers.conftest import testbed_spec as two_site_spec

pytestmark = pytest.mark.netns

ROOT_DIR = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def bed():
    local, remote = site_names()
    with running_testbed(two_site_spec(f"ro{secrets.token_hex(3)}", local, remote)) as tb:
        yield tb, (local, remote)


@dataclass
class Embedded:
    """The testbed's two sites, an embedded database with their topology (`tid`), the
    environment `mpcoa` runs with against it (its journals under `root`), and the sites as
    they were before the test."""

    tb: tbmod.Testbed
    sites: tuple[str, str]
    tid: int
    env: dict
    root: Path
    before: dict

    @property
    def url(self) -> str:
        return self.env["MPCOA_DATABASE_URL"]

    def now(self) -> dict:
        return {n: site_state(self.tb.ns(n)) for n in self.sites}


@pytest.fixture
def embedded(bed, tmp_path) -> Embedded:
    tb, sites = bed
    tid, env = embedded_database(sites, tmp_path)
    root = tmp_path / "apply-state"
    env["MPCOA_APPLY_STATE"] = str(root)
    e = Embedded(tb, sites, tid, env, root, before={})
    e.before = e.now()
    return e


def _target(state: dict, cc: str, wmem: str, endpoints: list[dict]) -> dict:
    return {"endpoints": endpoints, "limits": {"subflows": 3},
            "sysctls": {"net.ipv4.tcp_congestion_control": cc, "net.ipv4.tcp_wmem": wmem}}


def _plan(e: Embedded, targets: dict[str, dict]) -> dict:
    return {"sites": [{"site": n, "namespace": e.tb.ns(n), "target": targets[n]}
                      for n in e.sites],
            "confirm": {"wanted": False}, "watch": {"wanted": False}, "answer": {}}


def _row(url: str, tid: int, plan: dict, state: str) -> int:
    engine = make_engine(url)
    try:
        with session_scope(engine) as s:
            row = applied.add_apply(s, topology_id=tid, recommendation_id=None, plan=plan)
            if state != "applying":
                applied.finish(s, row, state)
            return row.id
    finally:
        engine.dispose()


def _get(url: str, apply_id: int) -> dict:
    engine = make_engine(url)
    try:
        with session_scope(engine) as s:
            row = applied.get_apply(s, apply_id=apply_id)
            return {"state": row.state, "sites": row.sites, "error": row.error}
    finally:
        engine.dispose()


def _mpcoa(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "mpcoa"), "apply", *args], env=env, capture_output=True,
                          text=True, timeout=180, check=False)


def test_a_failed_apply_keeps_the_previous_in_force_and_rollbacks_belong_to_their_apply(
        embedded):
    e = embedded
    tb, sites, url, env, before = e.tb, e.sites, e.url, e.env, e.before
    local, remote = sites
    addr = {n: tb.site_links(n)[0].address for n in sites}

    # apply P, in force on both sites (its journals written by the applier itself)
    good = {n: _target(before[n], "reno", "4096 32768 3145728",
                       [{"id": 1, "address": addr[n], "signal": True}]) for n in sites}
    p_id = _row(url, e.tid, _plan(e, good), "applied")
    for n in sites:
        siteapply.apply(good[n], ns=tb.ns(n), root=e.root, label=f"apply {p_id}")
    after_p = e.now()

    # apply N: the first site takes it, the second refuses it at its endpoints step
    bad = {local: _target(before[local], "bbr", "4096 16384 1048576",
                          [{"id": 2, "address": addr[local], "subflow": True}]),
           remote: _target(before[remote], "bbr", "4096 16384 1048576",
                           [{"id": 2, "address": addr[remote], "dev": "mpcoanodev0",
                             "subflow": True}])}
    n_id = _row(url, e.tid, _plan(e, bad), "applying")
    run = subprocess.run(
        [sys.executable, "-c", f"from service.flows.applying.apply import run_apply; "
                               f"run_apply({n_id}, watch_here=False)"],
        env={**env, "PYTHONPATH": str(ROOT_DIR)}, capture_output=True, text=True, timeout=180,
        check=False)
    assert run.returncode == 0, run.stdout + run.stderr
    row = _get(url, n_id)
    assert row["state"] == "failed", row
    assert f"previous apply {p_id} still in force" in row["error"], row
    assert row["sites"][local]["state"] == "reverted", row
    assert {r["in_force"] for r in row["sites"].values()} == {f"apply {p_id}"}, row
    # both sites exactly as P left them, P's journals in force
    assert e.now() == after_p
    for n in sites:
        journal = siteapply.read_journal(siteapply.state_dir(tb.ns(n), e.root))
        assert (journal["label"], journal["phase"]) == (f"apply {p_id}", "applied")
    assert _get(url, p_id)["state"] == "applied"

    # no new apply while a rollback is under way
    engine = make_engine(url)
    with session_scope(engine) as s:
        applied.finish(s, applied.get_apply(s, apply_id=p_id), "rolling_back")
    engine.dispose()
    busy = _mpcoa(env, str(e.tid), "--no-confirm", "--no-watch")
    assert busy.returncode == 2 and f"apply {p_id} is rolling back" in busy.stderr, \
        busy.stdout + busy.stderr
    assert e.now() == after_p

    # the rollback (under way) goes to P, the apply in force, passing over the failed N
    back = _mpcoa(env, str(e.tid), "--rollback", "--json")
    assert back.returncode == 0, back.stdout + back.stderr
    out = json.loads(back.stdout)
    assert (out["apply"], out["state"]) == (p_id, "rolled_back"), out
    assert e.now() == before

    # once more: it ran already, which is what was asked
    again = _mpcoa(env, str(e.tid), "--rollback")
    assert again.returncode == 0, again.stdout + again.stderr
    assert f"apply {p_id}: rolled_back; already rolled back" in again.stdout
    assert e.now() == before


def test_a_rollback_leaves_another_applys_journal_alone(embedded):
    e = embedded
    tb, sites, url, env, before = e.tb, e.sites, e.url, e.env, e.before
    targets = {n: _target(before[n], "reno", "4096 32768 3145728", []) for n in sites}
    stale = _row(url, e.tid, _plan(e, targets), "applied")
    # the sites hold another apply's journal (a newer apply, say, the database knows elsewhere)
    for n in sites:
        siteapply.apply(targets[n], ns=tb.ns(n), root=e.root, label=f"apply {stale + 1000}")
    held = e.now()
    try:
        back = _mpcoa(env, str(e.tid), "--rollback")
        assert back.returncode == 1, back.stdout + back.stderr
        row = _get(url, stale)
        assert row["state"] == "failed" and {r["state"] for r in row["sites"].values()} == {
            "refused"}, row
        assert f"holds apply {stale + 1000}'s journal" in row["error"], row
        assert e.now() == held  # never undone
    finally:
        for n in sites:
            siteapply.rollback(ns=tb.ns(n), root=e.root)
    assert e.now() == before

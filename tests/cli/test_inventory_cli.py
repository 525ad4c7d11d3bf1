"""`mpcoa site|topology|campaign` and the CLI's conventions against a real database (a migrated
SQLite copy, and PostgreSQL): the command's own app in this process (Typer's runner; seconds of
interpreter start per call saved), and the installed command itself for the exit statuses."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cli.main import app
from service.db import _engines
from service.settings import get_settings
from tests.conftest import migrated_database, new_campaign

BIN = Path(sys.executable).parent


@dataclass
class Ran:
    returncode: int
    stdout: str
    stderr: str


def _env(url: str, tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MPCOA_")}
    env.update({"MPCOA_DATABASE_URL": url, "MPCOA_DATA_DIR": str(tmp_path)})
    return env


def _mpcoa(env, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "mpcoa"), *args], env=env, capture_output=True, text=True,
                          timeout=120, check=False)


def _in_process(env, *args: str) -> Ran:
    """The app as the installed command runs it, with `env` as its whole MPCOA_ environment."""
    saved = {k: v for k, v in os.environ.items() if k.startswith("MPCOA_")}
    for key in saved:
        del os.environ[key]
    os.environ.update({k: v for k, v in env.items() if k.startswith("MPCOA_")})
    get_settings.cache_clear()
    try:
        r = CliRunner().invoke(app, list(args), prog_name="mpcoa", catch_exceptions=False)
        return Ran(r.exit_code, r.stdout, r.stderr)
    finally:
        for key in [k for k in os.environ if k.startswith("MPCOA_")]:
            del os.environ[key]
        os.environ.update(saved)
        get_settings.cache_clear()
        engine = _engines.pop(env["MPCOA_DATABASE_URL"], None)
        if engine is not None:
            engine.dispose()


def _refused(out, code: int, *needles: str) -> None:
    """One `mpcoa: error:` line (after click's usage lines, for a usage error), the status."""
    assert out.returncode == code, (out.returncode, out.stdout, out.stderr)
    assert "Traceback" not in out.stderr and out.stdout == ""
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith("mpcoa: error: "), out.stderr
    for needle in needles:
        assert needle in last, out.stderr


def _inventory_round_trip(env, tmp_path: Path) -> None:
    added = _in_process(env, "site", "add", "SRL", "--isp", "K:100000:40000:Kabelnett",
                   "--isp", "T:50000:10000", "--description", "Simula", "--json")
    assert added.returncode == 0, added.stderr
    srl = json.loads(added.stdout)
    assert srl["name"] == "SRL" and srl["description"] == "Simula"
    assert [(i["label"], i["name"], i["down_kbps"], i["up_kbps"]) for i in srl["isps"]] == [
        ("K", "Kabelnett", 100000.0, 40000.0), ("T", "T", 50000.0, 10000.0)]
    plain = _in_process(env, "site", "add", "HU", "--isp", "C:100000:50000")
    assert plain.returncode == 0 and plain.stdout.startswith("site "), plain.stderr

    _refused(_in_process(env, "site", "add", "SRL", "--isp", "K:1:1"), 2,
             "a site named 'SRL' exists")
    _refused(_in_process(env, "site", "add", "X", "--isp", "K:fast:1"), 2, "DOWN_KBPS 'fast'")
    _refused(_in_process(env, "site", "add", "X", "--isp", "K:1"), 2, "LABEL:DOWN_KBPS:UP_KBPS")
    _refused(_in_process(env, "site", "add", "X", "--isp", "K:-5:1"), 2, "down_kbps")
    _refused(_in_process(env, "site", "add", "X"), 2, "--isp")

    listed = json.loads(_in_process(env, "site", "list", "--json").stdout)
    assert listed["total"] == 2 and [s["name"] for s in listed["items"]] == ["SRL", "HU"]
    assert listed["items"][0] == srl

    by_ids = tmp_path / "pair.yaml"
    hu_id = listed["items"][1]["id"]
    by_ids.write_text(f"local_site_id: {srl['id']}\nremote_site_id: {hu_id}\n"
                      "rtts_ms: {K-C: 300}\n")
    made = _in_process(env, "topology", "add", str(by_ids), "--json")
    assert made.returncode == 0, made.stderr
    topo = json.loads(made.stdout)
    assert (topo["local_site"]["name"], topo["remote_site"]["name"]) == ("SRL", "HU")
    assert {s["name"]: s["rtt_ms"] for s in topo["subflows"]} == {"K-C": 300.0, "T-C": None}
    _refused(_in_process(env, "topology", "add", str(by_ids)), 2, "exists")

    inline = tmp_path / "inline.json"  # the form POST /recommendations takes: sites stored too
    inline.write_text(json.dumps({
        "local": {"name": "UNIS", "isps": [{"name": "Telenor", "label": "T", "down_kbps": 8000,
                                           "up_kbps": 8000}]},
        "remote": {"name": "HIN", "isps": [{"name": "Uninett", "label": "U", "down_kbps": 9000,
                                           "up_kbps": 9000}]}}))
    second = _in_process(env, "topology", "add", str(inline))
    assert second.returncode == 0 and "UNIS -> HIN" in second.stdout, second.stderr
    _refused(_in_process(env, "topology", "add", str(inline)), 2, "exists")

    missing = tmp_path / "missing.yaml"
    missing.write_text("local_site_id: 1\nremote_site_id: 999\n")
    _refused(_in_process(env, "topology", "add", str(missing)), 3, "site 999 not found")
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    _refused(_in_process(env, "topology", "add", str(broken)), 2, "not valid JSON")
    wrong = tmp_path / "wrong.yaml"
    wrong.write_text("local_site_id: 1\nremote_site_id: 2\ncolour: blue\n")
    _refused(_in_process(env, "topology", "add", str(wrong)), 2, "colour")
    _refused(_in_process(env, "topology", "add", str(tmp_path / "nowhere.yaml")), 2,
             "No such file")

    topologies = json.loads(_in_process(env, "topology", "list", "--json").stdout)
    assert topologies["total"] == 2 and topologies["items"][0] == topo
    text = _in_process(env, "topology", "list")
    assert text.returncode == 0 and "SRL -> HU" in text.stdout and "K-C(300 ms)" in text.stdout


def _campaigns(env, url: str, tmp_path: Path) -> None:
    from service.db import make_engine, session_scope
    from service.store import campaigns

    listed = json.loads(_in_process(env, "topology", "list", "--json").stdout)
    topology_id = listed["items"][0]["id"]
    engine = make_engine(url)
    try:
        with session_scope(engine) as s:
            cid = new_campaign(s, topology_id, ccs=["cubic"], buffer_grid_mib=[0.5, 1.0, 2.0]).id
        listed = json.loads(_in_process(env, "campaign", "list", "--json").stdout)
        assert [(c["id"], c["state"]) for c in listed["items"]] == [(cid, "queued")]
        cancelled = _in_process(env, "campaign", "cancel", str(cid), "--json")
        assert cancelled.returncode == 0, cancelled.stderr
        assert json.loads(cancelled.stdout)["state"] == "cancelled"
        with session_scope(engine) as s:
            assert campaigns.get_campaign(s, campaign_id=cid).state == "cancelled"
        again = _in_process(env, "campaign", "cancel", str(cid))
        assert again.returncode == 0 and f"campaign {cid}: cancelled" in again.stdout
        assert json.loads(_in_process(env, "campaign", "list", "--state", "queued", "--json")
                          .stdout)["items"] == []

        with session_scope(engine) as s:
            done = new_campaign(s, topology_id, ccs=["cubic"], buffer_grid_mib=[0.5, 1.0, 2.0]).id
            campaigns.set_state(s, campaign_id=done, state="running")
            campaigns.set_state(s, campaign_id=done, state="done")
        _refused(_in_process(env, "campaign", "cancel", str(done)), 2, "cannot become cancelled")
        _refused(_in_process(env, "campaign", "cancel", "999999"), 3, "campaign 999999 not found")
        _refused(_in_process(env, "campaign", "list", "--state", "asleep"), 2,
                 "'asleep' is not one of 'queued'")
        _refused(_in_process(env, "campaign", "cancel", "0"), 2, "greater than or equal to 1")
    finally:
        engine.dispose()


def test_site_topology_and_campaign_commands_on_sqlite(database_url, tmp_path):
    env = _env(database_url, tmp_path)
    _inventory_round_trip(env, tmp_path)
    _campaigns(env, database_url, tmp_path)
    # calibrate's refusals come before any probe: a missing topology is 3, --json a batch 2
    _refused(_in_process(env, "calibrate", "999999", "--json"), 3, "topology 999999 not found")
    (tmp_path / "ids").write_text("1\n")
    _refused(_in_process(env, "calibrate", "--batch", str(tmp_path / "ids"), "--json"), 2,
             "--json is for one campaign")
    tokens = json.loads(_in_process(env, "token", "list", "--json").stdout)
    made = json.loads(_in_process(env, "token", "create", "ci", "--scope", "read", "--json")
                      .stdout)
    assert made["scope"] == "read" and made["token"].startswith("mpcoa_")
    listed = json.loads(_in_process(env, "token", "list", "--json").stdout)
    assert [t["name"] for t in listed] == [*(t["name"] for t in tokens), "ci"]
    _refused(_in_process(env, "token", "revoke", "nobody"), 3, "no token named 'nobody'")


@pytest.mark.postgres
def test_site_topology_and_campaign_commands_on_postgres(tmp_path):
    with migrated_database("mpcoa_cli") as url:
        env = _env(url, tmp_path)
        _inventory_round_trip(env, tmp_path)
        _campaigns(env, url, tmp_path)


def test_version_and_usage_errors(tmp_path):
    env = _env(f"sqlite:///{tmp_path / 'x.db'}", tmp_path)
    version = _mpcoa(env, "--version")
    assert version.returncode == 0 and version.stdout.strip().startswith("mpcoa 0."), version
    for args, needle in (
        (["calibrate", "1", "--mode", "foo"], "'foo' is not one of 'grid', 'adaptive'"),
        (["fit", "--samples", "x", "--model", "linear"], "'linear' is not one of 'paper'"),
        (["token", "create", "x", "--scope", "admin"], "'admin' is not one of 'write', 'read'"),
        (["demo", "--scenario", "mars"], "'mars' is not one of"),
        (["calibrate", "--rnus", "3"], "No such option: --rnus"),
        (["site", "list", "--limit", "0"], "--limit"),
    ):
        out = _in_process(env, *args)  # the command's own handling, without a process each
        _refused(out, 2, needle)
        assert "pydantic" not in out.stderr and "http" not in out.stderr, out.stderr
        assert out.stderr.startswith("Usage: mpcoa"), out.stderr


def test_an_unreachable_or_unmigrated_database_is_status_4(tmp_path):
    bare = _env(f"sqlite:///{tmp_path / 'never-migrated.db'}", tmp_path)
    _refused(_in_process(bare, "site", "list"), 4, "database:", "mpcoa db upgrade")
    gone = _env("postgresql+psycopg://nobody@127.0.0.1:1/none", tmp_path)
    _refused(_mpcoa(gone, "campaign", "list"), 4, "database:")

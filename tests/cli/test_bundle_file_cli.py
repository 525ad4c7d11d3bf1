"""`mpcoa show BUNDLE` and `mpcoa report BUNDLE` read a bundle file with no database: a real
bundle (a finished campaign exported from a migrated SQLite database), then the commands run
with MPCOA_DATABASE_URL pointing at a database that does not exist; it still does not after."""

from __future__ import annotations

import json
import os
import re

import pytest
from typer.testing import CliRunner

from cli.main import app
from service.flows.takeaways.bundle_export import export_bundle
from service.settings import get_settings
from tests.api.test_bundle import finished_campaign


@pytest.fixture
def bundle(db_session, tmp_path):
    campaign = finished_campaign(db_session)
    path = tmp_path / "srl-hu.tar.gz"
    path.write_bytes(export_bundle(db_session, campaign_id=campaign.id))
    return path


@pytest.fixture
def offline(tmp_path, monkeypatch):
    """`mpcoa ARGS...` with a database URL whose file must never appear."""
    for key in [k for k in os.environ if k.startswith("MPCOA_")]:
        monkeypatch.delenv(key)
    absent = tmp_path / "never" / "mpcoa.db"
    monkeypatch.setenv("MPCOA_DATABASE_URL", f"sqlite:///{absent}")
    monkeypatch.setenv("MPCOA_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.chdir(tmp_path)
    get_settings.cache_clear()

    def run(*args: str):
        r = CliRunner().invoke(app, list(args), catch_exceptions=False)
        return r.exit_code, r.stdout, r.stderr

    yield run
    get_settings.cache_clear()
    assert not absent.exists() and not absent.parent.exists()


@pytest.mark.slow  # a campaign seeded, exported, migrated again and rendered: seconds of CPU
def test_show_summarises_a_bundle_with_no_database(offline, bundle, db_session):
    code, out, err = offline("show", str(bundle), "--json")
    assert (code, err) == (0, "")
    doc = json.loads(out)
    assert doc["topology"]["local"] == "SRL" and doc["topology"]["remote"] == "HU"
    assert doc["measurements"] > 0 and doc["probes"]["impact"]["ok"] > 0
    assert doc["answer"]["opm"] == doc["bundle_answer"]["opm"] and doc["differs"] == {}
    code, text, err = offline("show", str(bundle))
    assert (code, err) == (0, "")
    assert "SRL -> HU" in text and "the answer derived here is the bundle's" in text
    assert f"{doc['answer']['obs_mib']:.6g}" in text


@pytest.mark.slow
def test_report_of_a_bundle_writes_a_pdf_with_no_database(offline, bundle, tmp_path):
    code, out, err = offline("report", str(bundle), "--json")
    assert (code, err) == (0, ""), err
    written = json.loads(out)
    assert written == {"campaign_id": None, "bundle": str(bundle), "pdf": "srl-hu.pdf",
                       "pngs": []}
    pdf = (tmp_path / "srl-hu.pdf").read_bytes()
    assert pdf.startswith(b"%PDF") and len(re.findall(rb"/Type /Page\b", pdf)) == 4


@pytest.mark.parametrize(("args", "message"), [
    (["show", "nothing.tar.gz"], "nothing.tar.gz: no such file"),
    (["report", "nothing.tar.gz"], "nothing.tar.gz: no such file, and not a campaign id"),
    (["report", "0"], "campaign id 0: not in 1.."),
    (["show", "junk.tar.gz"], "junk.tar.gz: "),
    (["report", "junk.tar.gz"], "junk.tar.gz: "),
    (["show", "."], ".: is a directory"),
])
def test_a_bad_bundle_argument_is_one_line(offline, tmp_path, args, message):
    (tmp_path / "junk.tar.gz").write_bytes(b"not a tarball at all")
    code, out, err = offline(*args)
    assert code == 2 and out == ""
    assert err.startswith("mpcoa: error: " + message) and err.count("\n") == 1, err


@pytest.mark.slow
def test_a_bundles_report_is_titled_with_its_file_and_source_campaign(bundle, db_session):
    from service.flows.takeaways.bundle_file import opened_bundle, report_of, summary

    with opened_bundle(bundle.read_bytes()) as opened:
        source = summary(opened)["source"]
        data = report_of(opened, bundle.name)
        assert data.solved.solution is not None and data.points and data.omegas
    assert source["campaign_id"] >= 1
    assert data.title == (f"Campaign {source['campaign_id']} of srl-hu.tar.gz: SRL -> HU "
                          "(adaptive, done)")

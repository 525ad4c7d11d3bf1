"""Bundles are input like any other: hundreds of malformed bundles made from a real exported one
(tests/api/bundle_mutations.py) imported the way `mpcoa import` does (one transaction on
PostgreSQL). None ends in a traceback, a refused one leaves no row behind, an accepted one never
makes the campaign's CSV, Parquet or bundle answer 5xx, and the answer stored (the one `apply`
reads) is always the one derived again from the imported rows, never the bundle's."""

from __future__ import annotations

import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from api.app import create_app
from models import Base
from service.db import make_engine, session_scope
from service.errors import ServiceError
from service.flows.takeaways import bundle_archive
from service.flows.takeaways.bundle_export import export_bundle
from service.flows.takeaways.bundle_import import DIFFERS, import_bundle, rederive, same_answer
from service.settings import Settings
from service.store import applied, campaigns, recommendations
from tests.api.bundle_mutations import Mutator
from tests.api.test_bundle import finished_campaign
from tests.conftest import migrated_database
from tests.support import require

pytestmark = pytest.mark.postgres

BIN = Path(__file__).resolve().parents[2] / ".venv" / "bin"
SEED = 20261127
PER_KIND = 24  # about 260 bundles


@pytest.fixture(scope="module")
def fuzz_db():
    """A database of its own (imports commit, as the CLI's do), with the real campaign whose
    bundle the cases are made from, seeded through the code production runs."""
    require("postgres", "PostgreSQL")
    with migrated_database("mpcoa_fuzz") as url:
        engine = make_engine(url, pool_size=2)
        with session_scope(engine) as s:
            campaign = finished_campaign(s)
        with session_scope(engine) as s:
            data = export_bundle(s, campaign_id=campaign.id)
            honest = recommendations.get_recommendation(
                s, recommendation_id=campaign.recommendation_id)
            honest = {k: getattr(honest, k) for k in ("opm", "occ", "obs_mib", "otp_mbps")}
        try:
            yield url, engine, data, honest
        finally:
            engine.dispose()


def _counts(engine) -> dict[str, int]:
    """Rows per table, in one query."""
    tables = Base.metadata.sorted_tables
    with engine.connect() as c:
        row = c.execute(select(*(select(func.count()).select_from(t).scalar_subquery()
                                 .label(t.name) for t in tables))).one()
    return dict(zip([t.name for t in tables], row, strict=True))


def test_malformed_bundles_never_leave_a_trace(fuzz_db, tmp_path):
    url, engine, data, honest = fuzz_db
    bundle = bundle_archive.read(data)
    arts = {f"artifacts/{k}/{n}": b for k, named in bundle.artifacts.items()
            for n, b in named.items()}
    spent: Counter = Counter()
    started = clock = time.monotonic()
    cases = list(Mutator(bundle.document, arts, SEED).cases(PER_KIND))
    spent["making the bundles"] += time.monotonic() - clock
    # reads open, as in the API's other tests: this one is about what an import leaves behind
    settings = Settings(database_url=url, data_dir=tmp_path, run_campaigns=False,
                        reads_need_token=False, _env_file=None)
    outcomes: Counter = Counter()
    with TestClient(create_app(settings), raise_server_exceptions=False,
                    base_url="http://localhost") as client:
        for kind, label, case, expect in cases:
            clock = time.monotonic()
            before = _counts(engine)
            done, refused = _import(engine, case)
            spent["imports" if refused is None else "refusals"] += time.monotonic() - clock
            clock = time.monotonic()
            if refused is not None:
                assert expect != "accepted", f"{kind} {label}: refused: {refused.message}"
                assert refused.message and len(refused.message) < 600, (kind, label)
                assert _counts(engine) == before, f"{kind} {label}: rows left behind"
                outcomes[kind, "refused"] += 1
                spent["checks"] += time.monotonic() - clock
                continue
            assert expect != "refused", f"{kind} {label}: accepted"
            outcomes[kind, "accepted"] += 1
            _check_accepted(client, engine, done, kind, label, honest)
            spent["checks"] += time.monotonic() - clock
    elapsed = time.monotonic() - started
    print(f"{len(cases)} bundles in {elapsed:.1f} s "
          f"({', '.join(f'{k} {v:.1f} s' for k, v in spent.items())}): {sorted(outcomes.items())}")
    assert len(cases) >= 250
    tampered = outcomes["tampered_answer", "accepted"]
    assert tampered >= 8 and sum(n for (k, v), n in outcomes.items() if v == "refused") >= 200


def _import(engine, data: bytes):
    """What `mpcoa import` runs: (Imported, None), or (None, the ServiceError that refused it);
    anything else is a traceback and fails the test."""
    try:
        with session_scope(engine) as s:
            return import_bundle(s, data), None
    except ServiceError as exc:
        return None, exc


def _check_accepted(client, engine, done, kind, label, honest) -> None:
    cid = done.campaign_id
    for path, params in ((f"/campaigns/{cid}/measurements", {"format": "csv"}),
                         (f"/campaigns/{cid}/measurements", {"format": "parquet"}),
                         (f"/campaigns/{cid}/bundle", {}), (f"/campaigns/{cid}", {})):
        r = client.get(path, params=params)
        assert r.status_code == 200, f"{kind} {label}: {path} {params} answered {r.status_code}"
    with session_scope(engine) as s:
        campaign = campaigns.get_campaign(s, campaign_id=cid)
        assert campaign.recommendation_id == done.recommendation_id
        if done.recommendation_id is None:
            assert done.no_answer, (kind, label)
            return
        stored = recommendations.get_recommendation(s, recommendation_id=done.recommendation_id)
        # the answer `apply` reads is the one derived again from the imported rows
        assert applied.latest_answer(s, topology_id=done.topology_id).id == stored.id
        assert same_answer(rederive(s, campaign_id=cid), stored), (kind, label)
        said = stored.provenance["bundle_answer"]
        assert said == done.bundle_answer
        assert (DIFFERS in stored.quality_flags) == bool(done.differs)
        if kind == "tampered_answer":
            assert done.differs, f"{label}: the tampered answer went unnoticed"
            assert {k: getattr(stored, k) for k in honest} == honest, label
            for name, both in done.differs.items():
                assert both["bundle"] == said[name] and both["rederived"] != said[name]


def test_the_cli_says_what_was_wrong_in_one_line(fuzz_db, tmp_path):
    """`mpcoa import`: a bad file is one line and status 2, with nothing stored; a tampered
    answer is imported as derived again, the difference shown, status 1."""
    _url, _engine, data, _honest = fuzz_db
    bundle = bundle_archive.read(data)
    doc = bundle.document
    arts = {f"artifacts/{k}/{n}": b for k, named in bundle.artifacts.items()
            for n, b in named.items()}
    mutator = Mutator(doc, arts, SEED)
    bad = mutator.bundle({**doc, "measurements": [
        {**doc["measurements"][0], "goodput_mbps": ["x", {}]}, *doc["measurements"][1:]]})
    tampered = mutator.bundle({**doc, "answer": {**doc["answer"], "obs_mib": 1e6}})
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path),
           "MPCOA_DATABASE_URL": f"sqlite:///{tmp_path / 'cli.sqlite3'}",
           "MPCOA_DATA_DIR": str(tmp_path)}

    def mpcoa(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(BIN / "mpcoa"), *args], env=env, capture_output=True,
                              text=True, timeout=120, check=False)

    assert mpcoa("db", "upgrade").returncode == 0
    (tmp_path / "bad.tar.gz").write_bytes(bad)
    (tmp_path / "tampered.tar.gz").write_bytes(tampered)
    out = mpcoa("import", str(tmp_path / "bad.tar.gz"))
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
    assert out.stderr.strip().count("\n") == 0
    assert "measurements.0.goodput_mbps.0: Input should be a valid number" in out.stderr
    out = mpcoa("import", str(tmp_path / "tampered.tar.gz"))
    assert out.returncode == 1, out.stdout + out.stderr
    assert "DIFFERS from the bundle's answer" in out.stdout
    assert "obs_mib: bundle 1000000.0, re-derived 15.0" in out.stdout, out.stdout
    assert "imported as campaign 1 " in out.stdout  # the bad file stored nothing before it

"""After a short real campaign with production's default settings (the embedded path `mpcoa demo`
takes: SQLite, in-process steps, the emulated testbed, the default `auto` model), every dashboard
page and every link a page shows answers 200, and the Fits page shows the answer the API gave."""

from __future__ import annotations

import re
import subprocess

import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from service.settings import Settings
from tests.dashboard.crawl import crawl

from .conftest import BIN, embedded_database

pytestmark = pytest.mark.netns

BUFFERS = ["0.03125", "0.125", "0.5"]


def test_every_page_and_link_answers_200_after_a_real_campaign(sites, testbed, tmp_path):
    topology_id, env = embedded_database(sites, tmp_path)
    url = env["MPCOA_DATABASE_URL"]
    args = ["calibrate", str(topology_id), "--cc", "reno", "--cc", "cubic", "--runs", "1",
            "--duration", "2", *[a for b in BUFFERS for a in ("--buffer", b)]]
    out = subprocess.run([str(BIN / "mpcoa"), *args], env=env, capture_output=True, text=True,
                         timeout=300, check=False)
    assert out.returncode == 0, out.stdout + out.stderr

    settings = Settings(database_url=url, data_dir=tmp_path, run_campaigns=False,
                        _env_file=None)
    with TestClient(create_app(settings)) as client:
        campaign = client.get("/campaigns?limit=1").json()["items"][0]
        assert campaign["state"] == "done" and campaign["model_kind"] == "auto"
        listed = client.get(f"/recommendations?topology_id={topology_id}&kind=calibrated")
        (rec,) = listed.json()["items"]  # the campaign's own answer, given when it finished
        assert rec["campaign_id"] == campaign["id"]
        seen = crawl(lambda path: client.get(path, follow_redirects=False), "/dashboard/")
        assert {p: s for p, s in seen.items() if s != 200} == {}
        # The crawl reached every kind of page, and the artifacts' downloads.
        for page in (f"/dashboard/topologies/{topology_id}/fits",
                     f"/dashboard/topologies/{topology_id}/impact",
                     f"/dashboard/campaigns/{campaign['id']}",
                     f"/dashboard/recommendations/{rec['id']}"):
            assert page in seen, sorted(seen)
        assert any("/artifacts/" in p for p in seen), sorted(seen)
        # The Fits page shows the answer the API gave (the campaign's own delta, both).
        fits = client.get(f"/dashboard/topologies/{topology_id}/fits").text
        shown = re.search(r"The smallest buffer reaching it: <strong>(\S+) / (\S+) at ([\d.]+) MiB",
                          fits)
        assert shown is not None, fits
        assert shown.groups() == (rec["opm"], rec["occ"], f"{rec['obs_mib']:.2f}")
        kinds = set(re.findall(r'<td class="model">(\w+)</td>', fits))
        print(f"curve kinds drawn: {sorted(kinds)}; answer {shown.groups()}")
        assert kinds and kinds <= {"quadratic", "saturating", "measured"}

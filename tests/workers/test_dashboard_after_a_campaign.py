"""After a short real campaign with production's default settings (the embedded path `mpcoa demo`
takes: SQLite, in-process steps, the emulated testbed, the default `auto` model), every dashboard
page and every link a page shows answers 200, and the Fits page shows the answer the API gave. A
short real stream campaign's pages answer 200 too and draw its frame-delay charts."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from service.settings import Settings
from tests.dashboard.crawl import chart_data, crawl

from .conftest import BIN, embedded_database

pytestmark = pytest.mark.netns

BUFFERS = ["0.03125", "0.125", "0.5"]


@contextmanager
def calibrated(sites, tmp_path, *options: str) -> Iterator[tuple]:
    """`mpcoa calibrate` a topology of `sites` with `options` over BUFFERS, then the API on its
    database: (client, topology id, the campaign, its own answer, every dashboard page and link
    crawled with its status)."""
    topology_id, env = embedded_database(sites, tmp_path)
    args = ["calibrate", str(topology_id), *options, "--runs", "1",
            *[a for b in BUFFERS for a in ("--buffer", b)]]
    out = subprocess.run([str(BIN / "mpcoa"), *args], env=env, capture_output=True, text=True,
                         timeout=300, check=False)
    assert out.returncode == 0, out.stdout + out.stderr

    settings = Settings(database_url=env["MPCOA_DATABASE_URL"], data_dir=tmp_path,
                        run_campaigns=False, _env_file=None)
    with TestClient(create_app(settings), base_url="http://localhost") as client:
        campaign = client.get("/campaigns?limit=1").json()["items"][0]
        assert campaign["state"] == "done", campaign
        listed = client.get(f"/recommendations?topology_id={topology_id}&kind=calibrated")
        every = client.get(f"/recommendations?topology_id={topology_id}").json()["items"]
        # the campaign's own answer, given when it finished (else: what it answered, and why)
        assert len(listed.json()["items"]) == 1, (
            [(r["kind"], r["quality_flags"], r["provenance"]) for r in every], campaign)
        (rec,) = listed.json()["items"]
        assert rec["campaign_id"] == campaign["id"]
        seen = crawl(lambda path: client.get(path, follow_redirects=False), "/dashboard/")
        assert {p: s for p, s in seen.items() if s != 200} == {}
        yield client, topology_id, campaign, rec, seen


def test_every_page_and_link_answers_200_after_a_real_campaign(sites, testbed, tmp_path):
    with calibrated(sites, tmp_path, "--cc", "reno", "--cc", "cubic", "--duration", "2") as (
            client, topology_id, campaign, rec, seen):
        assert campaign["model_kind"] == "auto"
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


def test_a_real_stream_campaigns_pages_answer_200_and_draw_its_frame_charts(
        sites, testbed, tmp_path):
    # grid mode: every arm measured at every buffer, so each draws a CDF per buffer
    with calibrated(sites, tmp_path, "--stream-mbps", "1", "--cc", "reno", "--duration", "3",
                    "--mode", "grid") as (
            client, _topology_id, campaign, rec, seen):
        assert campaign["objective"]["kind"] == "stream" and rec["stream"] is not None
        # beside p99, the seeds' figures of the answer's point, from its probes' frames
        st = rec["stream"]
        assert 0 < st["delay_mean_ms"] <= st["p99_ms"] <= st["delay_max_ms"], st
        assert 0 <= st["jitter_mean_ms"] <= st["jitter_max_ms"], st
        for page in (f"/dashboard/campaigns/{campaign['id']}",
                     f"/dashboard/recommendations/{rec['id']}"):
            assert page in seen, sorted(seen)
        assert any(p.endswith("/artifacts/frames.csv") for p in seen), sorted(seen)
        # the campaign page: per arm a CDF per buffer from the probes' frames.csv, a timeline
        page = client.get(f"/dashboard/campaigns/{campaign['id']}").text
        arms = page.count('data-chart="cdf"')
        assert arms >= 1
        for i in range(arms):
            chart = chart_data(page, f"cdf-{i}")
            assert {s["bs"] for s in chart["series"]} == {float(b) for b in BUFFERS}
            for s in chart["series"]:
                fractions = [f for _, f in s["points"]]
                assert fractions == sorted(fractions) and 0 < fractions[-1] <= 1
        timeline = chart_data(page, "hol-timeline")
        assert timeline["points"] and min(h for _, h in timeline["points"]) == 0
        # the answer's page: its objective and p99 per buffer with the (1 + delta) limit
        answer = client.get(f"/dashboard/recommendations/{rec['id']}").text
        assert 'id="objective"' in answer and "Objective: stream" in answer
        assert f'<dd id="stream-delay">{st["delay_mean_ms"]:.1f} / ' in answer
        p99 = chart_data(answer, f"p99-{rec['id']}")
        assert p99["limit"] == rec["stream"]["limit_p99_ms"]
        assert 'data-objective="stream"' in client.get("/dashboard/").text

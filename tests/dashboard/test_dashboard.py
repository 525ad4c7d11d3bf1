"""The dashboard in a real browser (Debian Chromium) against a live server and PostgreSQL."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime
from pathlib import Path

import httpx
import numpy as np
import pytest
from PIL import Image

from service.flows.campaign import recording
from service.flows.takeaways import figures
from service.store import artifacts as artifact_store
from service.store import dashboard as reads
from service.store import measurements, results
from service.store.measurements import MeasurementRecord
from tests.algorithm.paper_data import CCS, TABLE2, TABLE3, TSTAR
from tests.support import wait_for

from .seed import FLIPPED, HOSTILE_DESCRIPTION, RTT_MS

pytestmark = pytest.mark.postgres

SRL_HU_SUBFLOWS = list(TABLE2["SRL-HU"])


def pages(s) -> dict[str, str]:
    """Every dashboard page, for the seeded data (calibrated, empty and badly fitted topologies)."""
    t, e = s.topology_id, s.empty_topology_id
    return {
        "index": "/dashboard/",
        "topology": f"/dashboard/topologies/{t}",
        "impact": f"/dashboard/topologies/{t}/impact",
        "impact-old-campaign": f"/dashboard/topologies/{t}/impact?campaign_id={s.old_campaign_id}",
        "fits": f"/dashboard/topologies/{t}/fits",
        "fits-delta": f"/dashboard/topologies/{t}/fits?delta=0.15",
        "recommendations": f"/dashboard/topologies/{t}/recommendations",
        "campaign-done": f"/dashboard/campaigns/{s.campaign_id}",
        "campaign-running": f"/dashboard/campaigns/{s.running_campaign_id}",
        "empty-topology": f"/dashboard/topologies/{e}",
        "empty-impact": f"/dashboard/topologies/{e}/impact",
        "empty-fits": f"/dashboard/topologies/{e}/fits",
        "empty-recommendations": f"/dashboard/topologies/{e}/recommendations",
        "fits-gate-failed": f"/dashboard/topologies/{s.noisy_topology_id}/fits",
        "stream-campaign": f"/dashboard/campaigns/{s.stream_campaign_id}",
        "stream-answer": f"/dashboard/recommendations/{s.stream_recommendation_id}",
    }


PAGE_NAMES = [
    "index",
    "topology",
    "impact",
    "impact-old-campaign",
    "fits",
    "fits-delta",
    "recommendations",
    "campaign-done",
    "campaign-running",
    "empty-topology",
    "empty-impact",
    "empty-fits",
    "empty-recommendations",
    "fits-gate-failed",
    "stream-campaign",
    "stream-answer",
]
# Honest empty states: what is missing is said, on the page.
EMPTY_STATES = {
    "empty-impact": "#empty-impact",
    "empty-fits": "#empty-fits",
    "empty-recommendations": "#empty-recommendations",
}


@pytest.mark.parametrize("name", PAGE_NAMES)
def test_every_page_loads_without_console_errors_and_fits_a_laptop_screen(live, tab, name):
    page = tab.page
    response = page.goto(live.url(pages(live.seeded)[name]), wait_until="load")
    assert response is not None and response.status == 200
    assert response.headers["content-type"].startswith("text/html")
    assert "script-src 'self'" in response.headers["content-security-policy"]
    page.wait_for_load_state("networkidle")
    if name.startswith("fits"):
        page.wait_for_selector("canvas.fit-chart[data-rendered=yes]")
    if name.startswith("stream"):
        page.wait_for_selector("canvas.stream-chart[data-rendered=yes]")
    assert page.locator("h1").first.inner_text().strip()
    assert page.title().endswith("· mpcoa")
    if name in EMPTY_STATES:
        assert page.locator(EMPTY_STATES[name]).inner_text().strip()
    # Readable on a 1366x768 laptop screen: nothing forces a horizontal scroll bar.
    widths = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
    assert widths[0] <= widths[1], f"{name}: page is {widths[0]} px wide on a {widths[1]} px screen"
    page.screenshot(path=str(live.shots / f"{name}.png"), full_page=True)
    assert tab.errors == [], tab.errors


def test_impact_table_shows_the_seeded_omegas_subsets_and_sign_changes(live, tab):
    s = live.seeded
    page = tab.page
    page.goto(live.url(f"/dashboard/topologies/{s.topology_id}/impact"))
    table = page.locator("#impact-table")
    headers = [h.strip() for h in table.locator("thead th").all_inner_texts()]
    assert headers == ["Subflow", *CCS]
    checked = 0
    for k, cc in enumerate(CCS):
        for subflow in SRL_HU_SUBFLOWS:
            cell = table.locator(f'td[data-subflow="{subflow}"][data-cc="{cc}"]')
            text = cell.inner_text().strip()
            # The number seeded (Table 2 of the paper), as the service derived and stored it.
            assert text.split()[0] == f"{TABLE2['SRL-HU'][subflow][k]:.3f}", (subflow, cc, text)
            assert text.split()[0] == f"{s.omegas[(subflow, cc)]:.3f}"
            classes = cell.get_attribute("class").split()
            sign = "om-pos" if TABLE2["SRL-HU"][subflow][k] >= 0 else "om-neg"
            assert any(c.startswith(sign) for c in classes), (subflow, cc, classes)
            # Table 3: outside SP* is marked.
            assert ("out" in classes) == (subflow not in TABLE3["SRL-HU"][cc]), (subflow, cc)
            checked += 1
    assert checked == len(CCS) * len(SRL_HU_SUBFLOWS) == 48
    subsets = page.locator("#subset-table tbody tr")
    assert subsets.count() == len(CCS)
    for cc in CCS:
        row = page.locator(f'#subset-table tr[data-cc="{cc}"] td').nth(1).inner_text()
        listed = set(row.split("(")[0].replace(" ", "").split(","))
        assert listed == TABLE3["SRL-HU"][cc], cc
    # History: the older campaign differs in sign exactly at FLIPPED, and those cells are flagged.
    assert f"{len(FLIPPED)} sign changes" in page.locator("#sign-change-summary").inner_text()
    flagged = page.locator("#sign-change-table tbody tr")
    found = set()
    for i in range(flagged.count()):
        row = flagged.nth(i)
        found.add((row.locator("th").inner_text().strip(), row.locator("td").first.inner_text()))
        assert row.locator("td.sign-change").count() == 1
        old, new = (c.replace("⚠", "").strip() for c in row.locator("td.r").all_inner_texts())
        assert float(old) * float(new) < 0
    assert found == set(FLIPPED)
    # The full history (collapsed) has every (subflow, CC) pair.
    assert page.locator("#history-table tbody tr").count() == 48
    assert tab.errors == [], tab.errors


def _non_background_share(png: bytes) -> tuple[float, int]:
    """The share of pixels that differ from the most common colour, and how many colours."""
    pixels = np.asarray(Image.open(io.BytesIO(png)).convert("RGB"), dtype=np.int16).reshape(-1, 3)
    colours, counts = np.unique(pixels // 32, axis=0, return_counts=True)
    background = pixels[np.all(pixels // 32 == colours[counts.argmax()], axis=1)][0]
    drawn = np.abs(pixels - background).max(axis=1) > 24
    return float(drawn.mean()), len(colours)


def test_fit_chart_renders_points_curves_and_the_t_star_band(live, tab):
    s = live.seeded
    page = tab.page
    page.goto(live.url(f"/dashboard/topologies/{s.topology_id}/fits"))
    page.wait_for_selector("canvas.fit-chart[data-rendered=yes]")
    canvases = page.locator("canvas.fit-chart")
    assert canvases.count() == 2  # one chart per path manager (Figure 5)
    for i in range(2):
        canvas = canvases.nth(i)
        share, colours = _non_background_share(canvas.screenshot())
        assert share > 0.03, f"chart {i} looks blank ({share:.3%} drawn)"
        assert colours >= 8, f"chart {i} has only {colours} colour buckets"
        # Chart.js holds what it drew: per CC a fitted curve and its measured points.
        kinds = page.evaluate(
            "(c) => Chart.getChart(c).data.datasets.map(d => [d.label, d.data.length])",
            canvas.element_handle(),
        )
        labels = dict(kinds)
        for cc in CCS:
            assert labels[cc] == 121  # 121 points of the curve on the measured [0.5, 30] MiB
            assert labels[f"{cc} measured"] == 13  # one mean per buffer of the grid
        assert any(label.startswith("δ band up to T*") for label in labels)
    # T* and the answer: the paper's SRL-HU values (Table 5), from curves fitted to noisy data.
    solution = page.locator("#solution").inner_text()
    t_star = float(solution.split("T* = ")[1].split()[0])
    assert t_star == pytest.approx(TSTAR["SRL-HU"][0], abs=1.0)
    assert "PCDC / hybla" in solution
    gates = page.locator(".gate").all_inner_texts()
    assert len(gates) == 2 and all("quality gate" in g for g in gates)
    # An arm answered from its measured means has no statistics of its own: no p-values, no
    # "never"; a path manager whose every arm is so shows no R² either.
    sections = page.locator("section.fit")
    for i in range(sections.count()):
        section = sections.nth(i)
        models = section.locator("td.model").all_inner_texts()
        assert models
        for row, model in enumerate(models):
            cells = section.locator("table.curves tbody tr").nth(row)
            if model == "measured":
                assert set(cells.locator("td.p-value").all_inner_texts()) == {"—"}
                assert cells.locator("td.obs").inner_text() != "never"
        r2 = [float(t.split("=")[1])
              for t in section.locator(".fit-head span").all_inner_texts() if t.startswith("R²")]
        if set(models) == {"measured"}:
            assert r2 == [] and section.locator(".measured-note").count() == 1
        else:
            assert len(r2) == 1 and 0.9 < r2[0] <= 1.0
    page.locator("section.fit").first.screenshot(path=str(live.shots / "fit-chart.png"))
    assert tab.errors == [], tab.errors


def _post_recommendation(live, body: dict) -> httpx.Response:
    return httpx.post(
        live.url("/recommendations"),
        json=body,
        headers={"Authorization": f"Bearer {live.token}"},
        timeout=30,
    )


def test_a_recommendation_posted_through_the_api_appears_on_its_pages(live, tab):
    s = live.seeded
    r = _post_recommendation(live, {"topology_id": s.topology_id, "delta": 0.07})
    assert r.status_code == 200, r.text
    rec = r.json()
    assert rec["kind"] == "calibrated"
    page = tab.page
    page.goto(live.url(f"/dashboard/topologies/{s.topology_id}/recommendations"))
    row = page.locator(f"#rec-{rec['id']}")
    assert row.count() == 1
    cells = [c.strip() for c in row.locator("td").all_inner_texts()]
    assert cells[0] == str(rec["id"])
    assert cells[2] == "calibrated"
    assert cells[4:8] == [rec["opm"], rec["occ"], f"{rec['obs_mib']:.2f}", f"{rec['otp_mbps']:.2f}"]
    assert cells[9] == f"{rec['traditional']['buffer_mib']:.2f}"
    assert cells[10] == f"{100 * rec['traditional']['obs_ratio']:.2f} %"
    # Its own page, reached by the link.
    row.locator("a").first.click()
    page.wait_for_url(f"**/dashboard/recommendations/{rec['id']}")
    text = page.locator("#recommendation").inner_text()
    assert f"{rec['obs_mib']:.2f} MiB" in text and rec["occ"] in text
    assert page.locator("#arms-table tbody tr").count() == len(rec["arms"]) == 12
    assert page.locator(".warn-banner").count() == 0  # the SRL-HU fits pass the gate
    page.screenshot(path=str(live.shots / "recommendation.png"), full_page=True)
    # The topology page shows it as the latest.
    page.goto(live.url(f"/dashboard/topologies/{s.topology_id}"))
    assert f"#{rec['id']}" in page.locator(".rec-summary").inner_text()
    page.screenshot(path=str(live.shots / "topology-with-recommendation.png"), full_page=True)
    assert tab.errors == [], tab.errors


def test_a_provisional_recommendation_shows_its_flags_and_the_campaign_live(live, tab):
    s = live.seeded
    r = _post_recommendation(live, {"topology_id": s.empty_topology_id})
    assert r.status_code == 202, r.text
    rec = r.json()
    assert rec["campaign_id"] == s.running_campaign_id  # the running campaign is reused
    page = tab.page
    page.goto(live.url(f"/dashboard/topologies/{s.empty_topology_id}/recommendations"))
    row = page.locator(f"#rec-{rec['id']}")
    assert "provisional" in row.inner_text()
    flags = row.locator(".flag").all_inner_texts()
    assert set(flags) == set(rec["quality_flags"]) and "provisional" in flags
    box = page.locator("#active-campaign [data-campaign-poll]")
    before = box.locator("[data-role=text]").inner_text()
    assert before.startswith("0 / ")
    # A worker records a probe run: the open page follows without a reload.
    with live.session_factory() as session:
        now = datetime.now(UTC)
        recording.record(
            session, MeasurementRecord(
            campaign_id=s.running_campaign_id,
            phase="impact",
            pm="FullMesh",
            cc="cubic",
            bs_mib=4.0,
            run=0,
            subflows=["P-D", "T-D"],
            duration_s=5,
            goodput_mbps=[1.0] * 5,
            tool="synthetic",
            started_at=now,
            finished_at=now,
            rtt_ms={"P-D": RTT_MS}),
        )
        session.commit()
    wait_for(lambda: box.locator("[data-role=text]").inner_text().startswith("1 / "), 15,
             "the progress box to show the first probe", interval=0.25)
    assert page.evaluate("document.querySelector('#active-campaign progress').value") > 0
    page.screenshot(path=str(live.shots / "recommendations-provisional.png"), full_page=True)
    assert tab.errors == [], tab.errors


def test_user_text_is_escaped_not_run(live, tab):
    page = tab.page
    page.goto(live.url(f"/dashboard/topologies/{live.seeded.topology_id}"))
    assert HOSTILE_DESCRIPTION in page.locator("section.card").first.inner_text()
    assert page.evaluate("window.__pwned === undefined")
    assert page.locator("section.card b").count() == 0
    assert tab.errors == [], tab.errors


@pytest.mark.parametrize(
    "path",
    [
        "/dashboard/topologies/999999",
        "/dashboard/topologies/abc",
        "/dashboard/topologies/0/fits",
        "/dashboard/topologies/99999999999999999999/impact",
        "/dashboard/campaigns/424242",
        "/dashboard/recommendations/-1",
        "/dashboard/no-such-page",
        "/dashboard/static/../routes.py",
        "/dashboard/static/%2e%2e/routes.py",
    ],
)
def test_bad_ids_and_pages_are_an_html_404(live, tab, path):
    response = tab.page.goto(live.url(path))
    assert response is not None and response.status == 404
    assert response.headers["content-type"].startswith("text/html")
    assert tab.page.locator("h1").inner_text() == "Not found"
    assert tab.page.locator("#error-message").inner_text()


def test_a_campaign_of_another_topology_or_a_bad_delta_is_not_a_500(live):
    s = live.seeded
    wrong = httpx.get(
        live.url(
            f"/dashboard/topologies/{s.topology_id}/impact?campaign_id={s.running_campaign_id}"
        )
    )
    assert wrong.status_code == 404 and "is not a campaign of topology" in wrong.text
    for delta in ("1.5", "nan", "x", "-0.1"):
        r = httpx.get(live.url(f"/dashboard/topologies/{s.topology_id}/fits?delta={delta}"))
        assert r.status_code == 400 and "delta must be" in r.text, delta
    r = httpx.get(live.url(f"/dashboard/topologies/{s.topology_id}/recommendations?page=0"))
    assert r.status_code == 400
    r = httpx.get(live.url("/dashboard"), follow_redirects=False)
    assert r.status_code == 308 and r.headers["location"] == "/dashboard/"


def test_the_servers_address_opens_the_dashboard_in_a_browser(live, tab):
    """What a user types first: the server's address; and the icon every browser asks for."""
    response = tab.page.goto(live.url("/"))
    assert response is not None and response.status == 200
    assert tab.page.url == live.url("/dashboard/")
    icon = httpx.get(live.url("/favicon.ico"), follow_redirects=True)
    assert icon.status_code == 200 and icon.headers["content-type"] == "image/png"


def test_chart_library_is_served_from_the_project(live):
    r = httpx.get(live.url("/dashboard/static/vendor/chart.umd.js"))
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/javascript")
    assert r.text.startswith("/*!\n * Chart.js v4.")


def test_a_failed_quality_gate_is_shown_on_the_fits_and_on_the_answer(live, tab):
    s = live.seeded
    with live.session_factory() as session:
        stored = {
            f.pm: f for f in results.list_fits(session, campaign_id=s.noisy_campaign_id)
        }
    assert stored and not any(f.gate_passed for f in stored.values())
    page = tab.page
    page.goto(live.url(f"/dashboard/topologies/{s.noisy_topology_id}/fits"))
    page.wait_for_selector("canvas.fit-chart[data-rendered=yes]")
    for pm, fit in stored.items():
        head = page.locator(f"#pm-{pm.lower()} .fit-head").inner_text()
        assert "quality gate FAILED" in head
        assert f"R² = {fit.r2:.3f}" in head
        assert f"n = {fit.n}" in head
    r = _post_recommendation(live, {"topology_id": s.noisy_topology_id})
    assert r.status_code == 200, r.text
    rec = r.json()
    gate_flags = [f for f in rec["quality_flags"] if f.startswith("quality_gate_failed")]
    assert len(gate_flags) == len(stored)
    page.goto(live.url(f"/dashboard/recommendations/{rec['id']}"))
    shown = page.locator("#recommendation .flag.flag-bad").all_inner_texts()
    assert sorted(shown) == sorted(gate_flags)
    assert "Low confidence" in page.locator("#recommendation .warn-banner").inner_text()
    assert page.locator("#recommendation").get_by_text("gate FAILED").count() == 0
    assert page.get_by_text("gate FAILED").count() == len(stored)  # provenance, per fit
    page.screenshot(path=str(live.shots / "recommendation-gate-failed.png"), full_page=True)
    assert tab.errors == [], tab.errors


# A stream campaign's page: a frame-delay CDF per arm (one curve per buffer) and one probe's
# head-of-line timeline; its answer's page: p99 per buffer per arm with the (1 + delta) limit.
STREAM_CHARTS = {"stream-campaign": {"cdf-0", "cdf-1", "hol-timeline"},
                 "stream-answer": {"p99-{rec}"}}


@pytest.mark.parametrize("name", sorted(STREAM_CHARTS))
def test_stream_charts_render(live, tab, name):
    s = live.seeded
    page = tab.page
    page.goto(live.url(pages(s)[name]))
    page.wait_for_selector("canvas.stream-chart[data-rendered=yes]")
    canvases = page.locator("canvas.stream-chart")
    ids = {canvases.nth(i).get_attribute("id") for i in range(canvases.count())}
    assert ids == {c.format(rec=s.stream_recommendation_id) for c in STREAM_CHARTS[name]}
    for i in range(canvases.count()):
        canvas = canvases.nth(i)
        assert canvas.get_attribute("data-rendered") == "yes"
        share, _colours = _non_background_share(canvas.screenshot())
        assert share > 0.01, f"{canvas.get_attribute('id')} looks blank ({share:.3%} drawn)"
        drawn = dict(page.evaluate(
            "(c) => Chart.getChart(c).data.datasets.map(d => [d.label, d.data.length])",
            canvas.element_handle()))
        kind = canvas.get_attribute("data-chart")
        if kind == "cdf":  # one curve per buffer of the grid, each with its frames' steps
            assert len(drawn) == 4 and all(n > 10 for n in drawn.values()), drawn
        elif kind == "timeline":  # every frame after the warm-up
            assert drawn["head-of-line wait per frame"] == 125
        else:  # both arms over the grid, the limit line and OBS
            assert drawn["FullMesh/bbr (the answer)"] == 4
            assert any(label.startswith("(1 + δ)·best") for label in drawn)
            assert any(label.startswith("OBS") for label in drawn)
    page.screenshot(path=str(live.shots / f"{name}-charts.png"), full_page=True)
    assert tab.errors == [], tab.errors


# --- figures the report draws too (flows.takeaways.figures) ---------------------------------------
IPERF3_DOC = Path(__file__).resolve().parents[1] / "data/iperf3-client-intervals.json"


def test_the_campaign_lists_each_probes_stored_goodput_and_links_its_figures(live, tab):
    s = live.seeded
    page = tab.page
    response = page.goto(live.url(f"/dashboard/campaigns/{s.campaign_id}"))
    assert response.status == 200
    headers = page.locator("#measurements thead th").all_inner_texts()
    assert "Goodput Mbit/s" in headers
    rows = page.locator("#measurements tbody tr")
    assert rows.count() == 50
    with live.session_factory() as session:
        for i in (0, 17, 49):
            row = rows.nth(i)
            m = measurements.get_measurement(
                session, measurement_id=int(row.get_attribute("data-measurement")))
            assert m.mean_goodput_mbps is not None
            assert row.locator("td.goodput").inner_text() == f"{m.mean_goodput_mbps:,.2f}"
    # the probe's number opens its own page: goodput over time, bytes per subflow
    rows.first.locator("td a").first.click()
    page.wait_for_selector("canvas.figure-chart[data-rendered=yes]")
    assert page.locator("h1").inner_text().startswith("Probe #")
    assert tab.errors == [], tab.errors


def test_a_probe_page_draws_goodput_subflow_bytes_and_iperf3s_tcp_state(live, tab):
    s = live.seeded
    with live.session_factory() as session:
        m = reads.latest_measurements(session, s.campaign_id, 1)[0]
        artifact_store.store_artifacts(session, measurement_id=m.id,
                                       artifacts={"iperf3-client.json": IPERF3_DOC.read_bytes()})
        session.commit()
        goodput, interval = list(m.goodput_mbps), m.interval_s
    page = tab.page
    response = page.goto(live.url(f"/dashboard/measurements/{m.id}"))
    assert response.status == 200
    page.wait_for_load_state("networkidle")
    ids = page.evaluate(
        "() => [...document.querySelectorAll('canvas.figure-chart[data-rendered=yes]')]"
        ".map(c => c.id)")
    assert "probe-goodput" in ids
    assert {"probe-rtt", "probe-cwnd", "probe-retransmits"} <= set(ids)
    drawn = page.evaluate(
        "() => Chart.getChart(document.getElementById('probe-goodput')).data.datasets[0].data"
        ".map(p => [p.x, p.y])")
    assert drawn == [[pytest.approx((k + 1) * interval), pytest.approx(v)]
                     for k, v in enumerate(goodput)]
    doc = json.loads(IPERF3_DOC.read_text())
    rtt = page.evaluate(
        "() => Chart.getChart(document.getElementById('probe-rtt')).data.datasets[0].data.length")
    assert rtt == len(doc["intervals"])
    scales = page.evaluate(
        "() => Chart.getChart(document.getElementById('probe-cwnd')).options.scales.y.title.text")
    assert scales == figures.PROBE_CWND.y.label
    page.screenshot(path=str(live.shots / "probe.png"), full_page=True)
    assert tab.errors == [], tab.errors
    for bad in ("0", "x", "99999999"):
        assert page.goto(live.url(f"/dashboard/measurements/{bad}")).status == 404


def test_the_impact_figure_has_one_bar_per_factor_with_its_interval(live, tab):
    s = live.seeded
    page = tab.page
    page.goto(live.url(f"/dashboard/topologies/{s.topology_id}/impact"))
    page.wait_for_selector("#omega-chart[data-rendered=yes]")
    drawn = page.evaluate(
        "() => Chart.getChart(document.getElementById('omega-chart')).data.datasets"
        ".map(d => [d.label, d.bars.map(b => b && [b.subflow, b.omega, b.low, b.high,"
        " b.in_subset])])")
    with live.session_factory() as session:
        intervals = results.omega_intervals(session, campaign_id=s.campaign_id)
    assert [cc for cc, _ in drawn] == list(CCS)
    bars = 0
    for cc, per in drawn:
        for bar in per:
            if bar is None:
                continue
            subflow, omega, low, high, member = bar
            assert omega == pytest.approx(s.omegas[(subflow, cc)])
            assert (low, high) == (intervals[cc][subflow]["low"], intervals[cc][subflow]["high"])
            assert member == (subflow in TABLE3["SRL-HU"][cc])
            bars += 1
    assert bars == len(s.omegas) == 48
    # drawn as bars over the subflows (a category axis), each bar a rectangle of its own
    shape = page.evaluate(
        "() => { const c = Chart.getChart(document.getElementById('omega-chart'));"
        " return [c.scales.x.type, c.scales.x.getLabels(),"
        " c.data.datasets.map((d, i) => c.getDatasetMeta(i).data.filter(b => b.height > 0"
        " || b.height < 0).length)]; }")
    assert shape[0] == "category" and sorted(shape[1]) == sorted(SRL_HU_SUBFLOWS)
    assert sum(shape[2]) == 48
    share, _ = _non_background_share(page.locator("#omega-chart").screenshot())
    assert share > 0.03
    page.locator("#omega-figure").screenshot(path=str(live.shots / "impact-figure.png"))
    assert tab.errors == [], tab.errors


def test_the_fits_buffer_axis_is_logarithmic_as_in_the_report(live, tab):
    s = live.seeded
    page = tab.page
    page.goto(live.url(f"/dashboard/topologies/{s.topology_id}/fits"))
    page.wait_for_selector("canvas.fit-chart[data-rendered=yes]")
    axes = page.evaluate(
        "() => [...document.querySelectorAll('canvas.fit-chart')].map(c => {"
        " const x = Chart.getChart(c).scales.x; return [x.type, x.options.title.text]; })")
    assert axes and all(a == ["logarithmic", figures.FITS.x.label] for a in axes)
    assert tab.errors == [], tab.errors

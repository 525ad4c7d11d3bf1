"""An answer on a path that moves over time says so on its page, under its lead sentence, with
the figures its promise carries; an answer on a steady path shows nothing of it."""

from __future__ import annotations

from datetime import UTC, datetime
from types import SimpleNamespace

from api.dashboard.routes import env
from api.schemas import RecommendationOut

VARIATION = {"varies": True, "runs": 4, "span_s": 72.0, "p10_mbps": 4.6, "p90_mbps": 12.4,
             "spread_mbps": 7.8, "run_low_mbps": 5.1, "run_high_mbps": 11.2,
             "between_rel_sd": 0.3, "between_dof": 25, "expected_rel_sd": 0.05}


def _render(variation: dict) -> str:
    row = SimpleNamespace(
        id=1, kind="calibrated", delta=0.07, opm="FullMesh", occ="bbr", obs_mib=0.5,
        otp_mbps=8.1, quality_flags=["adaptive:settled"], created_at=datetime.now(UTC),
        traditional={"available": False, "subflows": []}, inputs={}, topology_id=1,
        campaign_id=1, bs_min_mib=0.1, bs_max_mib=1.0, provenance={},
        outputs={"promise": {"statement": "Expect 3.00-12.5 Mbit/s (90 %).", "low_mbps": 3.0,
                             "high_mbps": 12.5, "of": "one fresh probe", "confidence": 0.9,
                             "variation": variation}})
    rec = RecommendationOut.of(row)  # the page shows the answer as the API sends it
    return str(env.get_template("_macros.html").make_module().rec_summary(rec, "/dashboard"))


def test_a_varying_path_is_said_with_its_figures():
    html = _render(VARIATION)
    assert 'data-role="path-varies"' in html
    assert "4.60–12.40 Mbit/s" in html and "5.10–11.20 Mbit/s" in html and "72 s" in html


def test_a_steady_path_shows_nothing_of_it():
    assert 'data-role="path-varies"' not in _render({**VARIATION, "varies": False})

"""The measured selection's path as the dashboard renders it: a subset measured once has no
interval (not "0.00 – ∞"), and the table scrolls inside its card rather than spilling out of
it (seen in Chromium on a demo's answer: the gain and settled columns stood outside the card)."""

from __future__ import annotations

from api.dashboard.routes import env


def _render(path: list[dict]) -> str:
    macros = env.get_template("_macros.html").make_module()
    return str(macros.selection_path(path))


def test_one_run_says_so_and_two_runs_show_their_interval():
    html = _render([
        {"decision": "start", "label": "U-U alone",
         "estimate": {"mean_mbps": 18.81, "low_mbps": 0.0, "high_mbps": None}},
        {"decision": "stop", "subflow": "U-B", "label": "U-U alone", "rival": ["U-B", "U-U"],
         "estimate": {"mean_mbps": 18.79, "low_mbps": 18.70, "high_mbps": 18.88},
         "gain": {"fraction": 0.003, "low": -1.0, "high": None}, "settled": False},
    ])
    assert "∞" not in html and "-100.0" not in html
    assert ">one run<" in html and ">(one run)<" in html  # the start's interval, the gain
    assert "18.70 – 18.88" in html
    assert html.lstrip().startswith('<div class="table-wrap">')

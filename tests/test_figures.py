"""The dashboard and the report draw the same figures on the same axes (`flows.takeaways.figures`):
each figure built by both stacks from the same input, its axes compared with the one definition."""

from __future__ import annotations

import itertools
import json
import math
import re
from pathlib import Path
from types import SimpleNamespace

import matplotlib.pyplot as plt
import pytest

from api.dashboard import queries
from service.flows.answers.campaign_answer import SolvedCampaign
from service.flows.takeaways import figures, probe_series, report

ROOT = Path(__file__).resolve().parents[1]
DASHBOARD_JS = (ROOT / "api/dashboard/static/dashboard.js").read_text()
IPERF3_DOC = ROOT / "tests/data/iperf3-client-intervals.json"  # a real `iperf3 -J` sender run


class Line:
    """A fitted curve as the solver hands it over: tp(bs) per arm."""

    kind = "paper"

    def __init__(self, pm: str, cc: str) -> None:
        self.pm, self.cc = pm, cc

    def tp(self, bs: float) -> float:
        return 100 + 10 * bs


def _fits_both(lo: float = 0.5, hi: float = 30.0):
    curve = Line("PCDC", "cubic")
    solved = SolvedCampaign(campaign=None, fits=[], curves=[curve], lo=lo, hi=hi, solution=None)
    rec = SimpleNamespace(id=7, pm="PCDC", curve_p_values={})
    chart = queries._fit_chart(rec, solved, [])
    data = SimpleNamespace(title="t", solved=solved, answer=None, fitted=[curve],
                           points={("PCDC", "cubic"): [(lo, 105.0), (hi, 400.0)]})
    return chart, report._fits_page(data)


def test_the_fits_buffer_axis_is_logarithmic_on_both_the_dashboard_and_the_report():
    assert figures.FITS.x.scale == "log"
    chart, fig = _fits_both()
    try:
        assert chart["axes"] == figures.FITS.as_json()
        ax = fig.axes[0]
        assert ax.get_xscale() == figures.FITS.x.scale
        assert ax.get_yscale() == figures.FITS.y.scale
        assert ax.get_xlabel() == figures.FITS.x.label
        assert ax.get_ylabel() == figures.FITS.y.label
    finally:
        plt.close(fig)
    # the curve is sampled evenly on that log axis, from the range's ends
    xs = [p[0] for p in chart["series"][0]["curve"]]
    assert len(xs) == queries.CURVE_POINTS + 1
    assert xs[0] == pytest.approx(0.5) and xs[-1] == pytest.approx(30.0)
    ratios = {round(b / a, 9) for a, b in itertools.pairwise(xs)}
    assert len(ratios) == 1
    # and the browser maps the definition's scale onto Chart.js's own, for the Fits chart's axes
    assert re.search(r'axis\.scale === "log" \? "logarithmic"', DASHBOARD_JS)
    assert "axisOptions(data.axes.x, {min: lo, max: hi})" in DASHBOARD_JS


OMEGAS = {  # cc -> subflow -> (omega, low, high, in SP*), one of them far below -2 (symlog)
    "cubic": {"A-A": (0.4, 0.3, 0.5, True), "A-B": (-12.0, -15.0, -9.0, False)},
    "bbr": {"A-A": (0.2, None, None, True), "B-B": (0.1, 0.05, 0.15, True)},
}


@pytest.mark.parametrize(("omegas", "scale"), [(OMEGAS, "symlog"),
                                           ({"cubic": {"A-A": (0.4, 0.3, 0.5, True)}}, "linear")])
def test_omega_bars_and_their_intervals_are_one_figure_for_both(omegas, scale):
    subflows = ["A-A", "A-B"]  # B-B: since removed from the topology, still drawn
    chart = queries.omega_chart(omegas, subflows)
    bars = [(cc, sf) for cc, per in omegas.items() for sf in per]
    assert sorted((b["cc"], b["subflow"]) for b in chart["bars"]) == sorted(bars)
    for b in chart["bars"]:
        omega, low, high, member = omegas[b["cc"]][b["subflow"]]
        assert (b["omega"], b["low"], b["high"], b["in_subset"]) == (omega, low, high, member)
    assert chart["axes"]["y"]["scale"] == scale
    data = SimpleNamespace(title="t", omegas=omegas, subflows=subflows)
    fig = report._omega_page(data)
    try:
        ax = fig.axes[0]
        assert ax.get_yscale() == scale
        assert ax.get_ylabel() == chart["axes"]["y"]["label"]
        assert ax.get_xlabel() == chart["axes"]["x"]["label"]
        assert [t.get_text() for t in ax.get_xticklabels()] == chart["subflows"]
        assert len(ax.patches) == len(bars)  # one bar per (CC, subflow)
        with_interval = sum(1 for _, lo, hi, _ in
                            (v for per in omegas.values() for v in per.values())
                            if lo is not None and hi is not None)
        assert len(ax.containers) - len(bars) == with_interval  # bars + their errorbars
    finally:
        plt.close(fig)


def test_a_probes_iperf3_intervals_give_rtt_cwnd_and_retransmits_over_time():
    text = IPERF3_DOC.read_text()
    doc = json.loads(text)
    charts = {c["id"]: c for c in probe_series.iperf3_charts(text)}
    assert set(charts) == {"probe-rtt", "probe-cwnd", "probe-retransmits"}
    first = doc["intervals"][0]["streams"][0]
    rtt = charts["probe-rtt"]["series"][0]
    assert rtt["label"] == f"stream {first['socket']}"
    assert len(rtt["points"]) == len(doc["intervals"])
    assert rtt["points"][0] == [first["end"], pytest.approx(first["rtt"] / 1000)]
    cwnd = charts["probe-cwnd"]["series"][0]["points"][0][1]
    assert cwnd == pytest.approx(first["snd_cwnd"] / 1024)
    assert charts["probe-retransmits"]["axes"] == figures.PROBE_RETRANSMITS.as_json()
    # another tool's output, a truncated file: no figure, no error
    assert probe_series.iperf3_charts(text[: len(text) // 2]) == []
    assert probe_series.iperf3_charts(b"\xff\xfe") == []
    assert probe_series.iperf3_charts("[1, 2]") == []


def test_a_probes_goodput_series_and_subflow_bytes():
    chart = probe_series.goodput_chart([10.0, math.nan, 30.0], 0.5, 1.0)
    assert chart["series"][0]["points"] == [[0.5, 10.0], [1.5, 30.0]]
    assert chart["axes"] == figures.PROBE_GOODPUT.as_json()
    bars = probe_series.subflow_bytes_chart({"B-B": 2 * 1024 * 1024, "A-A": 1024 * 1024})
    assert bars["labels"] == ["A-A", "B-B"] and bars["values"] == [1.0, 2.0]
    assert probe_series.goodput_chart([], 1.0, 0.0) is None
    assert probe_series.subflow_bytes_chart({}) is None


def test_an_axis_scale_is_one_both_stacks_know():
    with pytest.raises(ValueError):
        figures.Axis("x", "logit")
    assert figures.fit_curve_xs(0.0, 1.0, 10) == [0.0, 1.0]  # no log of zero

"""f1 topology, f3/f4 impact factors from series, and Eq. 1."""

import pytest
from pydantic import ValidationError

from service.algorithm.impact import impact_factor, impact_from_series, pcdc_subset
from service.algorithm.topology import ISP, Site, Topology
from service.algorithm.traditional import rto_from_rtt, traditional_buffer

from .paper_data import TABLE5
from .test_paper_tables import topology


def test_impact_factor_is_eq5():
    tp0 = [10.0, 10.0, 10.0]
    assert impact_factor(tp0, [8.0, 8.0, 8.0]) == pytest.approx(0.2)
    assert impact_factor(tp0, [12.0, 12.0, 12.0]) == pytest.approx(-0.2)


def test_series_into_omegas_and_subset_with_standby_order():
    result = impact_from_series(
        "cubic", [10, 10, 10], {"A-X": [6, 6, 6], "B-X": [11, 11, 11], "C-X": [10.5, 10.5, 10.5]}
    )
    assert result.omegas["A-X"] == pytest.approx(0.4)
    assert result.subset == ["A-X"]
    assert result.standby == ["C-X", "B-X"]  # best Omega first takes over
    assert not result.same_as_fullmesh


def test_subset_never_empty():
    assert pcdc_subset({"A-X": -0.5, "B-X": -0.1}) == ["B-X"]


@pytest.mark.parametrize(
    ("tp0", "tpi", "message"),
    [([], [1.0], "empty"), ([0.0, 0.0], [1.0], "no throughput"), ([1.0], [float("nan")], "tpi")],
)
def test_impact_bad_series(tp0, tpi, message):
    with pytest.raises(ValueError, match=message):
        impact_factor(tp0, tpi)


def test_topology_bandwidths_and_homogeneity():
    srl_hu = topology("SRL-HU")
    bw = {sf.name: sf.bandwidth_kbps for sf in srl_hu.subflows()}
    assert bw["K-C"] == 100_000 and bw["P-CU"] == 256  # min(local up, remote down)
    assert not srl_hu.is_homogeneous()
    assert topology("UiT-HAW").is_homogeneous()


@pytest.mark.parametrize(
    ("site", "field"),
    [
        ({"name": "S", "isps": []}, "isps"),
        ({"name": "S", "isps": [{"name": "A", "label": "A", "down_kbps": 1, "up_kbps": 0}]},
         "up_kbps"),
        ({"name": "S", "isps": [{"name": "A", "label": "A", "down_kbps": 1, "up_kbps": 1},
                                {"name": "B", "label": "A", "down_kbps": 1, "up_kbps": 1}]},
         "duplicate ISP label"),
        ({"name": "rm -rf", "isps": [{"name": "A", "label": "A", "down_kbps": 1, "up_kbps": 1}]},
         "name"),
        ({"name": "S", "isps": [{"name": "A", "label": "A", "down_kbps": 1, "up_kbps": 1,
                                 "rtt": 3}]}, "rtt"),
    ],
)
def test_topology_errors_name_the_field(site, field):
    with pytest.raises(ValidationError, match=field):
        Site.model_validate(site)


def test_topology_needs_two_sites():
    site = Site(name="S", isps=[ISP(name="A", label="A", down_kbps=1, up_kbps=1)])
    with pytest.raises(ValidationError, match="both"):
        Topology(local=site, remote=site)


def test_eq1_traditional_buffer_and_ratios():
    # 1 Mbit/s for (3 * 0.1 + 1) s = 1.3 Mbit = 0.155 MiB
    b = traditional_buffer([0.1, 0.05], [1.0], [600, 400])
    assert b.buffer_mib == pytest.approx(1.3e6 / 8 / 2**20)
    assert b.fallback_mib == pytest.approx(b.buffer_mib / 2)
    # The paper's Table 5 ratios OBS / B.
    for _, _, obs, _, paper_b, ratio in TABLE5.values():
        assert obs / paper_b == pytest.approx(ratio, abs=5e-5)
    assert rto_from_rtt(0.02) == 1.0  # RFC 6298's 1 s floor: the paper's UNIS-HiN RTO
    with pytest.raises(ValueError, match="rtt_s"):
        traditional_buffer([], [1.0], [1.0])

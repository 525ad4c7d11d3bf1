"""The accuracy benchmark's baseline settings and applied figures (benchmarks/applied.py): stock
buffers read from the host or Debian's, the kernel's default CC, `applied_ratio` and
`applied_inside` against the interval of the regime the apply serves, what a rollback left."""

from __future__ import annotations

import pytest

from benchmarks import applied as ap

HOST = {"net.ipv4.tcp_rmem": "4096\t131072\t33554432", "net.ipv4.tcp_wmem": "4096\t16384\t4194304"}


def test_the_hosts_buffers_are_read_and_normalised():
    got = ap.stock_buffers("host", HOST.get)
    assert got == {"source": "host", "fallback": [], "values": {
        "net.ipv4.tcp_rmem": "4096 131072 33554432", "net.ipv4.tcp_wmem": "4096 16384 4194304"}}


def test_debians_buffers_ignore_the_host():
    got = ap.stock_buffers("debian", lambda key: pytest.fail(f"read {key}"))
    assert got["values"] == {"net.ipv4.tcp_rmem": "4096 131072 6291456",
                             "net.ipv4.tcp_wmem": "4096 16384 4194304"}
    assert got["source"] == "debian" and got["fallback"] == []


@pytest.mark.parametrize("bad", [None, "", "4096 131072", "a b c", "4096 131072 1024",
                                 "0 16384 4194304", "4096 16384 4194304 1"])
def test_a_host_value_that_is_no_triple_falls_back_to_debians_and_says_so(bad):
    got = ap.stock_buffers("host", {**HOST, "net.ipv4.tcp_rmem": bad}.get)
    assert got["values"]["net.ipv4.tcp_rmem"] == "4096 131072 6291456"
    assert got["values"]["net.ipv4.tcp_wmem"] == "4096 16384 4194304"  # read from the host
    assert len(got["fallback"]) == 1 and got["fallback"][0].startswith("net.ipv4.tcp_rmem: ")


def test_an_unknown_buffer_source_is_refused():
    with pytest.raises(ValueError, match="'stock' is not one of host, debian"):
        ap.stock_buffers("stock", HOST.get)


def test_parse_triple_says_what_is_wrong():
    assert ap.parse_triple("k", " 1  2\t3 ") == "1 2 3"
    with pytest.raises(ValueError, match="not three integers"):
        ap.parse_triple("k", "1 2")
    with pytest.raises(ValueError, match="min <= default <= max"):
        ap.parse_triple("k", "3 2 1")


def test_the_default_cc_is_the_namespaces_else_the_hosts():
    assert ap.default_cc("bbr\n", "cubic") == "bbr"
    assert ap.default_cc(None, "cubic") == "cubic"
    assert ap.default_cc("", "reno") == "reno"
    with pytest.raises(ValueError, match="no default congestion control"):
        ap.default_cc(None, "no such; cc")


def test_the_autotune_interval_is_the_regimes_when_the_answer_has_one():
    outputs = {"autotune_interval_mbps": [4.0, 6.0],
               "promise": {"low_mbps": 5.5, "high_mbps": 7.0}}
    assert ap.regime_interval(outputs) == ("autotune", [4.0, 6.0])
    # an answer with no autotune phase: the locked-buffer probes' interval
    assert ap.regime_interval({"promise": {"low_mbps": 5.5, "high_mbps": 7.0}}) == (
        "locked_buffer", [5.5, 7.0])
    assert ap.regime_interval({"autotune_interval_mbps": [6.0, 4.0],
                               "otp_interval_mbps": [1, 2]}) == ("locked_buffer", [1.0, 2.0])
    assert ap.regime_interval({}) == (None, None)


def test_applied_inside_counts_the_probes_in_the_interval_ends_included():
    assert ap.inside_fraction([4.0, 5.0, 6.0, 6.5], [4.0, 6.0]) == 0.75
    assert ap.inside_fraction([1.0, 2.0, 3.0], [1.5, 2.5]) == 0.333
    assert ap.inside_fraction([5.0], None) is None
    assert ap.inside_fraction([], [1.0, 2.0]) is None


def test_applied_ratio_is_the_quotient_of_the_fresh_means():
    assert ap.applied_ratio([9.0, 11.0], [10.0, 10.0, 10.0]) == 1.0
    assert ap.applied_ratio([4.65], [5.0, 5.0]) == 0.93
    assert ap.applied_ratio([], [5.0]) is None
    assert ap.applied_ratio([5.0], []) is None
    assert ap.applied_ratio([5.0], [0.0]) is None


def test_applied_figures_name_the_fields_the_benchmark_prints():
    got = ap.applied_figures({"applied_runs": [4.5, 5.5, 7.0]}, [5.0, 6.0],
                             {"autotune_interval_mbps": [4.0, 6.0]})
    assert got == {"applied_ratio": round(17 / 3 / 5.5, 4), "applied_inside": 0.667,
                   "applied_interval_mbps": [4.0, 6.0], "applied_interval_regime": "autotune",
                   "applied_measured_mbps": round(17 / 3, 3)}
    none = ap.applied_figures({"applied_runs": []}, [5.0], {})
    assert none["applied_ratio"] is None and none["applied_inside"] is None


def test_what_a_rollback_left_different_is_named():
    before = {"A": {"endpoints": [{"id": 1}], "limits": {"subflows": 8},
                    "sysctls": {"net.ipv4.tcp_congestion_control": "bbr", "x": "1"},
                    "available_ccs": ["reno"]}}
    same = {"A": {**before["A"], "available_ccs": ["reno", "bpf_x"]}}  # the host's list
    assert ap.state_differences(before, same) == []
    moved = {"A": {**before["A"], "limits": {"subflows": 2},
                   "sysctls": {"net.ipv4.tcp_congestion_control": "reno", "x": "1"}}}
    assert ap.state_differences(before, moved) == [
        'A limits: {"subflows": 8} -> {"subflows": 2}',
        "A net.ipv4.tcp_congestion_control: 'bbr' -> 'reno'"]


def test_n_times_linux_default():
    assert ap.over(12.0, 4.0) == 3.0
    assert ap.over(None, 4.0) is None and ap.over(5.0, 0.0) is None and ap.over(5.0, None) is None

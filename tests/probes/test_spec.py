"""Topology file validation: every bad input is refused with a message naming the field."""

from __future__ import annotations

import json

import pytest
import yaml

from probes.testbed.spec import SpecError, load_spec, parse_spec, scenario_path


def base() -> dict:
    return {
        "name": "tb1",
        "sites": [
            {"name": "A", "isps": [{"name": "Uninett", "label": "U", "down_kbps": 20000,
                                    "up_kbps": 20000}]},
            {"name": "B", "isps": [{"name": "DFN", "label": "D", "down_kbps": 20000,
                                    "up_kbps": 10000}]},
        ],
        "defaults": {"delay_ms": 10},
    }


def refused(data: dict, *needles: str) -> str:
    with pytest.raises(SpecError) as exc:
        parse_spec(data)
    msg = str(exc.value)
    for n in needles:
        assert n in msg, msg
    return msg


def test_valid_file_roundtrip(tmp_path):
    p = tmp_path / "t.yaml"
    p.write_text(yaml.safe_dump(base()))
    spec = load_spec(p)
    assert spec.subflow_names("A", "B") == ["U-D"]
    assert spec.path("U", "D").delay_ms == 10
    j = tmp_path / "t.json"
    j.write_text(json.dumps(base()))
    assert load_spec(j) == spec


def test_unknown_key_top_and_nested():
    d = base()
    d["colour"] = "red"
    refused(d, "colour", "unknown key")
    d = base()
    d["sites"][0]["isps"][0]["speed"] = 1
    refused(d, "sites.0.isps.0.speed", "unknown key")


@pytest.mark.parametrize("value", [0, -5, float("nan")])
def test_zero_negative_rates(value):
    d = base()
    d["sites"][1]["isps"][0]["down_kbps"] = value
    refused(d, "sites.1.isps.0.down_kbps")


def test_delay_over_10_s():
    d = base()
    d["paths"] = {"U-D": {"delay_ms": 10001}}
    refused(d, "paths.U-D.delay_ms")
    d = base()
    d["defaults"] = {"delay_ms": 20000}
    refused(d, "defaults.delay_ms")


@pytest.mark.parametrize("loss", [-0.1, 100, 150])
def test_loss_outside_range(loss):
    d = base()
    d["paths"] = {"U-D": {"loss_pct": loss}}
    refused(d, "paths.U-D.loss_pct")


def test_more_than_16_isps():
    d = base()
    d["sites"][0]["isps"] = [
        {"name": f"I{i}", "label": f"L{i}", "down_kbps": 1000, "up_kbps": 1000} for i in range(17)
    ]
    refused(d, "sites.0.isps")


@pytest.mark.parametrize(
    ("where", "value"),
    [("name", "bad name"), ("name", "x;rm -rf /"), ("site", "1abc"), ("label", "U-2"),
     ("label", "TOOLONGLABEL"), ("isp", "$(reboot)")],
)
def test_names_must_be_identifiers(where, value):
    d = base()
    field = {"name": "name", "site": "sites.0.name", "label": "sites.0.isps.0.label",
             "isp": "sites.0.isps.0.name"}[where]
    if where == "name":
        d["name"] = value
    elif where == "site":
        d["sites"][0]["name"] = value
    elif where == "label":
        d["sites"][0]["isps"][0]["label"] = value
    else:
        d["sites"][0]["isps"][0]["name"] = value
    refused(d, field)


def test_path_key_must_name_a_subflow():
    d = base()
    d["paths"] = {"U-X": {"delay_ms": 5}}
    refused(d, "paths.U-X")


def test_jitter_not_above_delay_and_same_site_names():
    d = base()
    d["paths"] = {"U-D": {"delay_ms": 5, "jitter_ms": 6}}
    refused(d, "paths.U-D.jitter_ms")
    d = base()
    d["sites"][1]["name"] = "A"
    refused(d, "sites")


def test_bad_yaml_and_top_level(tmp_path):
    p = tmp_path / "x.yaml"
    p.write_text("name: [unclosed")
    with pytest.raises(SpecError, match="not valid"):
        load_spec(p)
    with pytest.raises(SpecError, match="mapping"):
        parse_spec(["a"])


@pytest.mark.parametrize(
    ("scenario", "subflows", "capacity"),
    [("srl-hu", 8, 24000.0), ("unis-hin", 6, 22000.0), ("uit-haw", 2, 896.0)],
)
def test_paper_scenarios(scenario, subflows, capacity):
    spec = load_spec(scenario_path(scenario))
    a, b = spec.sites
    assert len(spec.subflow_names(a.name, b.name)) == subflows
    assert spec.capacity_kbps(a.name, b.name) == pytest.approx(capacity)
    # every path has a documented delay
    assert all(p.delay_ms > 0 for p in spec.resolved_paths())


def test_min_cut_capacity():
    d = base()
    d["sites"][0]["isps"].append({"name": "T", "label": "T", "down_kbps": 5000, "up_kbps": 5000})
    d["sites"][1]["isps"].append({"name": "O", "label": "O", "down_kbps": 3000, "up_kbps": 3000})
    spec = parse_spec(d)
    # up U 20 + T 5 = 25; down D 10(up of B irrelevant) -> D down 20 + O down 3 = 23
    assert spec.capacity_kbps("A", "B") == pytest.approx(23000)
    assert spec.capacity_kbps("A", "B", ["T-D", "T-O"]) == pytest.approx(5000)
    assert spec.capacity_kbps("A", "B", ["U-O", "T-O"]) == pytest.approx(3000)


def test_queue_is_a_stated_parameter():
    from probes.testbed.queues import FRAME_BYTES, queue_table

    d = base()
    d["queue_ms"], d["queue_packets"] = 50, 10
    refused(d, "queue_ms", "not both")
    d = base()
    d["sites"][0]["isps"][0]["queue_packets"] = 0
    refused(d, "sites.0.isps.0.queue_packets")
    d = base()
    d["queue_ms"] = 40
    d["sites"][1]["isps"][0]["queue_packets"] = 5
    rows = {(r["site"], r["direction"]): r for r in queue_table(parse_spec(d))}
    # testbed-wide 40 ms at 20 Mbit/s; the ISP's own 5 packets win over it
    assert rows[("A", "up")]["bytes"] == 100_000 and rows[("A", "up")]["source"] == "testbed"
    assert rows[("B", "up")]["bytes"] == 5 * FRAME_BYTES and rows[("B", "up")]["source"] == "isp"
    assert rows[("B", "up")]["ms"] == pytest.approx(5 * FRAME_BYTES * 8 / 10_000, abs=0.1)


def test_default_queue_no_longer_seconds_on_a_thin_uplink():
    from probes.testbed.queues import MIN_PACKETS, queue_table

    rows = queue_table(load_spec(scenario_path("srl-hu")))
    assert all(r["source"] == "default" for r in rows)
    assert all(r["packets"] >= MIN_PACKETS for r in rows)
    # every queue is at most 500 ms, or the 2-frame floor where that is less than 2 frames
    assert all(r["ms"] <= 500.0 or r["packets"] == MIN_PACKETS for r in rows), rows
    thinnest = min(rows, key=lambda r: r["rate_kbps"])
    assert thinnest["ms"] < 3800 / 2, thinnest  # the 16-frame floor made it 3.8 s

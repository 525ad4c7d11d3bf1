"""MPCOA_PROBE_PORTS: the range every port a probe listens on comes from, read as the setting
is now; a bad value is one line naming the variable."""

from __future__ import annotations

import random

import pytest

import service.settings  # noqa: F401 - installs the probes' settings reader (as every entry point)
from probes.tools.ports import (
    DEFAULT_PROBE_PORTS,
    MIN_PROBE_PORTS,
    PORT_HIGH,
    PORT_LOW,
    choose_port_triple,
    parse_port_range,
    probe_port_range,
)


def test_the_default_is_the_ports_the_triples_always_used():
    assert parse_port_range(DEFAULT_PROBE_PORTS) == (20000, 31999)
    assert (PORT_LOW, PORT_HIGH) == (20001, 31998)  # P's bounds: P-1 and P+1 stay inside


@pytest.mark.parametrize(("text", "expected"), [
    ("20000-31999", (20000, 31999)), (" 30000 - 30015 ", (30000, 30015)),
    ("1024-1039", (1024, 1039)), ("65520-65535", (65520, 65535)),
])
def test_ranges_that_parse(text, expected):
    assert parse_port_range(text) == expected


@pytest.mark.parametrize(("text", "message"), [
    ("", "not a port range"), ("20000", "not a port range"), ("20000:30000", "not a port range"),
    ("a-b", "not a port range"), ("-5-100", "not a port range"), ("20000-30000-1", "not a port"),
    ("123456-123470", "not a port range"), ("30000-20000", "LOW <= HIGH"),
    ("80-2000", "1024 <= LOW"), ("65530-65540", "<= 65535"), ("30000-30014", "fewer than"),
    ("30000-30000", "fewer than"), ("2" * 400, "not a port range"),
])
def test_bad_ranges_are_one_line(text, message):
    with pytest.raises(ValueError, match=message) as caught:
        parse_port_range(text)
    assert "\n" not in str(caught.value) and len(str(caught.value)) < 200


def test_the_setting_is_read_at_each_use(monkeypatch):
    monkeypatch.delenv("MPCOA_PROBE_PORTS", raising=False)
    monkeypatch.setenv("MPCOA_ENV_FILE", "/nonexistent/.env")  # the checkout's .env is not ours
    assert probe_port_range() == (20000, 31999)
    monkeypatch.setenv("MPCOA_PROBE_PORTS", "40000-40015")
    assert probe_port_range() == (40000, 40015)
    rng = random.Random(3)
    for _ in range(50):  # the whole triple inside the range
        p = choose_port_triple([None], rng)
        assert p - 1 >= 40000 and p + 1 <= 40015
    monkeypatch.setenv("MPCOA_PROBE_PORTS", "")  # empty: the default, as .env.example's others
    assert probe_port_range() == (20000, 31999)


def test_a_bad_setting_names_its_variable_before_anything_runs(monkeypatch):
    monkeypatch.setenv("MPCOA_ENV_FILE", "/nonexistent/.env")
    monkeypatch.setenv("MPCOA_PROBE_PORTS", "30000-30003")
    with pytest.raises(ValueError, match=r"^MPCOA_PROBE_PORTS: .*fewer than "
                       rf"the {MIN_PROBE_PORTS}"):
        choose_port_triple(["mpcoa-no-such-namespace"])

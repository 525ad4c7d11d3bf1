"""Live testbed fixtures: real namespaces, real kernel MPTCP, torn down even when a test fails."""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator

import pytest

from probes.netns import list_netns, pid_alive
from probes.testbed import lifecycle as tbmod
from probes.testbed.spec import TestbedSpec, parse_spec


def unique_name(tag: str) -> str:
    return f"{tag}{os.getpid() % 10000}{secrets.token_hex(2)}"  # <= 16 chars, no collisions


def small_spec(name: str, **over) -> TestbedSpec:
    data = {
        "name": name,
        "sites": [
            {"name": "A", "isps": [
                {"name": "Uninett", "label": "U", "down_kbps": 12000, "up_kbps": 12000},
                {"name": "Telenor", "label": "T", "down_kbps": 6000, "up_kbps": 6000,
                 "queue_packets": 16}]},
            {"name": "B", "isps": [
                {"name": "DFN", "label": "D", "down_kbps": 12000, "up_kbps": 12000},
                {"name": "Other", "label": "O", "down_kbps": 6000, "up_kbps": 6000,
                 "queue_packets": 16}]},
        ],
        "defaults": {"delay_ms": 10},
    }
    data.update(over)
    return parse_spec(data)


def assert_nothing_left(name: str, pid: int | None = None) -> None:
    left = [n for n in list_netns() if n.startswith(f"mpcoa-{name}-")]
    assert left == [], f"namespaces left behind: {left}"
    if pid is not None:
        assert not pid_alive(pid), f"delay line {pid} left running"
    assert not (tbmod.state_root() / name).exists()


@pytest.fixture(scope="module")
def testbed2x2() -> Iterator[tbmod.Testbed]:
    name = unique_name("t")
    bed = None
    try:
        bed = tbmod.up(small_spec(name))
        yield bed
    finally:
        st = tbmod.testbed_status(name)
        tbmod.down(name)
        assert_nothing_left(name, st.get("delayline_pid"))

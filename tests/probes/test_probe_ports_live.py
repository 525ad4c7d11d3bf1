"""MPCOA_PROBE_PORTS on real probes: while an iperf3 probe and a paced probe run on the emulated
testbed with a narrow range, every socket listening in the sites' namespaces is inside it
(read with `ss -l` as they run; needs root: marker netns)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

import service.settings  # noqa: F401 - installs the probes' settings reader (as every entry point)
from probes.base import MeasurementRequest, TrafficProfile
from probes.netns import run_ns
from probes.testbed import lifecycle as tbmod
from probes.tools.ports import ports_in
from tests.probes.conftest import assert_nothing_left, small_spec, unique_name

pytestmark = pytest.mark.netns

LOW, HIGH = 27100, 27115  # the fewest ports a range may have
LISTENING = (["-ltunH"], ["-lMnH"])  # TCP and UDP, then MPTCP listeners


@pytest.fixture(scope="module")
def bed() -> Iterator[tbmod.Testbed]:
    name = unique_name("pp")
    try:
        yield tbmod.up(small_spec(name))
    finally:
        st = tbmod.testbed_status(name)
        tbmod.down(name)
        assert_nothing_left(name, st.get("delayline_pid"))


def listening(bed: tbmod.Testbed) -> set[int]:
    return ports_in(run_ns(bed.ns(site), ["ss", *args], check=False).stdout
                    for site in ("A", "B") for args in LISTENING)


def watch_while(bed: tbmod.Testbed, probe) -> tuple[set[int], object]:
    """The ports that listened in either site's namespace while `probe()` ran, and its result."""
    seen: set[int] = set()
    done = threading.Event()
    out: dict = {}

    def run() -> None:
        try:
            out["result"] = probe()
        except BaseException as exc:  # handed to the test below
            out["error"] = exc
        finally:
            done.set()

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    while not done.is_set():
        seen |= listening(bed)
        time.sleep(0.05)
    worker.join()
    if "error" in out:
        raise out["error"]
    return seen, out["result"]


@pytest.mark.parametrize("tool", ["iperf3", "paced"])
def test_no_probe_listens_outside_the_range(bed, tool, monkeypatch):
    monkeypatch.setenv("MPCOA_PROBE_PORTS", f"{LOW}-{HIGH}")
    before = listening(bed)
    assert not [p for p in before if LOW <= p <= HIGH], before
    request = MeasurementRequest(
        sender="A", receiver="B", cc="cubic", duration_s=3, warmup_s=1,
        allowed_subflows=["U-D"], path_manager="PCDC",
        **({"profile": TrafficProfile.paced(50, 1200)} if tool == "paced" else {}))
    seen, result = watch_while(bed, lambda: bed.measure(request, backend=tool))
    assert result.failure_reason() is None, result.failure_reason()
    new = seen - before
    assert new, f"{tool}: no listener seen while the probe ran"
    outside = sorted(p for p in new if not LOW <= p <= HIGH)
    assert outside == [], f"{tool} listened outside {LOW}-{HIGH}: {outside}"

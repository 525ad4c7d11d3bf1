"""The accuracy benchmark on scenarios with field conditions (benchmarks/accuracy.py): what ran
is named, probes wait a random part of the shortest schedule period, quiet scenarios wait none."""

from __future__ import annotations

import time
from argparse import Namespace

from benchmarks.accuracy import PhasedBed, field_conditions, phase_jitter_s
from probes.testbed.spec import load_spec, scenario_path


def _args(**over) -> Namespace:
    return Namespace(**{"oracle_duration": 6.0, "phase_jitter": None, **over})


def test_field_conditions_are_named_and_quiet_scenarios_have_none():
    assert field_conditions(load_spec(scenario_path("uit-haw"))) == []
    shared = field_conditions(load_spec(scenario_path("field-shared")))
    assert len(shared) == 2 and all("cross" in c and '"bulk"' in c for c in shared)
    lte = field_conditions(load_spec(scenario_path("field-lte")))
    assert any("schedule every 40 s" in c for c in lte)
    assert field_conditions(load_spec(scenario_path("field-lossy"))) == [
        "R-B loss 1 % in bursts of 4"]


def test_phase_jitter_follows_the_shortest_period_up_to_a_probe():
    lte = load_spec(scenario_path("field-lte"))
    assert phase_jitter_s(lte, _args()) == 6.0  # the 40 s period, capped at the probe's 6 s
    assert phase_jitter_s(lte, _args(oracle_duration=60.0)) == 40.0
    assert phase_jitter_s(lte, _args(phase_jitter=2.5)) == 2.5
    assert phase_jitter_s(load_spec(scenario_path("field-shared")), _args()) == 0.0


class _Bed:
    spec = "spec"

    def __init__(self) -> None:
        self.calls: list[float] = []

    def measure(self, request, **kw):
        self.calls.append(time.monotonic())
        return (request, kw)


def test_a_phased_bed_waits_a_random_time_before_each_measurement():
    inner = _Bed()
    bed = PhasedBed(inner, 0.05, seed=3)
    assert bed.spec == "spec"
    t0 = time.monotonic()
    waits = []
    for k in range(5):
        before = time.monotonic()
        assert bed.measure(k, backend="iperf3") == (k, {"backend": "iperf3"})
        waits.append(inner.calls[-1] - before)
    assert all(0 <= w <= 0.2 for w in waits) and len(set(round(w, 3) for w in waits)) > 1
    assert time.monotonic() - t0 < 2

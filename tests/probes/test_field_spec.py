"""Field conditions in topology files (cross, schedule, loss_burst): accepted as written, every
bad value refused with a message naming the field; the pure parts of their emulation."""

from __future__ import annotations

import random

import pytest

from probes.testbed import crossgen, linksched
from probes.testbed.delayline import Path as DelayPath
from probes.testbed.field_spec import gilbert_elliott
from probes.testbed.spec import SpecError, load_spec, parse_spec, scenario_path
from tests.probes.test_spec import base, refused


def with_isp(**fields) -> dict:
    data = base()
    data["sites"][0]["isps"][0].update(fields)
    return data


def test_field_fields_load_as_written():
    spec = parse_spec(with_isp(
        cross=[{"kind": "bulk", "direction": "up", "flows": 2, "cc": "cubic"},
               {"kind": "onoff", "direction": "down", "mbps": 4, "on_s": 5, "off_s": 10},
               {"kind": "web", "direction": "down", "mbps": 2}],
        schedule={"period_s": 60, "steps": [[0, 20000, 20000], [30, 5000, 8000]]},
    ) | {"paths": {"U-D": {"loss_pct": 1, "loss_burst": 4}}})
    isp = spec.sites[0].isps[0]
    assert [c.kind for c in isp.cross] == ["bulk", "onoff", "web"]
    assert isp.cross[0].flows == 2 and isp.cross[1].on_s == 5 and isp.cross[2].mbps == 2
    assert isp.schedule.steps[1] == (30, 5000, 8000)
    assert spec.path("U", "D").loss_burst == 4 and spec.has_field_conditions()
    # one entry without a list is one entry
    one = parse_spec(with_isp(cross={"kind": "bulk", "direction": "down"}))
    assert one.sites[0].isps[0].cross[0].cc == "cubic"


def test_quiet_scenarios_keep_their_digest():
    quiet = parse_spec(base())
    assert not quiet.has_field_conditions()
    # SRL-HU's digest as it was before field conditions existed (stored results carry it)
    assert load_spec(scenario_path("srl-hu")).digest() == "e90cdae4f8686381"
    loud = parse_spec(with_isp(cross={"kind": "web", "direction": "up", "mbps": 1}))
    assert loud.digest() != quiet.digest()


@pytest.mark.parametrize(("cross", "needle"), [
    ({"kind": "flood", "direction": "up"}, "cross.0"),
    ({"kind": "bulk", "direction": "sideways"}, "direction"),
    ({"kind": "bulk", "direction": "up", "flows": 0}, "flows"),
    ({"kind": "bulk", "direction": "up", "flows": 65}, "flows"),
    ({"kind": "bulk", "direction": "up", "cc": "Cubic; rm"}, "cc"),
    ({"kind": "onoff", "direction": "up", "mbps": 1, "on_s": 0, "off_s": 1}, "on_s"),
    ({"kind": "onoff", "direction": "up", "mbps": 1, "on_s": 1}, "off_s"),
    ({"kind": "web", "direction": "up", "mbps": -1}, "mbps"),
    ({"kind": "web", "direction": "up", "mbps": float("nan")}, "mbps"),
    ({"kind": "web", "direction": "up", "mbps": 1, "size": 3}, "unknown key"),
    ({"direction": "up"}, "cross.0"),
])
def test_bad_cross_is_refused(cross, needle):
    msg = refused(with_isp(cross=cross), "sites.0.isps.0.cross", needle)
    assert "Traceback" not in msg


def test_too_many_cross_entries():
    refused(with_isp(cross=[{"kind": "web", "direction": "up", "mbps": 1}] * 9), "cross")


@pytest.mark.parametrize(("schedule", "needle"), [
    ({"period_s": 10, "steps": [[1, 100, 100]]}, "start at 0"),
    ({"period_s": 10, "steps": [[0, 100, 100], [5, 100, 100], [5, 50, 50]]}, "increase"),
    ({"period_s": 10, "steps": [[0, 100, 100], [10, 50, 50]]}, "inside the period"),
    ({"period_s": 10, "steps": [[0, 0, 100]]}, "steps.0.1"),
    ({"period_s": 10, "steps": [[0, 100]]}, "steps.0"),
    ({"period_s": 10, "steps": [[0, "100", 100]]}, "steps.0.1"),
    ({"period_s": 10, "steps": []}, "steps"),
    ({"period_s": 0.5, "steps": [[0, 100, 100]]}, "period_s"),
    ({"steps": [[0, 100, 100]]}, "period_s"),
    ({"period_s": 10, "steps": [[0, 100, 100]], "jitter": 1}, "unknown key"),
])
def test_bad_schedule_is_refused(schedule, needle):
    refused(with_isp(schedule=schedule), "sites.0.isps.0.schedule", needle)


def test_bad_loss_burst_is_refused():
    data = base()
    data["paths"] = {"U-D": {"loss_pct": 1, "loss_burst": 0.5}}
    refused(data, "paths.U-D.loss_burst")
    data["paths"] = {"U-D": {"loss_burst": 4}}
    refused(data, "paths.U-D.loss_burst", "loss_pct")
    data["paths"] = {"U-D": {"loss_pct": 60, "loss_burst": 1}}  # cannot keep 60 % with bursts of 1
    refused(data, "loss_burst", "too short")
    # a default burst length for paths without loss is fine
    data = base()
    data["defaults"]["loss_burst"] = 3
    assert parse_spec(data).path("U", "D").loss_burst == 3
    with pytest.raises(SpecError):
        parse_spec(base() | {"defaults": {"loss_burst": "many"}})


def test_gilbert_elliott_keeps_the_rate_and_the_burst_length():
    enter, leave = gilbert_elliott(2.0, 8.0)
    assert leave == pytest.approx(1 / 8) and enter / (enter + leave) == pytest.approx(0.02)
    rng = random.Random(1)
    path = DelayPath(10, 2.0, 0, loss_burst=8)
    lost = [path.drops(rng.random()) for _ in range(400_000)]
    assert sum(lost) / len(lost) == pytest.approx(0.02, rel=0.1)
    assert path.dropped / path.bursts == pytest.approx(8, rel=0.1)
    plain = DelayPath(10, 2.0, 0)
    for _ in range(200_000):
        plain.drops(rng.random())
    assert plain.dropped / plain.bursts < 1.1  # independent losses rarely come in runs


def test_schedule_steps_and_web_sizes():
    steps = [[0, 1, 1], [3, 2, 2], [7, 3, 3]]
    assert [linksched.step_index(steps, 10, t) for t in (0, 2.9, 3, 6.9, 7, 9.9, 10, 13)] == \
        [0, 0, 1, 1, 2, 2, 0, 1]
    assert linksched.next_change(steps, 10, 8) == pytest.approx(2)
    assert linksched.tc_argv("ns", "dev", 1500.4, 9000)[-6:] == \
        ["rate", "1500kbit", "burst", "3028", "limit", "9000"]
    rng = random.Random(2)
    sizes = [crossgen.web_size(rng) for _ in range(200_000)]
    expected = crossgen.web_clipped_mean(crossgen.WEB_MEAN_BYTES)
    assert sum(sizes) / len(sizes) == pytest.approx(expected, rel=0.1)
    assert max(sizes) > 20 * crossgen.WEB_MEAN_BYTES > sorted(sizes)[len(sizes) // 2]


@pytest.mark.parametrize(("scenario", "kind"), [
    ("field-shared", "cross"), ("field-lte", "schedule"), ("field-lossy", "loss_burst")])
def test_shipped_field_scenarios(scenario, kind):
    spec = load_spec(scenario_path(scenario))
    assert spec.has_field_conditions()
    isps = [isp for s in spec.sites for isp in s.isps]
    if kind == "cross":  # every sender uplink shared with competing bulk flows
        assert all(c.kind == "bulk" and c.direction == "up"
                   for isp in spec.sites[0].isps for c in isp.cross)
    elif kind == "schedule":
        steps = next(isp.schedule for isp in isps if isp.schedule).steps
        assert max(up for _t, up, _d in steps) >= 5 * min(up for _t, up, _d in steps)
    else:
        lossy = [p for p in spec.resolved_paths() if p.loss_pct]
        assert len({p.a_label for p in lossy}) == 1 and all(p.loss_burst > 1 for p in lossy)

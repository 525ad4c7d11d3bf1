"""The failover watcher's decisions (pure): promote the next standby on a link loss, restore
the selection only after the link has stayed up for the hold time."""

from __future__ import annotations

from probes.site.failover import Policy


def test_failover_promotes_the_first_standby_that_is_up_and_restores_after_the_hold():
    p = Policy(used=[1], standbys=[3, 2], hold_s=5.0)
    assert p.step(0.0, {1: True, 2: True, 3: True}) == []
    out = p.step(1.0, {1: False, 2: True, 3: False})
    assert out == [{"kind": "failover", "endpoint": 1, "promoted": 2, "set": {2: False}}]
    assert p.step(1.2, {1: False, 2: True, 3: False}) == []  # said once
    assert p.step(2.0, {1: True, 2: True, 3: True}) == []  # back, but not yet for long
    assert p.step(4.0, {1: False, 2: True, 3: True}) == []  # flapping: the hold starts again
    assert p.step(5.0, {1: True, 2: True, 3: True}) == []
    assert p.step(9.9, {1: True, 2: True, 3: True}) == []
    out = p.step(10.0, {1: True, 2: True, 3: True})
    assert out == [{"kind": "restored", "endpoint": 1, "demoted": 2, "set": {2: True}}]
    assert p.failed == {}


def test_a_failed_stand_in_is_replaced_and_nothing_left_is_said():
    p = Policy(used=[1], standbys=[2, 3], hold_s=1.0)
    assert p.step(0.0, {1: False, 2: True, 3: True})[0]["promoted"] == 2
    out = p.step(0.5, {1: False, 2: False, 3: True})
    assert out == [{"kind": "failover", "endpoint": 2, "promoted": 3, "set": {2: True, 3: False}}]
    out = p.step(0.6, {1: False, 2: False, 3: False})
    assert out == [{"kind": "failover", "endpoint": 3, "promoted": None, "set": {3: True}}]


def test_two_failures_take_two_different_standbys():
    p = Policy(used=[1, 2], standbys=[3, 4])
    out = p.step(0.0, {1: False, 2: False, 3: True, 4: True})
    assert [(d["endpoint"], d["promoted"]) for d in out] == [(1, 3), (2, 4)]

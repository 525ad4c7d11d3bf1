"""The clock offset from NTP-style exchanges (`probes.clocksync`): the formula, the quickest
exchange of each batch, the uncertainty from the spread and the drift."""

from __future__ import annotations

import pytest

from probes.clocksync import estimate, offset_and_rtt

OFFSET_US = 5_000_000  # the receiver's clock is 5 s ahead


def exchange(t1: int, forward_us: int, back_us: int, hold_us: int = 50,
             offset_us: int = OFFSET_US) -> list[int]:
    t2 = t1 + forward_us + offset_us
    t3 = t2 + hold_us
    return [t1, t2, t3, t3 - offset_us + back_us]


def test_one_exchange_on_a_symmetric_path_gives_the_offset_exactly():
    off, rtt = offset_and_rtt(exchange(1_000, 30_000, 30_000))
    assert off == OFFSET_US and rtt == 60_000


def test_the_quickest_exchange_wins_and_the_others_spread_the_uncertainty():
    """One exchange queued 8 ms one way reads 4 ms off; the quickest three agree within
    0.2 ms, so the estimate is right and its uncertainty is that spread, not the queue."""
    before = [exchange(0, 30_000, 30_000), exchange(100_000, 38_000, 30_000),
              exchange(200_000, 30_200, 30_000), exchange(300_000, 30_000, 30_100)]
    after = [exchange(9_000_000, 30_000, 30_000)]
    est = estimate(before, after)
    assert est.offset_ms == pytest.approx(OFFSET_US / 1000)
    assert est.rtt_ms == pytest.approx(60.0)
    assert est.exchanges == 5
    assert 0.0 < est.uncertainty_ms <= 0.1 + 1e-9


def test_drift_between_before_and_after_is_half_the_uncertainty_and_the_mean_the_offset():
    before = [exchange(0, 1_000, 1_000)]
    after = [exchange(10_000_000, 1_000, 1_000, offset_us=OFFSET_US + 800)]
    est = estimate(before, after)
    assert est.offset_ms == pytest.approx(OFFSET_US / 1000 + 0.4)
    assert est.uncertainty_ms == pytest.approx(0.4)
    assert est.before_ms == pytest.approx(OFFSET_US / 1000)


@pytest.mark.parametrize(("before", "after", "why"), [
    ([], [], "no exchange"),
    ([[1, 2, 3]], [], "4 stamps"),
    ([[100, 5, 200, 150]], [], "negative round trip"),
])
def test_no_estimate_from_what_cannot_be(before, after, why):
    with pytest.raises(ValueError, match=why):
        estimate(before, after)

"""The offset between two hosts' clocks from NTP-style exchanges, and how far to trust it.

An exchange is (t1, t2, t3, t4) in µs: the sender's clock when it asked, the receiver's when it
got the question and when it answered, the sender's when the answer came. Then

    offset = ((t2 - t1) + (t3 - t4)) / 2      (receiver's clock minus the sender's)
    rtt    = (t4 - t1) - (t3 - t2)

and the true offset lies within offset ± rtt / 2 whatever the asymmetry of the two directions
(NTP's bound). With the same delay both ways the offset is exact; what moves it is queueing or
a descheduled process in one direction, which also lengthens that exchange's round trip. So,
as NTP's clock filter does, each batch (before the stream, after it) takes the exchange of the
least round trip, and the estimate is the mean of the two batches (a clock that drifts
linearly is right at the middle of the probe).

The uncertainty is what the exchanges themselves show: half the spread of the offsets among
each batch's quicker half (how far a queue or a scheduler could move a good exchange), plus
half the drift between before and after (the offset moved that much during the probe). It does
not include the asymmetry of the control path (invisible to any exchange; the round trip bounds
it and is kept beside it, ``rtt_ms``): a path that is slower one way than the other shifts every
offset alike.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict

Exchange = Sequence[int]  # t1, t2, t3, t4 (µs)


class ClockOffset(BaseModel):
    """The receiver's clock minus the sender's (ms), and how far it is trusted."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    offset_ms: float
    uncertainty_ms: float
    rtt_ms: float  #: the least round trip of the exchanges (bounds any path asymmetry)
    before_ms: float  #: the batch before the stream
    after_ms: float  #: the batch after it
    exchanges: int


def offset_and_rtt(x: Exchange) -> tuple[float, float]:
    """(offset µs, round trip µs) of one exchange."""
    t1, t2, t3, t4 = (int(v) for v in x)
    return ((t2 - t1) + (t3 - t4)) / 2.0, float((t4 - t1) - (t3 - t2))


def _batch(exchanges: Sequence[Exchange]) -> tuple[float, float, float]:
    """(offset, spread, least rtt) µs of one batch: the offset of its quickest exchange, the
    range of the offsets of its quicker half."""
    pairs = sorted((rtt, off) for off, rtt in map(offset_and_rtt, exchanges))
    quick = pairs[:max(1, (len(pairs) + 1) // 2)]
    offsets = [off for _, off in quick]
    return pairs[0][1], max(offsets) - min(offsets), pairs[0][0]


def estimate(before: Sequence[Exchange], after: Sequence[Exchange]) -> ClockOffset:
    """The offset from the batches before and after the stream (either may be empty, not both);
    ValueError on none or on an exchange that cannot be (negative round trip)."""
    batches = [b for b in (before, after) if b]
    if not batches:
        raise ValueError("clock offset: no exchange")
    for b in batches:
        for x in b:
            if len(x) != 4:
                raise ValueError(f"clock offset: an exchange has 4 stamps, got {list(x)}")
            if offset_and_rtt(x)[1] < 0:
                raise ValueError(f"clock offset: negative round trip in {list(x)}")
    est = [_batch(b) for b in batches]
    first, last = est[0][0], est[-1][0]
    spread = max(s for _, s, _ in est)
    uncertainty = spread / 2 + abs(last - first) / 2
    return ClockOffset(offset_ms=(first + last) / 2 / 1000.0,
                       uncertainty_ms=uncertainty / 1000.0,
                       rtt_ms=min(r for _, _, r in est) / 1000.0,
                       before_ms=first / 1000.0, after_ms=last / 1000.0,
                       exchanges=sum(len(b) for b in batches))

"""The one sentence an answer leads with: what to expect, and whether the choice is settled.

A user reads "Expect 17.9-19.1 Mbit/s (90 %); PM and CC settled; FullMesh/bbr is within reach
(−2 %)." before any expert flag. The sentence is built only from the answer's own pieces: the
interval of the promised goodput (OTP), whether each choice (path manager, congestion control,
subflow subset) is settled, and the alternatives whose interval overlaps the chosen one's. A
choice is *settled* when no measured alternative that differs in it is within reach; the expert
flags (quality gates, unsettled impact factors) stay separate and below it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from ..algorithm.adaptive import BulkDecision
from ..algorithm.adaptive.variation import Variation
from ..algorithm.alternative import Alternative

MAX_LISTED = 2  # alternatives named in the sentence; the rest are counted


def format_rate(low: float, high: float) -> str:
    """`17.9-19.1`: three significant digits, more when they would print the same number."""
    for digits in range(3, 7):
        a, b = _significant(low, digits), _significant(high, digits)
        if a != b or digits == 6:
            return f"{a}-{b}"
    raise AssertionError("unreachable")


def format_relative(relative: float) -> str:
    """−2 %, +12 %, −0.7 %: whole percent from 1 % up, one decimal below; a true minus sign."""
    pct = 100 * relative
    text = f"{abs(pct):.0f}" if abs(pct) >= 1 else f"{abs(pct):.1f}"
    if text in ("0.0", "0"):
        return "±0 %"
    return f"{'−' if pct < 0 else '+'}{text} %"


def confidence_statement(
    otp_low_mbps: float,
    otp_high_mbps: float,
    confidence: float,
    *,
    pm_settled: bool,
    cc_settled: bool,
    subset_settled: bool | None = None,
    alternatives: Sequence[Alternative] = (),
    budget_spent: bool = False,
    variation: Variation | None = None,
) -> str:
    """The lead sentence of an answer. `subset_settled` None: no subflow selection behind the
    answer (FullMesh chosen, or a grid campaign), so the subset is not mentioned.
    `budget_spent`: the campaign stopped on its budget, not because the decision settled, so the
    sentence says the answer is the best measured so far. `variation`: the path moves over
    time (`adaptive.variation`), and the sentence says by how much."""
    if not (math.isfinite(otp_low_mbps) and math.isfinite(otp_high_mbps)):
        raise ValueError("otp interval: must be finite")
    if otp_low_mbps > otp_high_mbps:
        raise ValueError(f"otp interval: low {otp_low_mbps} above high {otp_high_mbps}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence: must be in (0, 1), got {confidence!r}")
    choices = [("PM", pm_settled), ("CC", cc_settled)]
    if subset_settled is not None:
        choices.append(("subset", subset_settled))
    settled = [name for name, ok in choices if ok]
    still_open = [name for name, ok in choices if not ok]
    level = f"{100 * confidence:g}"
    parts = [f"Expect {format_rate(max(0.0, otp_low_mbps), otp_high_mbps)} Mbit/s ({level} %)"]
    if settled and still_open:
        parts.append(f"{_join(settled)} settled, {_join(still_open)} open")
    elif settled:
        parts.append(f"{_join(settled)} settled")
    else:
        parts.append(f"{_join(still_open)} open")
    if alternatives:
        parts.append(_reach(alternatives))
    if variation is not None and variation.varies:
        parts.append(_varies(variation))
    if budget_spent:
        parts.append("the probe budget ran out first: the best measured so far")
    return "; ".join(parts) + "."


def decision_statement(
    decision: BulkDecision, subset_settled: bool | None = None,
    subset_alternatives: Sequence[Alternative] = (),
) -> str | None:
    """The sentence a settled adaptive decision leads with, on its mean's interval; pass the
    subflow selection's `settled` and `within_reach` when OPM is PCDC. None until settled."""
    interval = decision.otp_interval()
    if not decision.settled or interval is None or not math.isfinite(interval[1]):
        return None
    return confidence_statement(
        *interval, decision.confidence, pm_settled=decision.pm_settled,
        cc_settled=decision.cc_settled, subset_settled=subset_settled,
        alternatives=[*decision.alternatives, *subset_alternatives])


def _varies(variation: Variation) -> str:
    """The path moves over time: its 1 s goodputs' 10th-90th percentile at the answer, and the
    range of its runs' means over the time they span."""
    out = "the path varies"
    if variation.p10_mbps is not None and variation.p90_mbps is not None:
        out += (f": {format_rate(variation.p10_mbps, variation.p90_mbps)} Mbit/s second to "
                "second (10th-90th percentile)")
    if variation.run_low_mbps is not None and variation.run_high_mbps is not None:
        out += (f", runs {format_rate(variation.run_low_mbps, variation.run_high_mbps)} Mbit/s"
                f" over {variation.span_s:.0f} s")
    return out


def _reach(alternatives: Sequence[Alternative]) -> str:
    ranked = sorted(alternatives, key=lambda a: -a.relative)
    named = [f"{a.label} ({format_relative(a.relative)})" for a in ranked[:MAX_LISTED]]
    more = len(ranked) - len(named)
    if more:
        named.append(f"{more} more")
    verb = "is" if len(named) == 1 else "are"
    return f"{_join(named)} {verb} within reach"


def _join(items: Sequence[str]) -> str:
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


def _significant(value: float, digits: int) -> str:
    if value == 0:
        return "0"
    decimals = max(0, digits - 1 - math.floor(math.log10(abs(value))))
    return f"{value:.{decimals}f}"

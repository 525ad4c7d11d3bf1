"""Eq. 1, the traditional multipath buffer, and the paper's fallback (Section 6, conclusion 4).

B >= (3 * max RTT_i + max RTO_i) * sum BW_i over the subflows used. Bandwidths are in kbit/s, times
in seconds, B in MiB (2^20 bytes).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

BITS_PER_MIB = 8 * 2**20
FALLBACK_FRACTION = 0.5  # "set the buffer size according to 50% of the traditional solution"


@dataclass(frozen=True)
class TraditionalBuffer:
    rtt_max_s: float
    rto_max_s: float
    bandwidth_sum_kbps: float
    buffer_mib: float

    def ratio(self, obs_mib: float) -> float:
        """OBS / B: the share of the traditional buffer that MPCOA recommends."""
        return obs_mib / self.buffer_mib

    @property
    def fallback_mib(self) -> float:
        return FALLBACK_FRACTION * self.buffer_mib


def traditional_buffer(
    rtts_s: Sequence[float], rtos_s: Sequence[float], bandwidths_kbps: Sequence[float]
) -> TraditionalBuffer:
    for name, values in (("rtt_s", rtts_s), ("rto_s", rtos_s), ("bandwidth_kbps", bandwidths_kbps)):
        if len(values) == 0:
            raise ValueError(f"{name}: at least one value is needed")
        for k, v in enumerate(values):
            if not math.isfinite(v) or v <= 0:
                raise ValueError(f"{name}[{k}]: must be a positive number, got {v!r}")
    rtt, rto, bw = max(rtts_s), max(rtos_s), sum(bandwidths_kbps)
    buffer_mib = (3 * rtt + rto) * bw * 1000 / BITS_PER_MIB
    return TraditionalBuffer(
        rtt_max_s=rtt, rto_max_s=rto, bandwidth_sum_kbps=bw, buffer_mib=buffer_mib
    )


def rto_from_rtt(rtt_s: float, rttvar_s: float | None = None) -> float:
    """RFC 6298: RTO = SRTT + max(G, 4 * RTTVAR), at least 1 s; RTTVAR = RTT/2 without history."""
    var = rtt_s / 2 if rttvar_s is None else rttvar_s
    return max(1.0, rtt_s + 4 * var)

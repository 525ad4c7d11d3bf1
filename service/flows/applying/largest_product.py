"""The largest product L x R of local and remote ISP labels inside a set of subflows: what the
in-kernel path manager can express of an SP* that is no product (docs in `site_plan`)."""

from __future__ import annotations

import numpy as np


def largest_product(used: list[str], local: list[str], remote: list[str]) -> tuple[list[str],
                                                                                   list[str]]:
    """The local and remote labels whose product is the largest subset of `used` (ties: the one
    whose subflows come first in `used`, the answer's own order; then the fewest local labels,
    then the first in `itertools.combinations` order of `local`).

    The largest product inside a set of pairs is a maximum edge biclique, NP-hard in general; but
    a site has at most MAX_ISPS_PER_SITE (16) ISPs, so every subset of the local labels is
    scored at once, vectorised: each subset's common remote labels built from a smaller subset's
    by one AND (2^16 entries), areas from population counts, and the ranks summed only for the
    subsets of the largest area. 16 x 16 takes milliseconds (benchmarks/apply_plan_search.py),
    and it picks exactly what trying every combination in turn picks (tests/apply)."""
    pairs = set(used)
    rank = {s: i for i, s in enumerate(used)}
    cand = [lo for lo in local if any(f"{lo}-{r}" in pairs for r in remote)]
    n, m = len(cand), len(remote)
    if n == 0:
        return [], []
    member = np.array([[f"{lo}-{r}" in pairs for r in remote] for lo in cand])
    weight = 1 << np.arange(m, dtype=np.int64)
    neighbours = (member * weight).sum(axis=1)
    common = np.empty(1 << n, dtype=np.int64)  # subset (bit i: cand[i]) -> its common remotes
    count = np.empty(1 << n, dtype=np.int64)  # subset -> how many local labels
    common[0], count[0] = (1 << m) - 1, 0
    for i in range(n):
        half = 1 << i
        common[half:2 * half] = common[:half] & neighbours[i]
        count[half:2 * half] = count[:half] + 1
    area = count * _popcount(common, m)
    area[0] = 0
    tied = np.flatnonzero(area == area.max())
    bits_l = (tied[:, None] >> np.arange(n)) & 1
    bits_r = (common[tied][:, None] >> np.arange(m)) & 1
    ranks = np.array([[rank.get(f"{lo}-{r}", 0) for r in remote] for lo in cand])
    rank_sum = np.einsum("ti,ij,tj->t", bits_l, ranks, bits_r)
    # within one size, combinations() comes first to the subset holding the lowest index where
    # two differ: the one whose bit-reversed mask is larger
    reversed_mask = (bits_l << np.arange(n - 1, -1, -1)).sum(axis=1)
    pick = tied[np.lexsort((-reversed_mask, count[tied], rank_sum))[0]]
    ls = [cand[i] for i in range(n) if pick >> i & 1]
    rs = [r for j, r in enumerate(remote) if common[pick] >> j & 1]
    return ls, rs


def _popcount(masks: np.ndarray, width: int) -> np.ndarray:
    bits = np.zeros(masks.shape, dtype=np.int64)
    for j in range(width):
        bits += (masks >> j) & 1
    return bits

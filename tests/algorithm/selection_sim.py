"""Driving the subflow selection as a campaign phase would: ask, run the first probe, store its
goodput (or its failure), ask again. `goodput(subset)` stands in for the network: a mean per
subset (None: the probe fails) and a fixed relative wobble per run."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence

from service.algorithm.selection import (
    Budget,
    SelectionResult,
    SelectionState,
    next_probes,
    result,
)

# Mbit/s from docs/testbed.md: SRL-HU, bbr, each subflow alone (benchmarks/subflows.py, 2 x 6 s)
# and U-C plus one other (the oracle's forward selection at 4.1 MiB); P-CU alone could not be
# measured (its excluded sibling P-C never established).
SRL_HU_ALONE = {"K-C": 18.66, "K-CU": 3.83, "P-C": 0.047, "P-CU": None, "T-C": 0.142,
                "T-CU": 0.145, "U-C": 18.80, "U-CU": 3.76}
SRL_HU_WITH_UC = {"K-C": 14.46, "U-CU": 11.02, "K-CU": 3.82, "T-CU": 0.15, "T-C": 0.14,
                  "P-CU": 0.05, "P-C": 0.05}
SRL_HU_ALL = 0.638
SRL_HU = tuple(SRL_HU_ALONE)


def srl_hu(subset: frozenset[str]) -> float | None:
    """Every combination worse than its best member alone: the slowest member blocks it."""
    if len(subset) == 1:
        return SRL_HU_ALONE[next(iter(subset))]
    if subset == frozenset(SRL_HU):
        return SRL_HU_ALL
    others = [SRL_HU_WITH_UC[n] for n in subset if n != "U-C"]
    return min(others) * 0.97 ** (len(subset) - 2)


def wobble(k: int, spread: float) -> float:
    """Run k's relative deviation: -, +, -0.5, +0.5, ... (mean zero over each pair)."""
    size = spread * (1.0 if (k // 2) % 2 == 0 else 0.5)
    return 1 - size if k % 2 == 0 else 1 + size


def drive(
    subflows: Sequence[str],
    goodput: Callable[[frozenset[str]], float | None],
    *,
    spread: float = 0.02,
    samples: dict | None = None,
    budget_probes: int | None = None,
    limit: int = 1000,
    **settings,
) -> tuple[SelectionResult, SelectionState, int]:
    """Run the selection to its end; returns the result, the last state and the probes run."""
    store = defaultdict(list, {k: list(v) for k, v in (samples or {}).items()})
    failures: dict = defaultdict(int)
    probes = 0
    for _ in range(limit):
        left = None if budget_probes is None else budget_probes - probes
        state = SelectionState(subflows, dict(store), dict(failures),
                               budget=Budget(probes=left), **settings)
        wanted = next_probes(state)
        if not wanted:
            return result(state), state, probes
        subset = wanted[0]
        probes += 1
        mean = goodput(subset)
        if mean is None:
            failures[subset] += 1
            continue
        store[subset].append(mean * wobble(len(store[subset]), spread))
    raise AssertionError("the selection never ended")

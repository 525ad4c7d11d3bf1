"""The subflow selection's check at a fixed buffer: an addition must pay where the answer lives.

The selection measures subsets with autotuned buffers, which the kernel grows as far as a
transfer needs (64 MiB on the testbed). A subflow that helps only with such a buffer does not
help the answer, which is the smallest buffer within delta. On SRL-HU, K-C plus the 4 Mbit/s,
260 ms K-CU carried 22.6 Mbit/s autotuned against 18.8 for K-C alone, but 9.1 against 18.8 at
5.97 MiB and 17.7 at 1.35 MiB: every arm of the sweep then ran the pair, and OBS went to 26 MiB
where K-C alone reaches the target at 1.35 MiB. So where a CC's SP* adds subflows to its start
(the best subflow alone), both are probed once at the grid's second-largest buffer (the
oracle's choice too: the top may be past every arm's plateau), and SP* falls back to the start
unless the additions bring more than `min_gain` there as well. A fall-back needs
`FALL_BACK_RUNS` runs of each side: one low draw of a lossy path must not undo an addition the
selection settled (thin-sender: F-B + L-B, 20.7 against F-B's 18.8 Mbit/s on the oracle's
runs, fell back in some campaigns and kept its place in others, and F-B alone is not within
delta of the best); one run each stands where it shows a clear loss (`CLEAR_LOSS`). A CC that
shares the reference's SP* shares its check.
"""

from __future__ import annotations

from typing import Any

from models import NO_EXCLUSION, MeasurementPhase
from probes.vocabulary import FULLMESH, PCDC

from ....algorithm.alternative import Alternative
from ....algorithm.selection import SelectionResult, subset_label
from ....state.selected import subset_key, subset_of_key
from ..plan import ProbeStep
from .base import Context

Key = tuple[str, tuple[str, ...]]  # (the CC the check ran under, the subset, sorted)
FALL_BACK_RUNS = 2  # runs of SP* and of its start before SP* falls back
# ... unless one run each shows the additions cost more than this share of the start's goodput:
# SRL-HU's K-C + K-CU read 9.1 against 18.8 for K-C alone at 5.97 MiB, a loss no second draw
# turns into a gain, while thin-sender's F-B + L-B read 19.0 against 18.8 once (20.3-20.7 in
# other runs): short of the gain it needs, not a loss.
CLEAR_LOSS = 0.25


def check_buffer(grid: list[float]) -> float:
    """Where the check probes: the grid's second-largest buffer (its largest if it has one)."""
    ordered = sorted(grid)
    return ordered[-2] if len(ordered) >= 2 else ordered[-1]


def pair(res: SelectionResult) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """(SP*, its start) when SP* adds subflows to the best subflow alone, else None (nothing to
    check: SP* is one subflow, nothing usable, or all subflows chosen by the stated rates)."""
    if res.estimate is None or not res.path or res.path[0].decision != "start":
        return None
    start = res.path[0].subset
    return (res.subset, start) if set(start) < set(res.subset) else None


def owner(cc: str, done: dict[str, SelectionResult]) -> str:
    """The CC whose check stands for `cc`: the reference it shares SP* with, else itself."""
    shared = done[cc].shared_from
    if shared in done and pair(done[shared]) == pair(done[cc]):
        return shared
    return cc


def measured(ctx: Context, bs_mib: float) -> dict[Key, list[float | None]]:
    """(CC, subset) -> the check probes' goodputs at `bs_mib`, in run order (None: a probe
    that failed)."""
    out: dict[Key, list[tuple[int, float | None]]] = {}
    for m in ctx.runs(MeasurementPhase.SELECTION):
        if abs(m.bs_mib - bs_mib) < 1e-9 and m.excluded_subflow != NO_EXCLUSION:
            subset = tuple(sorted(subset_of_key(m.excluded_subflow)))
            value = m.mean_goodput_mbps if m.status == "ok" else None
            out.setdefault((m.cc, subset), []).append((m.run, value))
    return {k: [v for _, v in sorted(runs, key=lambda r: r[0])] for k, runs in out.items()}


def mean(runs: list[float | None]) -> float | None:
    """The mean of the runs that gave a goodput; None when none did."""
    ok = [v for v in runs if v is not None]
    return sum(ok) / len(ok) if ok else None


def next_run(chosen: list[float | None], start: list[float | None],
             min_gain: float) -> str | None:
    """Which side of the check runs again ("subset" or "start"), or None when the verdict
    stands: once the means say fall back, or either side has more runs, both are brought to
    `FALL_BACK_RUNS`, the side with fewer runs first."""
    if min(len(chosen), len(start)) >= FALL_BACK_RUNS:
        return None
    if len(chosen) == len(start):
        a, b = mean(chosen), mean(start)
        if verdict(a, b, min_gain) or a < (1 - CLEAR_LOSS) * b:
            return None
    return "subset" if len(chosen) <= len(start) else "start"


def step(ctx: Context, cc: str, subset: tuple[str, ...], bs_mib: float,
         run: int = 1) -> ProbeStep:
    ordered = tuple(n for n in ctx.subflows if n in subset)
    everything = len(ordered) == len(ctx.subflows)
    return ProbeStep("selection", FULLMESH if everything else PCDC, cc, bs_mib, run,
                     subset_key(ordered), None if everything else ordered)


def verdict(chosen_mbps: float | None, start_mbps: float | None, min_gain: float) -> bool:
    """True: SP* stands (its additions bring more than `min_gain` at the fixed buffer, or the
    check could not be measured); False: SP* falls back to its start."""
    if chosen_mbps is None or start_mbps is None or start_mbps <= 0:
        return True
    return chosen_mbps > (1 + min_gain) * start_mbps


def fall_back(res: SelectionResult) -> SelectionResult:
    """The result with SP* set back to its start: the start's estimate; SP* as it was becomes
    a standby and an alternative within reach (it did carry more with autotuned buffers)."""
    start = res.path[0]
    base = start.estimate.mean_mbps
    relative = res.estimate.mean_mbps / base - 1 if base > 0 else 0.0
    was = Alternative(subset_label(res.subset, res.subflows), relative, ("subset",))
    return res.revised(subset=start.subset, estimate=start.estimate,
                       standbys=(res.estimate, *res.standbys),
                       within_reach=(was, *res.within_reach))


def note(bs_mib: float, cc: str, chosen: list[float | None], start: list[float | None],
         kept: str) -> dict[str, Any]:
    return {"bs_mib": bs_mib, "cc": cc, "subset_mbps": mean(chosen), "start_mbps": mean(start),
            "subset_runs": chosen, "start_runs": start, "kept": kept}

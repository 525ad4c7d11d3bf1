"""Steps 3 and 4 of the adaptive decision: successive elimination against the line drawn from
T*'s lower bound, then the bisection per surviving arm for its smallest buffer reaching the
target (1 - delta) T*."""

from __future__ import annotations

from dataclasses import dataclass, field
from statistics import fmean

from ..arm import Arm
from .decision import Points, WantedProbe
from .top_band import TStar


@dataclass
class Verdicts:
    """The arms as the steps sort them. `straddling`: arms whose best straddles the line,
    repeated there before they are bisected; they join `survivors` in the bisection. `obs`: per
    arm the grid index of its smallest buffer reaching the target."""

    target: float
    survivors: list[Arm] = field(default_factory=list)
    eliminated: list[Arm] = field(default_factory=list)
    straddling: list[Arm] = field(default_factory=list)
    obs: dict[Arm, int] = field(default_factory=dict)


def eliminate(points: Points, arms: list[Arm], t: TStar, delta: float,
              max_runs: int) -> Verdicts:
    """Step 3: an arm whose upper confidence bound at its best buffer stays below the line
    (1 - delta) x T*'s lower bound cannot be within delta of the best: it is dropped. An arm
    other than the leader whose best mean is under the target and has fewer than `max_runs`
    runs there straddles the line: it is measured again before it is bisected, if it can still
    win."""
    line = (1 - delta) * (t.mbps - t.half_width)
    verdicts = Verdicts(target=(1 - delta) * t.mbps)
    for arm in arms:
        bs, mean = t.bests[arm]
        if mean + t.hw(arm, bs) < line:
            verdicts.eliminated.append(arm)
        elif (arm != t.leader and mean < (1 - delta) * t.mbps
              and len(points.values(arm, bs)) < max_runs):
            verdicts.straddling.append(arm)
        else:
            verdicts.survivors.append(arm)
    return verdicts


def bisection(points: Points, t: TStar, verdicts: Verdicts,
              max_runs: int) -> list[WantedProbe]:
    """Step 4: per survivor its smallest buffer reaching the target, into `verdicts.obs`; the
    probes still needed to find them ([] once found). An arm that can only win with a buffer
    under the smallest OBS found so far is asked about buffers up to that one: when it falls
    short there it needs a larger buffer and cannot be the answer, whatever its own smallest
    is (its probes below are never run). An arm whose best straddles the line is repeated there
    first, unless the others' smallest OBS already puts it out of the running (`_short_above`).
    Arms past the smallest OBS are never chosen, still drawn and compared at OBS."""
    grid, values, hw, target = points.grid, points.values, t.hw, verdicts.target
    obs = verdicts.obs
    pending: dict[Arm, WantedProbe] = {}
    for arm in [*verdicts.survivors, *verdicts.straddling]:
        if arm in verdicts.straddling:
            verdicts.survivors.append(arm)
            pending[arm] = WantedProbe(*arm, t.bests[arm][0])
            continue
        found = _bisect(arm, grid, values, hw, target, max_runs)
        if found is None and arm == t.leader:
            found = grid.index(t.bs)  # T*'s own point: the leader reaches its target there
        if isinstance(found, WantedProbe):
            pending[arm] = found
        elif found is None:
            verdicts.eliminated.append(arm)  # its best mean fell short after all repeats
        else:
            obs[arm] = found
    beyond: list[Arm] = []
    bound = None
    while pending and obs and bound != min(obs.values()):
        bound = min(obs.values())
        for arm in list(pending):
            if arm in verdicts.straddling:
                if _short_above(arm, grid, values, hw, target, bound):
                    del pending[arm]
                    beyond.append(arm)
                continue
            found = _bisect(arm, grid, values, hw, target, max_runs, limit=bound)
            if isinstance(found, WantedProbe):
                pending[arm] = found
                continue
            del pending[arm]
            if found is None:
                beyond.append(arm)
            else:
                obs[arm] = found
    if pending:
        return list(pending.values())
    for arm in beyond:
        obs[arm] = min(obs.values()) + 1
    return []


def _short_above(arm, grid, values, hw, target, limit: int) -> bool:
    """The arm measured short of the target (its interval wholly under it) at a buffer above
    grid index `limit` and at most its best buffer: it cannot reach the target by `limit`."""
    measured = [i for i in range(len(grid)) if values(arm, grid[i])]
    best = max(measured, key=lambda i: fmean(values(arm, grid[i])))
    return any(limit < i <= best and fmean(values(arm, grid[i])) + hw(arm, grid[i]) < target
               for i in measured)


def _bisect(arm, grid, values, hw, target, max_runs,
            limit: int | None = None) -> int | WantedProbe | None:
    """The grid index of the arm's smallest buffer reaching the target, a probe still needed to
    find it, or None when even its best buffer does not reach it. With `limit`, only buffers up
    to that index are asked about: None when the arm falls short at `limit`. Bisection assumes
    goodput does not fall as the buffer grows below the arm's best buffer, which is what a
    window limit does."""

    def verdict(i: int) -> bool | WantedProbe:
        # One run decides where its interval (the pooled spread) clears the target; a point
        # whose interval straddles it is repeated. Most bisection points are far from the line.
        bs = grid[i]
        v = values(arm, bs)
        if not v:
            return WantedProbe(*arm, bs)
        mean, h = fmean(v), hw(arm, bs)
        # A buffer reaches the target when its interval clears it. One still straddling the
        # line after `max_runs` does not: its true rate is as likely under the line as over it,
        # and an answer there is within delta of the best by a coin's toss. The answer's solve
        # reads OBS by the same rule (`lower_bounds`, `campaign_answer`), or the answer and
        # its promise part ways.
        if mean - h >= target:
            return True
        if mean + h < target or len(v) >= max_runs:
            return False
        return WantedProbe(*arm, bs)  # the interval straddles the target: repeat

    measured = [i for i in range(len(grid)) if values(arm, grid[i])]
    reaching = [i for i in measured if verdict(i) is True]
    if limit is not None:
        # what was measured below the limit is settled first, as the answer's solve over the
        # measured means would read a mean there that reaches the target
        for i in measured:
            if i < limit and isinstance(v := verdict(i), WantedProbe):
                return v
        reaching = [i for i in reaching if i <= limit]
        best = max(measured, key=lambda i: fmean(values(arm, grid[i])))
        if not reaching and any(limit < i <= best and verdict(i) is False for i in measured):
            return None  # short of the target at a larger buffer below its best: at the limit too
        if not reaching:
            at_limit = verdict(limit)
            if isinstance(at_limit, WantedProbe):
                return at_limit
            if not at_limit:
                return None
            reaching = [limit]
    if not reaching:
        # its best measured buffer must settle first (repeats), else the arm falls short
        best = max(measured, key=lambda i: fmean(values(arm, grid[i])))
        v = verdict(best)
        return v if isinstance(v, WantedProbe) else None
    hi = min(reaching)
    lo = max((i for i in measured if i < hi and verdict(i) is False), default=-1)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        v = verdict(mid)
        if isinstance(v, WantedProbe):
            return v
        if v:
            hi = mid
        else:
            lo = mid
    return hi

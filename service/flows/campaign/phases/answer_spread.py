"""The adaptive sweep's answer on a path that moves over time: the campaign's runs judged for
variation (`algorithm.adaptive.variation`), the settled decision held back until the answer's
runs are spread in time (`algorithm.adaptive.time_spread`), and the answer's interval widened
to where one fresh probe lands when the path varies."""

from __future__ import annotations

from statistics import fmean

from probes.vocabulary import PathManager

from ....algorithm import adaptive
from ....algorithm.adaptive.time_spread import spread_wanted
from ....algorithm.adaptive.variation import (
    TimedRun,
    Variation,
    fresh_probe_range,
    path_variation,
)
from .fitting import BufferRuns


def timed_points(runs: BufferRuns) -> dict[tuple[tuple[str, str], float], list[TimedRun]]:
    """The ok buffer runs per ((PM, CC), buffer), with their start times."""
    return {((pm, cc), bs): [TimedRun(start, mean, tuple(measured))
                             for start, mean, measured in found]
            for (pm, cc, bs), found in runs.timed.items()}


def variation_at(runs: BufferRuns, pm: PathManager | None, cc: str | None, bs: float | None,
                 delta: float) -> Variation:
    """Whether the campaign's runs show the path moving, and the figures at (pm, cc, bs)."""
    points = timed_points(runs)
    return path_variation(points, points.get(((pm, cc), bs), []) if pm and cc else [], delta)


def _t_star_point(samples) -> tuple[str, str, float] | None:
    """The point with the largest mean measured (T*'s, as `adaptive.decide` reads it)."""
    best = None
    for (pm, cc), per_bs in samples.items():
        for bs, values in per_bs.items():
            if values and (best is None or (fmean(values), -bs) > best[0]):
                best = ((fmean(values), -bs), (pm, cc, bs))
    return None if best is None else best[1]


def spread_probe(runs: BufferRuns, decision: adaptive.BulkDecision,
                 delta: float) -> adaptive.WantedProbe | None:
    """The probe a settled decision still needs before it stands: a run of its answer (or of
    T*'s point in between) until the answer's runs are spread in time; None: it stands."""
    if not decision.settled or decision.opm is None or decision.occ is None:
        return None
    answer = (decision.opm, decision.occ, decision.obs_mib)
    starts = {key: [start for start, _, _ in found] for key, found in runs.timed.items()}
    top = _t_star_point(runs.samples)
    newest = max((s for key, found in starts.items() if key != answer for s in found),
                 default=None)
    varies = variation_at(runs, *answer, delta).varies
    which = spread_wanted(starts.get(answer, []), starts.get(top, []) if top else [], newest,
                          varies, adaptive.MIN_RUNS, same_point=top is None or top == answer)
    if which is None:
        return None
    return adaptive.WantedProbe(*(answer if which == "answer" else top))


def widened(interval: tuple[float, float] | None, variation: Variation, otp: float | None,
            runs: int, confidence: float) -> tuple[float, float] | None:
    """The answer's interval, widened where the path varies to cover one fresh probe's range
    (`variation.fresh_probe_range`); as it was where the path does not vary."""
    if otp is None:
        return interval
    wide = fresh_probe_range(variation, otp, runs, confidence)
    if wide is None:
        return interval
    if interval is None:
        return wide
    return min(interval[0], wide[0]), max(interval[1], wide[1])

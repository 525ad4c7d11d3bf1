"""What both sweeps share: the buffer runs measured so far, growing the grid above its top, and
the fit (f5) over the ok buffer runs."""

from __future__ import annotations

from dataclasses import dataclass, field

from models import MeasurementPhase
from probes.base import intervals_after_warmup

from ....state import state_of
from ....store import campaigns as campaign_store
from ....store import measurements, results
from ..derive import fit_from_runs
from .base import Context

MAX_GRID_EXTENSIONS = 3


@dataclass(frozen=True)
class BufferRuns:
    """The buffer runs measured so far, as the sweeps read them."""

    #: per (PM, CC) the ok goodputs per buffer
    samples: measurements.PointGoodputs
    #: per (PM, CC, buffer) the runs stored, ok or failed (a failed run's key is taken, the
    #: next run gets the next number)
    tried: dict[tuple[str, str, float], int]
    #: per (PM, CC, buffer) the ok runs' series as (whole series, intervals after the warm-up),
    #: for the spread inside probes (`algorithm.window_spread`)
    series: dict[tuple[str, str, float], list[tuple[list, list[float]]]]
    #: `samples` without the means capped at the links' rate (`capacity.capped_mean`): capped
    #: means are equal to the last digit, so their zero spread would narrow the noise every
    #: interval is drawn from (on asymmetric.yaml a fresh probe fell 0.3 % under a promise
    #: drawn that way); the run-to-run noise is pooled over these
    spread_samples: measurements.PointGoodputs
    #: per (PM, CC, buffer) the ok runs as (start, epoch s; stored mean; intervals after the
    #: warm-up), for whether the path moves over time (`algorithm.adaptive.variation`)
    timed: dict[tuple[str, str, float], list[tuple[float, float, list[float]]]] = field(
        default_factory=dict)


def buffer_samples(ctx: Context) -> BufferRuns:
    tried: dict[tuple[str, str, float], int] = {}
    series: dict[tuple[str, str, float], list[tuple[list, list[float]]]] = {}
    when: dict[tuple[str, str, float], list[tuple[float, float, list[float]]]] = {}
    rows = ctx.runs(MeasurementPhase.SWEEP)
    for m in rows:
        bs = float(m.bs_mib)
        tried[(m.pm, m.cc, bs)] = max(tried.get((m.pm, m.cc, bs), 0), m.run)
        if m.status == "ok" and m.mean_goodput_mbps is not None:
            timed = timed_series(m.goodput_mbps or [], m.interval_s or 1.0)
            measured = [v for _, v in intervals_after_warmup(timed, m.warmup_s or 0.0)]
            series.setdefault((m.pm, m.cc, bs), []).append((timed, measured))
            started = m.started_at.timestamp() if m.started_at is not None else 0.0
            when.setdefault((m.pm, m.cc, bs), []).append(
                (started, float(m.mean_goodput_mbps), measured))
    samples, spread = measurements.point_goodputs(rows)
    return BufferRuns(samples, tried, series, spread, when)


def timed_series(values: list[float], interval_s: float) -> list[tuple[float, float]]:
    """A stored TP(t) series as (interval end s, Mbit/s), the form the probes record."""
    return [((i + 1) * interval_s, float(v)) for i, v in enumerate(values)]


def grid_extensions(ctx: Context) -> list[float]:
    return list(state_of(ctx.campaign).grid_extended or ())


def grow_grid(ctx: Context, more: float) -> None:
    """One more buffer above the grid, noted (`grid_extended`, flagged on the answer)."""
    campaign = ctx.campaign
    added = grid_extensions(ctx)
    campaign.buffer_grid_mib = sorted([*campaign.buffer_grid_mib, more])
    campaign_store.update_state(campaign, grid_extended=(*added, more))


def fit(ctx: Context, *, required: bool = True) -> list | None:
    """f5 over the ok buffer runs, stored; None when no arm is usable (and, when the answer
    needs the fit, the campaign failed)."""
    campaign = ctx.campaign
    outcome = fit_from_runs(ctx.session, campaign=campaign)
    campaign_store.update_state(campaign, unfitted_arms=tuple(outcome.unfitted_arms))
    if not outcome.fits:
        if required:
            ctx.fail("buffer phase: no (PM, CC) has runs at 3 buffer sizes")
        return None
    results.store_fits(ctx.session, campaign_id=campaign.id, fits=outcome.fits)
    ctx.session.flush()
    return outcome.fits

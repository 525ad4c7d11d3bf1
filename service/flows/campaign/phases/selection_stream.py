"""The subflow selection of a stream campaign: its paced selection probes as runs per subset,
the selection's state over them (`algorithm.selection_stream`: a subflow kept where it lowers
p99 frame delay or is needed to carry the stream; its result read as frame delay there,
`delay_view`).

The impact phase's probes stay bulk (TP_0, TP_i: Ω and the reference CC's order); only the
selection's own probes, paced at the stream's frame rate and size (`executor.profile_of`), say
what a subset does to frame delay, so only they are runs here. The fixed-buffer check is a
goodput check and is not made: a stream below its paths' capacity does not fill the buffer.

The selection runs on the reference CC only, and every other CC shares its SP* (`shared`): a
stream below its paths' capacity never fills a congestion window, so which subflows hold frames
back is the paths' doing (their jitter, loss and delay), not the CC's. Checked per CC as the
bulk selection does, it cost 18-19 paced probes on shared.yaml and stream-radio.yaml, more than
the sweep, and the campaign over half the stream oracle's probe-seconds.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from models import MeasurementPhase

from ....algorithm.objective import Objective
from ....algorithm.selection_stream import stream_state
from ....algorithm.selection_types import SelectionResult, SelectionState
from ....algorithm.stream_choice import StreamRun
from ....algorithm.subset_stats import Subset
from ....state.selected import subset_of_key
from ...answers.stream_answer import frames_of, one_way, stream_run
from ..plan import IMPACT_BS_MIB
from .base import Context


def stream_runs(ctx: Context) -> dict[str, tuple[dict[Subset, list[StreamRun]], dict[Subset, int]]]:
    """Per CC the paced selection probes' runs per subset, and the failed ones per subset.
    Delays are one-way where every probe's clock allows it, else each relative to its flow's
    minimum, as the stream answer takes them (one comparison never mixes the two)."""
    names = set(ctx.subflows)
    rows = [m for m in ctx.runs(MeasurementPhase.SELECTION) if m.bs_mib == IMPACT_BS_MIB]
    figures = [f for m in rows if m.status == "ok" and (f := frames_of(m))]
    relative = not all(one_way(f, ctx.campaign.delta) for f in figures)
    out: dict[str, tuple[dict[Subset, list[StreamRun]], dict[Subset, int]]] = {}
    for m in rows:
        subset = frozenset(subset_of_key(m.excluded_subflow))
        if not subset or not subset <= names:
            continue
        runs, failures = out.setdefault(m.cc, ({}, {}))
        if m.status == "ok" and m.mean_goodput_mbps is not None:
            runs.setdefault(subset, []).append(stream_run(m, relative))
        else:
            failures[subset] = failures.get(subset, 0) + 1
    return out


def shared(reference: SelectionResult, cc: str) -> SelectionResult:
    """The reference CC's selection as `cc`'s: its SP*, path and figures, `shared_from` it."""
    return dataclasses.replace(reference, cc=cc, shared_from=reference.cc, contradicted=())


def state(subflows: Sequence[str], runs, failures, objective: Objective,
          **settings) -> SelectionState:
    """The selection's state over paced runs: the stream's rate and allowed losses decide what
    carries; the bulk selection's settings otherwise (no stated rates: they bound goodput)."""
    return stream_state(subflows, runs, failures, rate_mbps=objective.rate_mbps,
                        max_loss=objective.loss_allowed, **settings)

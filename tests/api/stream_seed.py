"""A finished stream campaign for the tests: paced buffer probes of two FullMesh arms whose
stored results carry frame figures and whose `frames.csv` artifacts hold the frames (a warm-up of
slow frames, lost frames at one point), stored through the service as the workers store them."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import timedelta

from models import Campaign
from probes.frames import FRAMES_ARTIFACT, FrameRecord, FrameStats, frame_stats, frames_csv
from service.algorithm.objective import Objective
from service.flows.campaign import recording
from service.flows.campaign.derive import fit_from_runs
from service.store import artifacts, campaigns, results
from service.store.measurements import MeasurementRecord
from tests.conftest import new_campaign
from tests.support import ago

STREAM = {"kind": "stream", "bitrate_mbps": 8, "delay_budget_ms": 150}
GRID = [0.25, 0.5, 1.0, 2.0]


def truth(cc: str, bs: float) -> tuple[float, float]:
    """(goodput, p99 ms): cubic carries 8 Mbit/s from 0.5 MiB and bloats with the buffer; bbr
    carries it from 0.5 MiB with a short queue, and 0.5 MiB, at the edge of carrying it, is
    passed for 1 MiB."""
    if cc == "cubic":
        return (8.0 if bs >= 0.5 else 6.0), 60 + 40 * bs
    return (8.0 if bs >= 0.5 else 5.0), 70.0 - 2 * bs


WARMUP_S = 1.0
WARMUP_DELAY_MS = 900.0  # the connection's start: frames the CDFs must leave out
LOST_AT = 10  # frames lost by cubic at the smallest buffer (of 125 after the warm-up)


def frame_records(p99: float, lost: int) -> list[FrameRecord]:
    """A probe's frames at 25/s: 1 s of warm-up with slow frames, then 125 frames whose delays
    rise evenly to `p99`, the last `lost` of them lost."""
    t0 = 1_700_000_000_000_000
    out = []
    for seq in range(25 + 125):
        send = t0 + seq * 40_000
        delay = WARMUP_DELAY_MS if seq < 25 else p99 - 10 + 10 * (seq - 25) / 124
        recv = None if seq >= 150 - lost else send + round(delay * 1000)
        out.append(FrameRecord(seq, send, recv, 40_000))
    return out


SEED_FIGURES = ("delay_mean_ms", "delay_max_ms", "delay_min_ms", "jitter_mean_ms",
                "jitter_max_ms")


def seed_figures(p99: float, lost: int) -> dict[str, float | None]:
    """The mean / max / least delay and jitter of a probe's seeded frames (after the warm-up),
    as the paced tool computes them."""
    stats = frame_stats(frame_records(p99, lost), warmup_s=WARMUP_S)
    return {k: getattr(stats, k) for k in SEED_FIGURES}


def seed_stream(session, topology_id: int,
                clock_of: Callable[[str, float, int], dict] | None = None, *,
                done: bool = True) -> Campaign:
    """A finished stream campaign: paced buffer probes whose stored results carry frames.
    `clock_of(cc, bs, run)`: more frame figures of that probe (its clock, offset, least
    delay); `done=False`: still running, for the caller to finish."""
    objective = Objective.model_validate(STREAM)
    campaign = new_campaign(session, topology_id, ccs=["cubic", "bbr"], pms=["FullMesh"],
                            buffer_grid_mib=GRID, runs=2, duration_s=5, mode="grid",
                            objective=objective)
    campaigns.set_state(session, campaign_id=campaign.id, state="running")
    t0 = ago(days=1)
    n = 0
    for cc in ("cubic", "bbr"):
        for bs in GRID:
            for run in range(2):
                gp, p99 = truth(cc, bs)
                p99 += 0.5 * run
                lost = LOST_AT if (cc, bs) == ("cubic", GRID[0]) else 0
                frames = FrameStats(frames_sent=125, frames_received=125, frames_lost=0,
                                    lost_fraction=0.0, delay_p99_ms=p99, delay_p50_ms=p99 - 5,
                                    **{**seed_figures(p99, lost),
                                       **(clock_of(cc, bs, run) if clock_of else {})})
                start = t0 + timedelta(seconds=10 * n)
                row, _ = recording.record(session, MeasurementRecord(
                    campaign_id=campaign.id, phase="buffer", pm="FullMesh", cc=cc, bs_mib=bs,
                    run=run, subflows=["U-C"], duration_s=5, goodput_mbps=[gp] * 4,
                    tool="mpcoa-paced", tool_version="1", warmup_s=WARMUP_S,
                    raw_output=json.dumps({"frames": frames.model_dump(mode="json")}),
                    started_at=start, finished_at=start + timedelta(seconds=5)))
                artifacts.store_artifacts(session, measurement_id=row.id, artifacts={
                    FRAMES_ARTIFACT: frames_csv(frame_records(p99, lost)).encode()})
                n += 1
    results.store_fits(session, campaign_id=campaign.id,
                       fits=fit_from_runs(session, campaign=campaign).fits)
    if done:
        campaigns.set_state(session, campaign_id=campaign.id, state="done")
    session.commit()
    return campaign

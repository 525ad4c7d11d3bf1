"""What a stream answer shows beside its figures: its p99 frame delay per buffer and arm, as
stored with the answer (`p99_chart`), and a stream campaign's frame delay per measured point
with its answer (`campaign_stream`: the one stored when it finished, read, never recomputed;
before that, the decision so far) and the frame charts drawn from its probes' stored
`frames.csv` files. The dashboard renders these; it computes none of them."""

from __future__ import annotations

from sqlalchemy.orm import Session

from models import Campaign, Recommendation
from probes.frames import FrameRecord, after_warmup, delay_cdf, hol_timeline, read_frames_csv

from ...algorithm.objective import objective_of
from ...algorithm.stream_choice import StreamRun, carries
from ...store import dashboard as reads
from ...store import recommendations
from .stream_answer import SEED_FIGURES, stream_answer


def p99_chart(rec: Recommendation) -> dict | None:
    """A stream answer's p99 frame delay per buffer, per arm, as it was stored with the answer
    (never recomputed), with the (1 + δ) limit over the chosen arm's best; a point that did not
    carry the stream is marked (its frames waited, its p99 is not a carried stream's)."""
    stream = (rec.outputs or {}).get("stream")
    if not stream or not stream.get("points"):
        return None
    objective = objective_of((rec.inputs or {}).get("objective"))
    rate = objective.rate_mbps if objective.is_stream else 0.0
    arms: dict[str, list[dict]] = {}
    for p in stream["points"]:
        p99s = [v for v in p.get("p99_ms") or [] if v is not None]
        runs = [StreamRun(g, v, lost) for g, v, lost in zip(
            p.get("goodput_mbps") or [], p.get("p99_ms") or [], p.get("lost_fraction") or [],
            strict=False)]
        arms.setdefault(f"{p['pm']}/{p['cc']}", []).append({
            "bs": p["bs_mib"], "p99": sum(p99s) / len(p99s) if p99s else None,
            "runs": len(p99s),
            "carries": bool(rate) and carries(runs, rate, objective.loss_allowed)})
    return {"id": f"p99-{rec.id}", "chosen": f"{rec.opm}/{rec.occ}", "obs": rec.obs_mib,
            "p99": stream.get("p99_ms"), "limit": stream.get("limit_p99_ms"),
            "best": stream.get("best_p99_ms"), "delta": rec.delta,
            "series": [{"arm": arm, "points": pts} for arm, pts in sorted(arms.items())]}


def campaign_stream(session: Session, campaign: Campaign) -> dict | None:
    """A stream campaign's frame delay per measured point and its answer: the one stored when it
    finished (read, never recomputed); before that, the decision so far."""
    objective = objective_of(campaign.objective)
    if not objective.is_stream:
        return None
    stored = _stored_stream_answer(session, campaign)
    if stored is not None:
        rec, out = stored
        points, error, answer_id = out.get("points") or [], None, rec.id
        choice = {"pm": rec.opm, "cc": rec.occ, "bs_mib": rec.obs_mib, "p99_ms": out["p99_ms"],
                  **{k: out.get(k) for k in SEED_FIGURES}}
    else:  # nothing stored yet (a running campaign), or it gave no stream answer
        answer = stream_answer(session, campaign, objective, campaign.delta)
        d = answer.decision
        points, error, answer_id = answer.points, answer.error, None
        choice = None if d is None or d.opm is None else {
            "pm": d.opm, "cc": d.occ, "bs_mib": d.obs_mib, "p99_ms": d.p99_ms, **answer.figures}
    cdfs, timeline = _frame_charts(session, campaign, choice)
    return {"objective": objective, "points": points, "error": error, "choice": choice,
            "answer_id": answer_id, "cdf_charts": cdfs, "timeline": timeline}


def _stored_stream_answer(session: Session,
                          campaign: Campaign) -> tuple[Recommendation, dict] | None:
    """The stream answer stored for the finished campaign (on its own delta), with its
    `outputs.stream`; None when it has none."""
    rec = recommendations.calibrated_recommendation_of(session, campaign_id=campaign.id)
    stream = None if rec is None else (rec.outputs or {}).get("stream")
    if not stream or rec.delta != campaign.delta:
        return None
    return rec, stream


def _frame_charts(session: Session, campaign: Campaign,
                  choice: dict | None) -> tuple[list[dict], dict | None]:
    """Per arm a frame-delay CDF at each buffer (its runs pooled, each run's warm-up left out,
    counted against frames sent), and one probe's head-of-line timeline: the choice's first
    run, else the first probe with frames. From the probes' own stored `frames.csv`; a file
    that does not parse is left out (the table above still shows its figures)."""
    per_point: dict[tuple[str, str, float], list[FrameRecord]] = {}
    runs: dict[tuple[str, str, float], int] = {}
    parsed = []
    for f in reads.campaign_frames(session, campaign.id):
        try:
            records = read_frames_csv(f.text)
        except ValueError:
            continue
        parsed.append((f, records))
        key = (f.pm, f.cc, f.bs_mib)
        # each run's own warm-up: pooled first, the earliest run's start would decide for all
        per_point.setdefault(key, []).extend(after_warmup(records, f.warmup_s))
        runs[key] = runs.get(key, 0) + 1
    chosen = (choice["pm"], choice["cc"], choice["bs_mib"]) if choice else None
    first = next((p for p in parsed if (p[0].pm, p[0].cc, p[0].bs_mib) == chosen),
                 parsed[0] if parsed else None)
    arms: dict[str, list[dict]] = {}
    for (pm, cc, bs), records in sorted(per_point.items()):
        cdf = delay_cdf(records)
        arms.setdefault(f"{pm}/{cc}", []).append({
            "bs": bs, "runs": runs[(pm, cc, bs)], "sent": len(records),
            "reached": cdf[-1][1] if cdf else 0.0, "points": cdf})
    cdfs = [{"id": f"cdf-{i}", "arm": arm, "series": series}
            for i, (arm, series) in enumerate(sorted(arms.items()))]
    timeline = None
    if first is not None:
        f, records = first
        got, lost = hol_timeline(records, f.warmup_s)
        timeline = {"id": "hol-timeline", "measurement_id": f.measurement_id, "pm": f.pm,
                    "cc": f.cc, "bs": f.bs_mib, "run": f.run, "points": got, "lost": lost}
    return cdfs, timeline

"""What the accuracy benchmarks share: probes of the emulated testbed run and read as a campaign
runs and reads them, the scenario as the product's topology, and the product's own campaign run
in-process (`accuracy.py` for bulk goodput, `stream_accuracy.py` for streams; `subflows.py`,
`apply_confirm.py` and `release.py` probe with them too)."""

from __future__ import annotations

import itertools
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

from service.state import state_of

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.scratch import scratch_dir

MIB = 2**20


def dense_grid(spec, sender: str, receiver: str, points: int, top: float) -> list[float]:
    """Log-spaced buffers from 1/8 of the smallest subflow BDP (at least 16 KiB) to `top` x the
    summed BDP, in MiB. The top must be past every arm's plateau: with the queues' delay under
    load, 4x was not (asymmetric.yaml: every arm still gained 10-31 % from 0.215 to 0.515 MiB)."""
    bdps = []
    for name in spec.subflow_names(sender, receiver):
        lo, re = name.split("-")
        rate = min(spec.rate_kbps(sender, lo, "up"), spec.rate_kbps(receiver, re, "down"))
        rtt_s = 2 * spec.path(lo, re).delay_ms / 1000.0
        bdps.append(rate * 1000 / 8 * rtt_s / MIB)
    lo, hi = max(min(bdps) / 8, 16384 / MIB), top * sum(bdps)  # 16 KiB: the kernel's floor is near
    return [round(lo * (hi / lo) ** (k / (points - 1)), 5) for k in range(points)]


def timed(spec, sender, receiver, subflows, bs_mib, duration) -> tuple[float, float | None]:
    """A probe's duration and warm-up by the product's timing rule (`flows.campaign.timing`) over
    the subflows that carry its data: as long as a campaign's probe of that configuration, never
    shorter than `duration`. (duration, None: the probes' default warm-up) where the rule does
    not lengthen it. Without it a 6 s probe over a 500 ms path is mostly slow start: the
    oracle would judge FullMesh by its first seconds while the campaign measures past them."""
    from service.algorithm.probe_duration import probe_timing
    from service.flows.campaign.timing import lengthened

    links = []
    for name in subflows:
        local, remote = name.split("-")
        bandwidth = min(spec.rate_kbps(sender, local, "up"),
                        spec.rate_kbps(receiver, remote, "down"))
        links.append((bandwidth, 2 * spec.path(local, remote).delay_ms))
    buffer = None if bs_mib <= 0 else round(bs_mib * MIB)
    timing = probe_timing(links, duration, buffer_bytes=buffer)
    return (timing.duration_s, timing.warmup_s) if lengthened(timing) else (duration, None)


def lengthens_any(spec, sender, receiver, grid, duration) -> bool:
    """Whether the timing rule lengthens any probe of this scenario (every subflow, or each one
    alone, at any buffer of the grid or autotuned): if not, fixed and rule timing are the same."""
    names = spec.subflow_names(sender, receiver)
    return any(timed(spec, sender, receiver, subset, bs, duration)[0] > duration
               for subset in [names, *([n] for n in names)] for bs in [0.0, *grid])


def probe(bed, sender, receiver, pm, cc, subflows, all_subflows, bs_mib, duration) -> float:
    """One measurement's receiver goodput (Mbit/s); PCDC excludes what is not in `subflows`.
    Timed as the campaign times the same configuration (`timed`), and read as the campaign
    reads it (`capped`)."""
    length, warmup = timed(bed.spec, sender, receiver, subflows, bs_mib, duration)
    result = probe_result(bed, sender, receiver, cc, subflows, all_subflows, bs_mib, length,
                          warmup_s=warmup)
    # the mean after the warm-up
    return capped(bed.spec, sender, receiver, subflows, result.goodput_mbps)


def capped(spec, sender, receiver, subflows, mbps: float) -> float:
    """A goodput as the product stores it: a window a little above what the subflows' links
    carry held a release of earlier data and is capped at their rate (`capacity.capped_mean`;
    on shared.yaml 5 s windows read 8.3-9.0 Mbit/s through an 8 Mbit/s uplink, a 30 s probe
    7.55). Applied to the oracle's cells too, recorded ones included, so the judge and the
    campaign read a probe alike."""
    from service.algorithm.capacity import LinkCapacity, capped_mean

    rates = LinkCapacity.of(topology_of(spec, sender, receiver)[0])
    if not set(subflows) <= set(rates.ends):
        return mbps  # recorded for another scenario's subflows: nothing to bound them by
    return capped_mean(mbps, rates.max_mbps(subflows))


def probe_result(bed, sender, receiver, cc, subflows, all_subflows, bs_mib, duration, *,
                 profile=None, warmup_s=None):
    """One usable measurement (`MeasurementResult`); PCDC excludes what is not in `subflows`.
    `profile`: bulk by default; a paced one runs on the paced tool (frame figures), as a stream
    campaign's probes do. `warmup_s`: None, the probes' default."""
    from probes.base import MeasurementRequest, ProbeError

    allowed = None if set(subflows) == set(all_subflows) else list(subflows)
    request = MeasurementRequest(
        sender=sender,
        receiver=receiver,
        allowed_subflows=allowed,
        cc=cc,
        buffer_bytes=None if bs_mib <= 0 else round(bs_mib * MIB),
        duration_s=duration,
        warmup_s=warmup_s,
        path_manager="PCDC" if allowed else "FullMesh",
        **({"profile": profile} if profile is not None else {}),
    )
    backend = "paced" if profile is not None and profile.kind == "paced" else "iperf3"
    for _attempt in range(3):  # as a campaign does: a failed or unusable probe is run again
        try:
            # waits for quiet sites; aborts its connections after
            result = bed.measure(request, backend=backend)
        except ProbeError as exc:
            why = str(exc)
            continue
        if (why := result.failure_reason()) is None:
            return result
    raise RuntimeError(f"probe unusable three times: {why}")


def best_subset_of(measure, names: list[str], log, describe=None) -> list[str]:
    """PCDC's best proper subset of `names` by `measure(subset)`: every one when there are at most
    4 subflows; beyond, forward selection (the best single subflow, then add the one that helps
    most while one helps), so that one fast subflow alone is always tried: on UNIS-HiN and SRL-HU
    thin subflows beside a fast one cost more than they add (head-of-line blocking). `describe`
    turns a score into its log text (default: a goodput, negative for unusable)."""
    if len(names) <= 4:
        tried = {tuple(c): measure(list(c)) for k in range(1, len(names))
                 for c in itertools.combinations(names, k)}
    else:
        tried, current, best = {}, [], -1.0
        while len(current) < len(names) - 1:
            for n in names:
                if n not in current:
                    subset = tuple(sorted([*current, n], key=names.index))
                    tried[subset] = measure(list(subset))
            step = max((s for s in tried if len(s) == len(current) + 1), key=tried.get)
            if tried[step] <= best:
                break
            current, best = list(step), tried[step]
    for subset, tp in tried.items():
        text = describe(tp) if describe else ("unusable" if tp < 0 else f"{tp:.2f} Mbit/s")
        log(f"    subset {list(subset)}: {text}")
    return list(max(tried, key=tried.get))


def topology_of(spec, sender: str, receiver: str):
    """The scenario as the product's topology (`TopologySpec`) and its subflows' RTTs (ms), as a
    user would enter them."""
    from service.algorithm.topology import TopologySpec

    topo = TopologySpec.model_validate({
        role: {"name": name, "isps": [
            {"name": i.name, "label": i.label,
             "down_kbps": spec.rate_kbps(name, i.label, "down"),
             "up_kbps": spec.rate_kbps(name, i.label, "up")}
            for i in spec.site(name).isps]}
        for role, name in (("local", sender), ("remote", receiver))
    })
    return topo, {n: 2 * spec.path(*n.split("-")).delay_ms for n in topo.subflow_names()}


def run_campaign(spec, sender, receiver, ccs, grid, runs, duration, delta, mode="grid",
                 objective=None) -> dict:
    """The product's own campaign, in-process on a fresh SQLite file; its recommendation. Grid,
    runs, duration or mode None: the product's defaults. `objective`: a stream's (`Objective`),
    else bulk."""
    from service.db import session_scope, upgrade
    from service.flows.campaign import dispatch
    from service.flows.campaign.plan import CampaignParameters
    from service.flows.campaign.runner import run_campaign as run
    from service.settings import get_settings
    from service.store import campaigns, inventory, recommendations

    settings = get_settings()
    upgrade(settings.effective_database_url)
    topo, rtts = topology_of(spec, sender, receiver)
    dispatch.register_executor("inprocess", lambda *_: None)  # this script runs it
    with session_scope() as s:
        row = inventory.ensure_topology(s, spec=topo, rtts_ms=rtts)
        params = CampaignParameters(ccs=ccs, buffer_grid_mib=grid, runs=runs,
                                    duration_s=duration, delta=delta, mode=mode,
                                    objective=objective)
        cid = dispatch.start_campaign(s, topology_id=row.id, params=params, reason="benchmark",
                                      settings=settings).id
    started = time.monotonic()
    state = run(cid, settings=settings)
    wall = time.monotonic() - started
    with session_scope() as s:
        c = campaigns.get_campaign(s, campaign_id=cid)
        if state != "done" or c.recommendation_id is None:
            raise RuntimeError(f"campaign {cid} {state}: {c.error}")
        rec = recommendations.get_recommendation(s, recommendation_id=c.recommendation_id)
        return {
            "pm": rec.opm, "cc": rec.occ, "obs_mib": rec.obs_mib, "otp_mbps": rec.otp_mbps,
            "subflows": rec.outputs.get("subflows_used"), "flags": rec.quality_flags,
            "probe_seconds": state_of(c).budget.used_s, "probes": state_of(c).budget.done,
            "wall_s": wall, "interval": stated_interval(rec.outputs or {}),
            "outputs": rec.outputs or {}, "grid": list(c.buffer_grid_mib),
            "runs": c.runs, "extra_rounds": state_of(c).budget.extra_rounds,
            "spent": state_of(c).budget.to_dict()["spent"] or None,
            "t_star_runs": getattr(getattr(state_of(c).sweep_decision, "decision", None),
                                   "t_star_runs", None),
            "mode": c.mode, "topology_id": c.topology_id,
        }


def stated_interval(outputs: dict) -> list[float] | None:
    """The interval the answer states for OTP (Mbit/s), [low, high]; None when it states none.
    Read by shape, not by one key, so the benchmark follows the answer as it grows: any output
    whose key names OTP and an interval (or CI), given as a pair or as low/high fields; first
    the answer's promise (where one fresh probe of the answer should land)."""
    promise = outputs.get("promise") or {}
    if promise.get("low_mbps") is not None and promise.get("high_mbps") is not None:
        return [float(promise["low_mbps"]), float(promise["high_mbps"])]
    for key, value in outputs.items():
        k = key.lower()
        if "otp" not in k or not ("interval" in k or "ci" in k.split("_")):
            continue
        if isinstance(value, list | tuple) and len(value) == 2:
            lo, hi = value
        elif isinstance(value, dict):
            lo = next((value[n] for n in ("low", "lo", "lower") if n in value), None)
            hi = next((value[n] for n in ("high", "hi", "upper") if n in value), None)
        else:
            continue
        if isinstance(lo, int | float) and isinstance(hi, int | float) and lo <= hi:
            return [float(lo), float(hi)]
    return None


def run_scenarios(args, scenario: Callable, prefix: str) -> int:
    """`scenario(path, args, log)` for each of `args.scenarios`, one JSON line each on stdout,
    the log on stderr unless `args.quiet`; the product's database and files in a folder of this
    run's own. One scenario that cannot be measured does not stop the rest: its line says why."""
    data = scratch_dir(prefix)
    os.environ["MPCOA_DATABASE_URL"] = f"sqlite:///{data / 'bench.sqlite3'}"
    os.environ["MPCOA_DATA_DIR"] = str(data)

    def log(msg: str) -> None:
        if not args.quiet:
            print(msg, file=sys.stderr, flush=True)

    for path in args.scenarios:
        log(f"scenario {path}, stream {args.stream_mbps:g} Mbit/s")
        try:
            row = scenario(path, args, log)
        except Exception as exc:
            row = {"scenario": path.stem, "error": str(exc)}
        print(json.dumps(row), flush=True)
    return 0

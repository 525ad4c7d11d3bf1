"""`mpcoa calibrate | worker | beat`: run campaigns, in this process or on Celery workers."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Literal

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from sqlalchemy.exc import IntegrityError

from api.schemas import MAX_ID
from cli import output
from cli.errors import EXIT_FAILED, emit_json, fail, service_failure, validation_message
from models import FINAL_CAMPAIGN_STATES
from service.algorithm.objective import Objective
from service.db import session_scope, upgrade
from service.errors import ServiceError
from service.flows.campaign import dispatch, mptcp_gate
from service.flows.campaign.plan import CampaignParameters
from service.settings import get_settings
from service.state import state_of
from service.store import campaigns as campaign_store
from service.store import recommendations


def _progress_bar(on_stderr: bool = False) -> Progress:
    """The campaign's bar; on stderr when stdout carries the JSON result."""
    return Progress(
        TextColumn("[bold]campaign {task.fields[cid]}[/] {task.fields[what]}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total} probes"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=Console(stderr=True) if on_stderr else None,
        disable=output.state.quiet,
    )


def calibrate(
    topology_id: Annotated[
        int | None, typer.Argument(min=1, max=MAX_ID, help="stored topology id (or --batch FILE)")
    ] = None,
    ccs: Annotated[
        list[str] | None, typer.Option("--cc", help="congestion control (repeat)")
    ] = None,
    buffers: Annotated[
        list[float] | None, typer.Option("--buffer", help="buffer grid point, MiB (repeat)")
    ] = None,
    runs: Annotated[int | None, typer.Option(min=1, max=100)] = None,
    duration: Annotated[float | None, typer.Option(
        "--duration-s", min=0.5, max=3600, help="T, each probe's length, s")] = None,
    delta: Annotated[float, typer.Option(min=0, max=0.99)] = 0.07,
    budget: Annotated[float | None, typer.Option(
        min=1, help="probe-seconds budget (adaptive default: what grid mode would probe)")] = None,
    mode: Annotated[
        Literal["grid", "adaptive"] | None,
        typer.Option(help="grid (every buffer, the paper's sweep) or adaptive (probes chosen "
                     "from what was measured); default: MPCOA_CAMPAIGN_MODE, adaptive"),
    ] = None,
    batch: Annotated[
        Path | None,
        typer.Option(help="calibrate every topology id listed in FILE (one a line), in a "
                     "shuffled order; resumable", dir_okay=False),
    ] = None,
    state: Annotated[
        Path | None,
        typer.Option(help="the batch's state file (default FILE.state.json): its seed, order "
                     "and campaigns; present = resume", dir_okay=False),
    ] = None,
    seed: Annotated[
        int | None, typer.Option(min=0, max=2**31 - 1, help="the batch order's seed")
    ] = None,
    stream_mbps: Annotated[
        float | None,
        typer.Option(help="optimise a stream of this rate (frames at 25/s) for p99 frame "
                     "delay instead of bulk goodput"),
    ] = None,
    frame_rate: Annotated[float | None, typer.Option(help="stream: frames per second")] = None,
    frame_size: Annotated[int | None, typer.Option(help="stream: bytes per frame")] = None,
    delay_budget_ms: Annotated[
        float | None, typer.Option(help="stream: a frame later than this is late")] = None,
    probe_tool: Annotated[
        str | None,
        typer.Option(help="the tool every phase's probes run on: auto, netperfmeter or iperf3 "
                     "(or a registered tool; default: MPCOA_PROBE_TOOL, auto)"),
    ] = None,
    as_json: Annotated[bool, typer.Option(
        "--json", help="print the campaign and its answer as JSON (progress on stderr)")] = False,
    old_duration: Annotated[float | None, typer.Option(
        "--duration", min=0.5, max=3600, hidden=True, help="old spelling of --duration-s")]
    = None,
) -> None:
    """Run a calibration campaign for a topology with a progress bar; print the recommendation.
    With --batch, one campaign per listed topology, in a shuffled order (seed stored)."""
    duration = duration if old_duration is None else old_duration
    settings = get_settings()
    if settings.is_embedded:
        upgrade(settings.effective_database_url)
    # In-process, this command is the executor: it runs the campaign in the foreground.
    dispatch.register_executor("inprocess", lambda *_: None)
    try:
        params = CampaignParameters(
            ccs=ccs, buffer_grid_mib=buffers, runs=runs, duration_s=duration, delta=delta,
            probe_seconds_budget=budget, mode=mode,
            objective=stream_objective(stream_mbps, frame_rate, frame_size, delay_budget_ms),
            probe_tool=probe_tool,
        )
    except ValidationError as exc:
        fail(validation_message(exc))
    if (topology_id is None) == (batch is None):
        fail("give a TOPOLOGY_ID or --batch FILE (one of them)")
    if batch is None:
        if state is not None or seed is not None:
            fail("--state and --seed belong to --batch")
        cid = _start(topology_id, params, settings)
        _print_plan(cid, err=as_json)
        state_ = _run(cid, settings, on_stderr=as_json)
        if as_json:
            _emit_outcome(cid, state_)
        _print_outcome(cid, state_)
        return
    if as_json:
        fail("--json is for one campaign (TOPOLOGY_ID); a batch's state file has its campaigns")
    _run_batch(batch, state or batch.with_name(batch.name + ".state.json"), seed, params,
               settings)


def _start(topology_id: int, params: CampaignParameters, settings) -> int:
    try:
        with session_scope() as s:
            mptcp_gate.check(s, topology_id, settings)  # refused while MPTCP cannot work
            campaign = dispatch.start_campaign(
                s, topology_id=topology_id, params=params, reason="cli", settings=settings
            )
            return campaign.id
    except ServiceError as exc:
        service_failure(exc)
    except IntegrityError:  # the database's one-active-campaign-per-topology index
        fail(f"topology {topology_id} has a queued or running campaign; cancel it or wait")
    raise AssertionError("fail() exits")


def _run(cid: int, settings, on_stderr: bool = False) -> str:
    """Run (or poll) one campaign to its end with a progress bar; its final state."""
    with _progress_bar(on_stderr) as bar:
        task = bar.add_task("", total=None, cid=cid, what="starting")

        def show(campaign, step):
            bar.update(
                task,
                total=state_of(campaign).budget.planned,
                completed=state_of(campaign).budget.done,
                what=step.describe() if step else campaign.state,
            )

        if settings.executor == "inprocess":
            from service.flows.campaign.runner import run_campaign

            return run_campaign(cid, settings=settings, on_progress=show)
        # dispatched to the sender site's Celery queue when the campaign was committed
        return _poll(cid, show)


def _run_batch(batch: Path, state_path: Path, seed: int | None, params, settings) -> None:
    """Flent's batch: every listed topology once, in a seeded shuffled order; the state file
    after each campaign, so an interrupted batch resumes where it stopped."""
    from service.flows.campaign.batch import BatchState, next_topology, read_topology_ids

    try:
        ids = read_topology_ids(batch.read_text())
        if state_path.exists():
            bstate = BatchState.from_json(state_path.read_text())
            if sorted(bstate.order) != sorted(ids):
                fail(f"{state_path}: made for another list of topologies; remove it to start "
                     "anew")
            if seed is not None and seed != bstate.seed:
                fail(f"{state_path}: the batch's seed is {bstate.seed}, not {seed}")
            typer.echo(f"resuming batch {batch} (seed {bstate.seed}) from {state_path}")
        else:
            bstate = BatchState.new(ids, seed)
            bstate.save(state_path)
            typer.echo(f"batch {batch}: {len(ids)} topologies, seed {bstate.seed}, order "
                       f"{' '.join(map(str, bstate.order))}; state in {state_path}")
    except ServiceError as exc:
        fail(f"{batch}: {'.'.join(map(str, exc.loc))}: {exc.message}")
    except OSError as exc:
        fail(f"{exc.filename}: {exc.strerror or exc}")
    handled: set[int] = set()
    failed = 0
    while True:
        with session_scope() as s:
            nxt = next_topology(s, bstate, handled)
        if nxt is None:
            break
        tid, cid = nxt
        handled.add(tid)
        if cid is None:
            try:
                cid = _start(tid, params, settings)
            except typer.Exit:  # an unknown or busy topology: said, and the batch goes on
                failed += 1
                continue
            bstate.campaigns[tid] = cid
            bstate.save(state_path)
        typer.echo(f"topology {tid}: campaign {cid}")
        try:
            _print_outcome(cid, _run(cid, settings))
        except typer.Exit:
            failed += 1
    done = len(bstate.order) - failed
    typer.echo(f"batch {batch}: {done} of {len(bstate.order)} topologies calibrated "
               f"(seed {bstate.seed})")
    if failed:
        raise typer.Exit(EXIT_FAILED)


def stream_objective(mbps: float | None, rate: float | None, size: int | None,
                     budget_ms: float | None) -> Objective | None:
    """The stream the options describe, or None (bulk) when none of them is given."""
    if mbps is None and rate is None and size is None and budget_ms is None:
        return None
    return Objective(kind="stream", bitrate_mbps=mbps, frame_rate_hz=rate,
                     frame_size_bytes=size, delay_budget_ms=budget_ms)


def _poll(cid: int, show) -> str:
    while True:
        with session_scope() as s:
            campaign = campaign_store.get_campaign(s, campaign_id=cid)
            show(campaign, None)
            if campaign.state in FINAL_CAMPAIGN_STATES:
                return campaign.state
        time.sleep(1.0)


def _print_plan(cid: int, err: bool = False) -> None:
    """The campaign's plan as stored: mode, CCs, grid, runs and duration, and its budget."""
    if output.state.quiet:
        return
    with session_scope() as s:
        c = campaign_store.get_campaign(s, campaign_id=cid)
        budget_s = state_of(c).budget.cap_s
        typer.echo(
            f"campaign {cid}: {c.mode}, CCs {', '.join(c.ccs)}, {len(c.buffer_grid_mib)} buffers "
            f"({min(c.buffer_grid_mib):g}-{max(c.buffer_grid_mib):g} MiB), {c.runs} runs x "
            f"{c.duration_s:g} s; budget "
            + ("none" if budget_s is None else f"{budget_s:.0f} probe-seconds"), err=err)


def _emit_outcome(cid: int, state: str) -> None:
    """The campaign and its answer as `GET /campaigns/{id}` and the recommendation give them;
    a campaign that did not finish exits 1 (its error in the campaign's `error`)."""
    from api.schemas import CampaignOut, RecommendationOut

    with session_scope() as s:
        campaign = campaign_store.get_campaign(s, campaign_id=cid)
        rec = (recommendations.get_recommendation(s, recommendation_id=campaign.recommendation_id)
               if campaign.recommendation_id is not None else None)
        emit_json({"campaign": CampaignOut.of(campaign).model_dump(mode="json"),
                   "recommendation": RecommendationOut.of(rec).model_dump(mode="json")
                   if rec is not None and state == "done" else None})
    raise typer.Exit(0 if state == "done" else EXIT_FAILED)


def _print_outcome(cid: int, state: str) -> None:
    with session_scope() as s:
        campaign = campaign_store.get_campaign(s, campaign_id=cid)
        if state != "done":
            fail(f"campaign {cid} {state}" + (f": {campaign.error}" if campaign.error else ""),
                 EXIT_FAILED)
        rec = recommendations.get_recommendation(
            s, recommendation_id=campaign.recommendation_id
        )
        promise = (rec.outputs or {}).get("promise") or {}
        if promise.get("statement"):
            typer.echo(promise["statement"])
        stream = (rec.outputs or {}).get("stream")
        if stream:
            typer.echo(f"stream: p99 frame delay {_fmt(stream.get('p99_ms'))} ms at OBS "
                       f"(the arm's best {_fmt(stream.get('best_p99_ms'))} ms)")
        typer.echo(
            f"campaign {cid} done: OPM={rec.opm} OCC={rec.occ} OBS={_fmt(rec.obs_mib)} MiB "
            f"OTP={_fmt(rec.otp_mbps)} Mbit/s (T*={_fmt(rec.tp_max_mbps)}); "
            f"flags: {', '.join(rec.quality_flags) or 'none'}"
        )
        budget_s = state_of(campaign).budget.cap_s
        typer.echo(f"probed {state_of(campaign).budget.used_s:.0f} probe-seconds in "
                   f"{state_of(campaign).budget.done} probes"
                   + ("" if budget_s is None else f" of a {budget_s:.0f} probe-second budget"))


def _fmt(value: float | None) -> str:
    return "unknown" if value is None else f"{value:.3f}"


def worker(
    site: Annotated[list[str] | None, typer.Option(
        "--site", help="serve this site's queue (repeat); none: the control queue only (the "
        "control host's worker)")] = None,
    isp: Annotated[
        list[str] | None,
        typer.Option("--isp", help="a real site's ISP, as `site add` gives it less the "
                     "rates: LABEL@ADDRESS (IPv4 or IPv6, one family for every ISP) or "
                     "LABEL@INTERFACE, e.g. K@eth1 (repeat; needs one --site)"),
    ] = None,
    check: Annotated[
        bool, typer.Option("--check", help="print the site's capability report and exit (0: "
                           "ready, 1: problems); no broker needed")
    ] = False,
    control: Annotated[bool, typer.Option(help="also consume the control queue")] = True,
    as_json: Annotated[bool, typer.Option(
        "--json", help="print the site's capability report as JSON")] = False,
) -> None:
    """A Celery worker for the given sites' queues (site.<name>); needs MPCOA_BROKER_URL.

    A real site's worker names its ISPs (``--isp``); it checks them, reports the host's
    capabilities (stored for ``GET /sites/{id}/capabilities``) and then serves its queue.
    With --isp it runs its own end of every probe (two-sided probes); without, both ends on
    the emulated testbed."""
    import re

    from probes.vocabulary import NAME_PATTERN

    site = site or []
    if not site and not control:
        fail("--no-control needs a --site: the worker would serve no queue")
    for name in site:
        if not name:  # compose's site-worker with MPCOA_SITE unset: no silent default site
            fail("--site is empty: name the site this host is (compose: set MPCOA_SITE)")
        if not re.fullmatch(NAME_PATTERN, name):
            fail(f"--site: {name!r} is not a short identifier")
    if (isp or check) and len(site) != 1:
        fail("--isp/--check: give exactly one --site (the site this host is)")
    report = None
    if check:
        report = _site_report(site[0], isp or [], as_json=as_json)
        raise typer.Exit(EXIT_FAILED if report["problems"] else 0)
    if isp:  # a bad --isp is refused before anything else
        _resolve(site[0], isp)
    from probes.tools.ports import probe_port_range

    try:  # a bad range would fail every probe this worker runs: refused at its start instead
        probe_port_range()
    except ValueError as exc:
        fail(str(exc))
    settings = get_settings()
    if not settings.broker_url:
        fail("MPCOA_BROKER_URL is not set: a worker needs a broker (redis://...)")
    if isp:
        report = _site_report(site[0], isp, passive_node=True, as_json=as_json)
    if report is not None and report["problems"]:
        fail("this host cannot probe for site " + site[0] + ": " + "; ".join(report["problems"]))
    if isp:  # this worker runs its own end of every probe (two-sided probes)
        from probes.site.local import resolve_local_site
        from workers.site import set_local_site

        set_local_site(resolve_local_site(site[0], list(isp)))  # validated by the report
    from workers.app import CONTROL_QUEUE, app, site_queue

    queues = [site_queue(n) for n in site] + ([CONTROL_QUEUE] if control else [])
    # solo pool: the probe runs in the worker process itself, one at a time per site, and a
    # killed worker takes its probe with it (the task is delivered again: acks_late).
    # a site worker is mpcoa-SITE@host (the site compose file's health check pings it); the
    # control host's, control@host
    node = f"mpcoa-{'-'.join(site)}@%h" if site else "control@%h"
    app.worker_main([
        "worker", "-Q", ",".join(queues), "-P", "solo", "-n", node, "--loglevel", "INFO",
    ])


def _site_report(name: str, isp_options: list[str], passive_node: bool = False,
                 as_json: bool = False) -> dict:
    """Resolve the site's ISPs on this host, print its capability report and store it (when the
    site is registered and the database reachable: a report is never a reason not to start).
    `passive_node`: start the site's long-lived passive node of each tool served by one
    (NetPerfMeter 2.x), where the tool runs here, and name its ports in the report."""
    from probes.site.local import capability_report
    from probes.tools.netperfmeter import default_binary
    from probes.tools.registry import TOOLS
    from service.store import artifacts as artifact_store

    local = _resolve(name, isp_options)
    report = capability_report(local, netperfmeter=default_binary())
    for tool in TOOLS.values() if passive_node else ():
        if tool.node_key is not None and report["allows"].get(tool.name):
            report[tool.node_key] = _start_passive_node(tool, local)
    report["config"] = _current_config()  # what an apply would replace (GET .../apply-plan)
    if as_json:
        emit_json(report)
    else:
        _print_report(report)
    for tool, version in report["tools"].items():
        if tool in report["allows"]:
            what = ", ".join(report["allows"][tool]) or "nothing here"
            typer.echo(f"tool {tool}: {version or 'not found'}; measures {what}", err=True)
    for note in report["tool_notes"]:
        typer.echo(f"note: {note}", err=True)
    for problem in report["problems"]:
        typer.echo(f"problem: {problem}", err=True)
    try:
        with session_scope() as s:
            artifact_store.save_capabilities(s, site_name=name, report=report)
        typer.echo(f"report stored for site {name}", err=True)
    except ServiceError as exc:
        typer.echo(f"report not stored: {exc.message}", err=True)
    except Exception as exc:
        typer.echo(f"report not stored: database unavailable ({type(exc).__name__})", err=True)
    return report


def _print_report(report: dict) -> None:
    """The capability report for people: ready or not, where each ISP is, what the kernel
    offers (the tools' lines follow on stderr; --json has every field)."""
    problems = report["problems"]
    output.say(f"site {report['site']}: " + ("ready" if not problems else
                                             f"{len(problems)} problem(s)")
               + f"; {report['address_family'] or 'no'} addresses: "
               + (", ".join(f"{k}@{v}" for k, v in report["endpoints"].items()) or "none"))
    output.say(f"kernel {report['kernel']}, MPTCP "
               + ("enabled" if report["mptcp_enabled"] else "DISABLED")
               + f", path manager {report['pm_type'] or 'unknown'}; congestion controls: "
               + (", ".join(report["congestion_controls"]) or "none"))


def _resolve(name: str, isp_options: list[str]):
    from probes.site.local import resolve_local_site

    try:
        return resolve_local_site(name, isp_options)
    except ValueError as exc:  # a bad site: one clear line, status 1, no traceback
        fail(str(exc), EXIT_FAILED)


def _start_passive_node(tool, local) -> dict | None:
    """The site's passive node of `tool`, for the worker's life (it dies with the worker:
    PR_SET_PDEATHSIG); None, said, when it does not start (the site then probes on iperf3)."""
    import atexit

    from probes.base import ProbeError

    try:
        node = tool.start_node(local.isps)
    except ProbeError as exc:
        typer.echo(f"{tool.name} passive node not started: {exc}", err=True)
        return None
    atexit.register(node.stop)
    typer.echo(f"{tool.name} passive node on port {node.port} (pid {node.pid})", err=True)
    return node.describe()


def _current_config() -> dict | None:
    from probes.base import ProbeError
    from probes.site.config import read_state_for_plan

    try:
        return read_state_for_plan(None)
    except ProbeError:
        return None


def beat() -> None:
    """Celery beat: scheduled recalibrations and resuming stalled campaigns (run exactly one).

    Its schedule file and pid file (a health check's) are MPCOA_DATA_DIR's celerybeat-schedule
    and celerybeat.pid."""
    settings = get_settings()
    if not settings.broker_url:
        fail("MPCOA_BROKER_URL is not set: beat needs a broker (redis://...)")
    from workers.app import app

    try:
        settings.data_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        fail(f"MPCOA_DATA_DIR {settings.data_dir}: {exc.strerror}", EXIT_FAILED)
    app.start(["beat", "--loglevel", "INFO", "-s", str(settings.data_dir / "celerybeat-schedule"),
               "--pidfile", str(settings.data_dir / "celerybeat.pid")])


def register(app: typer.Typer) -> None:
    app.command("calibrate")(calibrate)
    app.command("worker")(worker)
    app.command("beat")(beat)

"""`mpcoa apply TOPOLOGY_ID`: show the plan (--dry-run), apply the newest answer to both sites,
confirm it, roll it back; `--site NAME` runs one site's side on this host (a real site)."""

from __future__ import annotations

import time
from typing import Annotated

import typer

from api.schemas import MAX_ID
from cli.errors import EXIT_FAILED, PREFIX, emit_json, fail, service_failure
from cli.output import JsonOpt
from service.db import session_scope, upgrade
from service.errors import ServiceError
from service.flows.applying import failover_watch
from service.settings import get_settings


def _print_plan(plan: dict) -> None:
    a = plan["answer"]
    typer.echo(f"topology {plan['topology_id']}, answer {plan['recommendation_id']} "
               f"({a['kind']}): OPM={a['opm']} OCC={a['occ']} OBS={a['obs_mib']} MiB "
               f"OTP={a['otp_mbps']} Mbit/s")
    typer.echo(f"subflows carrying data: {', '.join(plan['used'])}; standbys (backup, in "
               f"failover order): {', '.join(plan['standbys']) or 'none'}")
    if plan["dropped"]:
        typer.echo(f"not expressible per address, left as backup: {', '.join(plan['dropped'])}")
    typer.echo(f"an application connects from {plan['connect']['source']} to "
               f"{plan['connect']['destination']}")
    for site in plan["sites"]:
        typer.echo(f"\nsite {site['site']} ({site['role']}, {site['where']}"
                   + (f", namespace {site['namespace']}" if site["namespace"] else "") + ")")
        for c in site["changes"]:
            mark = {"set": "*", "none": " ", "needs_host": "!", "advice": "~"}[c["action"]]
            typer.echo(f"  {mark} [{c['scope']:<11}] {c['kind']:<8} {c['key']:<34} "
                       f"{c['before']!s:>24} -> {c['after']!s}"
                       + (f"  ({c['regime']})" if c.get("regime") else ""))
            if c.get("kept"):
                typer.echo(f"      planned {c['planned']}: {c['kept']}")
    typer.echo("\n* changes   ! host-wide, too low, not changed from a namespace   "
               "~ for applications that set their own socket buffers")
    if plan["notes"]:
        typer.echo(f"notes: {', '.join(plan['notes'])}")
    if not plan["measured"]["measured"]:
        typer.echo(f"not measured: {plan['measured']['why']} (apply refuses it without "
                   "--allow-unmeasured)")
    buffer = plan["buffer"]
    for regime in (buffer.get("regimes") or {}).values():
        typer.echo(f"{regime['regime']}: {regime['bytes']} bytes, for {regime['for']}")
    if buffer.get("capped_by"):
        typer.echo(f"buffer: {buffer['planned_bytes']} bytes instead of the answer's "
                   f"{buffer['answer_bytes']}: {buffer['why']}")


def apply(
    topology_id: Annotated[int, typer.Argument(min=1, max=MAX_ID, help="stored topology id")],
    dry_run: Annotated[bool, typer.Option("--dry-run", help="show the plan, change nothing")]
    = False,
    rollback: Annotated[bool, typer.Option("--rollback", help="restore the sites as before "
                                           "the first apply; a repeated one says 'already "
                                           "rolled back' and exits 0")] = False,
    site: Annotated[str | None, typer.Option("--site", help="only this site's side, on this "
                                             "host (a real site's operator)")] = None,
    confirm: Annotated[bool, typer.Option(help="run the confirmation transfer")] = True,
    seconds: Annotated[float, typer.Option("--confirm-s", min=5, max=120,
                                           help="confirmation length, s")] = 10.0,
    watch: Annotated[bool | None, typer.Option(
        "--watch/--no-watch", help="the failover watchers, once applied: with site workers "
        "they start them (default: yes); embedded, --watch keeps this command in the "
        "foreground watching until SIGINT/SIGTERM")] = None,
    hold_s: Annotated[float, typer.Option("--hold-s", min=0.5, max=600,
                                          help="a failed link must stay up this long before "
                                          "it is used again, s")] = 10.0,
    timeout_s: Annotated[float, typer.Option("--timeout-s", min=1, max=3600,
                                             help="with site workers: how long to wait for "
                                             "every site's report, s")] = 600.0,
    allow_unmeasured: Annotated[bool, typer.Option(
        "--allow-unmeasured", help="apply an answer no probe measured (a provisional one) "
        "too; without it such an answer is refused")] = False,
    auto_reapply: Annotated[bool, typer.Option(
        "--auto-reapply", help="when a recalibration gives a new answer, apply it too, "
        "through the same plan and checks (MPCOA_REAPPLY_ON_RECALIBRATION); its confirmation "
        "and watchers as asked here")] = False,
    lower_ceilings: Annotated[bool, typer.Option(
        "--lower-ceilings", help="set the autotuning ceiling (tcp_rmem/tcp_wmem max) exactly "
        "as planned, even below a higher one a site has; without it a higher ceiling is "
        "kept")] = False,
    as_json: JsonOpt = False,
    old_seconds: Annotated[float | None, typer.Option("--seconds", min=5, max=120, hidden=True,
                                                      help="old spelling of --confirm-s")] = None,
    old_timeout: Annotated[float | None, typer.Option("--timeout", min=1, max=3600, hidden=True,
                                                      help="old spelling of --timeout-s")] = None,
) -> None:
    """Apply the topology's newest answer to its sites (endpoints, limits, CC, buffers)."""
    seconds = seconds if old_seconds is None else old_seconds
    timeout_s = timeout_s if old_timeout is None else old_timeout
    from service.flows.applying import apply as flow
    from service.flows.applying.apply_plan import build_plan

    settings = get_settings()
    if settings.is_embedded:
        upgrade(settings.effective_database_url)
    try:
        if dry_run:
            with session_scope() as s:
                plan = build_plan(s, topology_id, lower_ceilings=lower_ceilings)
            emit_json(plan) if as_json else _print_plan(plan)
            return
        with session_scope() as s:
            if rollback:
                row = flow.start_rollback(
                    s, topology_id=topology_id, by_hand=site is not None,
                    site_hosts=site is not None or bool(settings.broker_url))
            elif site is None or _no_open_apply(s, topology_id):
                row = flow.start_apply(s, topology_id=topology_id, confirm=confirm,
                                       seconds=seconds, watch=watch is not False,
                                       hold_s=hold_s, by_hand=site is not None,
                                       allow_unmeasured=allow_unmeasured,
                                       auto_reapply=auto_reapply,
                                       lower_ceilings=lower_ceilings,
                                       site_hosts=site is not None or bool(settings.broker_url))
            else:
                from service.store import applied

                row = applied.latest_apply(s, topology_id=topology_id)
            apply_id, plan, started = row.id, row.plan, row.state
    except ServiceError as exc:
        service_failure(exc)
    if rollback and started != "rolling_back":  # rolled back meanwhile (or never in force)
        typer.echo(f"apply {apply_id}: {started}; already rolled back" + _why_nothing(started))
        raise typer.Exit(0)
    holding = bool(watch) and not rollback and (site is not None or not settings.broker_url)
    stopping = _stop_on_signals() if holding else None
    if site is not None:  # this host is the site: no namespace
        names = [e["site"] for e in plan["sites"]]
        if site not in names:
            fail(f"--site {site!r}: the topology's sites are {', '.join(names)}")
        run = flow.rollback_site if rollback else flow.apply_site
        report = run(apply_id, site, namespace=None)
        emit_json(report) if as_json else typer.echo(_site_line(site, report))
        if holding and report["state"] == "applied":
            _watch_in_foreground(lambda: failover_watch.start(
                apply_id, site, namespace=None, this_site_only=True), stopping)
        raise typer.Exit(0 if report["state"] == ("rolled_back" if rollback else "applied")
                         else EXIT_FAILED)
    if settings.broker_url:
        flow.dispatch(apply_id, plan, "rollback" if rollback else "apply", settings)
        # a rollback starts from an applied row: waiting only while it is `applying` would
        # return before the site workers have rolled back
        state = _wait(apply_id, done=_rolled_back if rollback else _not_applying,
                      timeout_s=timeout_s)
    elif rollback:
        flow.run_rollback(apply_id)
        state = _wait(apply_id, done=_not_applying, timeout_s=0)
    else:
        flow.run_apply(apply_id, watch_here=bool(watch))
        state = _wait(apply_id, done=_not_applying, timeout_s=0)
    _print_outcome(apply_id, as_json)
    if holding and state == "applied":
        _watch_in_foreground(lambda: None, stopping)  # run_apply started them here
    if rollback and settings.broker_url and state == "rolling_back":
        typer.echo(PREFIX + _not_rolled_back(apply_id, timeout_s), err=True)
        raise typer.Exit(EXIT_FAILED)
    raise typer.Exit(0 if state in ("applied", "rolled_back") else EXIT_FAILED)


def _stop_on_signals():
    """An event SIGINT and SIGTERM set from now on (instead of ending the process): taken
    before the apply starts the watchers, so a signal at any moment stops them cleanly."""
    import signal
    import threading

    stopping = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stopping.set())
    return stopping


def _watch_in_foreground(start, stopping) -> None:
    """Hold this process's failover watchers until SIGINT or SIGTERM (or until they all
    stopped: a rollback from elsewhere), then stop them; each says why in the events."""
    if not stopping.is_set():
        start()
    watchers = failover_watch.running_here()
    typer.echo(f"watching {len(watchers)} site(s); SIGINT or SIGTERM stops", err=True)
    while not stopping.wait(0.5):
        if not failover_watch.running_here():
            return
    failover_watch.stop_all("mpcoa apply --watch was stopped")
    typer.echo("the watchers stopped", err=True)


def _no_open_apply(session, topology_id: int) -> bool:
    from service.store import applied

    last = applied.latest_apply(session, topology_id=topology_id)
    return last is None or last.state != "applying"


def _not_applying(state: str) -> bool:
    return state != "applying"


def _rolled_back(state: str) -> bool:
    return state != "rolling_back"  # rolled_back, or failed: a site refused (the row says why)


def _why_nothing(state: str) -> str:
    return {"unconfirmed": " (its confirmation missed: the sites were rolled back then)",
            "failed": " (it failed and left nothing of it in force)"}.get(state, "")


def _wait(apply_id: int, *, done, timeout_s: float) -> str:
    """The apply's state once `done(state)` holds or `timeout_s` has passed (the sites'
    workers write their reports into the row; polling it is how this process hears them)."""
    from service.store import applied

    deadline = time.monotonic() + timeout_s
    while True:
        with session_scope() as s:
            state = applied.get_apply(s, apply_id=apply_id).state
        if done(state) or time.monotonic() >= deadline:
            return state
        time.sleep(0.5)


def _not_rolled_back(apply_id: int, timeout_s: float) -> str:
    from service.store import applied

    with session_scope() as s:
        row = applied.get_apply(s, apply_id=apply_id)
        waiting = [f"{e['site']} ({(row.sites.get(e['site']) or {}).get('state', 'no report')})"
                   for e in row.plan["sites"]
                   if (row.sites.get(e["site"]) or {}).get("state") != "rolled_back"]
    names = " ".join(f"--site {w.split()[0]}" for w in waiting)
    return (f"apply {apply_id}: not rolled back after {timeout_s:g} s; still waiting for "
            f"{', '.join(waiting)}. Is each site's worker running (`mpcoa worker {names}`)? "
            "The rollback stays queued for it; or roll back by hand on the site host: "
            f"`mpcoa apply TOPOLOGY_ID --rollback --site NAME`")


def _site_line(name: str, rep: dict) -> str:
    return (f"site {name}: {rep.get('state')}; changed: "
            f"{', '.join(rep.get('changed') or []) or 'nothing'}"
            + (f"; recovered: {rep['recovered']}" if rep.get("recovered") else "")
            + (f"; error: {rep['error']}" if rep.get("error") else "")
            + (f"; {rep['why']}" if rep.get("why") else ""))


def _print_outcome(apply_id: int, as_json: bool) -> None:
    from service.store import applied

    with session_scope() as s:
        row = applied.get_apply(s, apply_id=apply_id)
        out = {"apply": row.id, "state": row.state, "sites": row.sites,
               "confirmation": row.confirmation, "error": row.error}
    if as_json:
        emit_json(out)
        return
    typer.echo(f"apply {out['apply']}: {out['state']}" + (f" ({out['error']})"
                                                           if out["error"] else ""))
    for name, rep in out["sites"].items():
        typer.echo("  " + _site_line(name, rep))
    c = out["confirmation"] or {}
    if "goodput_mbps" in c:
        typer.echo(f"  confirmation: {c['goodput_mbps']:.3f} Mbit/s on the in-kernel path "
                   f"manager ({c['subflows']} extra subflows, cc {c['cc']}) against OTP "
                   f"{c['otp_mbps']:.3f} (needed {c['threshold_mbps']:.3f}): "
                   + ("confirmed" if c["passed"] else "NOT confirmed, rolled back"))
    elif c:
        typer.echo(f"  confirmation: {c.get('skipped')}")


def register(app: typer.Typer) -> None:
    app.command("apply")(apply)

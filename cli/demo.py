"""`mpcoa demo`: the whole product in one command, on one machine.

An emulated two-site testbed (a scaled paper scenario), the REST API with its dashboard on the
embedded default (SQLite, campaigns run in-process by the same steps Celery workers run), the
topology POSTed like a user would, a reduced campaign with a progress bar, and the answer.
Ctrl-C or SIGTERM, in any phase (or the end, with --no-serve), tears everything down.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import tempfile
import threading
import time
from pathlib import Path
from typing import Annotated, Literal

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from cli.errors import fail
from probes.testbed.spec import shipped_scenarios

console = Console()

# Buffers scaled like the rates (the scenarios run at 0.2 of Table 1): from well under to well
# over the paths' bandwidth-delay products, so the curve has a shape to fit.
DEMO_BUFFERS_MIB = [0.03125, 0.0625, 0.125, 0.25, 0.5, 1.0]
#: the paper's congestion controls that this kernel offers only as BPF (--paper-ccs)
PAPER_CCS = ("hybla", "scalable", "vegas", "olia")


def _free(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _topology_body(spec) -> tuple[dict, dict]:
    """The testbed's two sites as the API takes them: the rates the testbed really has."""
    local, remote = spec.sites
    body = {
        "local" if site is local else "remote": {
            "name": site.name,
            "isps": [
                {
                    "name": isp.name,
                    "label": isp.label,
                    "down_kbps": spec.rate_kbps(site.name, isp.label, "down"),
                    "up_kbps": spec.rate_kbps(site.name, isp.label, "up"),
                }
                for isp in site.isps
            ],
        }
        for site in (local, remote)
    }
    rtts = {
        name: 2 * spec.path(*name.split("-")).delay_ms
        for name in spec.subflow_names(local.name, remote.name)
    }
    return body, rtts


def demo(
    scenario: Annotated[Literal[shipped_scenarios()], typer.Option(
        help="a shipped scenario")] = "unis-hin",
    port: Annotated[int, typer.Option(min=1024, max=65535)] = 8000,
    runs: Annotated[int, typer.Option(min=1, max=9)] = 2,
    duration: Annotated[
        float, typer.Option("--duration-s", min=2, max=60,
                            help="T per probe, s (the first second is warm-up)")
    ] = 3.0,
    serve: Annotated[bool, typer.Option(help="keep the API and dashboard up until Ctrl-C")] = True,
    paper_ccs: Annotated[
        bool,
        typer.Option(help="add the paper's hybla, scalable, vegas and olia (coupled) as BPF "
                     "congestion controls (about twice the probes)"),
    ] = False,
    data_dir: Annotated[Path | None, typer.Option(help="default: a new temporary folder")] = None,
    stream_mbps: Annotated[
        float | None,
        typer.Option(help="ask for a stream of this rate (25 frames/s) instead of bulk: the "
                     "campaign paces its buffer probes and answers by p99 frame delay"),
    ] = None,
    probe_tool: Annotated[
        str,
        typer.Option(help="auto | netperfmeter | iperf3: the tool every probe runs on (auto: "
                     "NetPerfMeter 2.x when MPCOA_NETPERFMETER or PATH has it, else iperf3 and "
                     "the paced tool)"),
    ] = "auto",
    old_duration: Annotated[float | None, typer.Option(
        "--duration", min=2, max=60, hidden=True, help="old spelling of --duration-s")] = None,
) -> None:
    """Testbed + API + a reduced calibration campaign + the recommendation, in one command."""
    duration = duration if old_duration is None else old_duration
    from probes.testbed.spec import SpecError, load_spec, scenario_path

    if os.geteuid() != 0:
        fail("the emulated testbed needs root (network namespaces, qdiscs, a TUN device)")
    if not _free(port):
        fail(f"--port: 127.0.0.1:{port} is in use")
    try:
        spec = load_spec(scenario_path(scenario))
    except (SpecError, KeyError, OSError) as exc:
        fail(f"--scenario: {exc}")
    _check_probe_tool(probe_tool, stream_mbps is not None)
    data = data_dir or Path(tempfile.mkdtemp(prefix="mpcoa-demo-"))
    _configure(data, runs, duration, port, spec.name, probe_tool)

    from probes.bpf import cc as bpf_cc
    from probes.testbed import lifecycle as testbed
    from probes.testbed.interrupts import Stopped, shielded, stop_on_signals

    loaded: dict[str, int] = {}
    server: _Api | None = None
    stopped: Stopped | None = None
    # SIGTERM tears down like Ctrl-C, in every phase: what was built is removed (the BPF
    # controls this demo registered, the testbed, the API and the in-process executor).
    with stop_on_signals():
        try:
            if paper_ccs:
                loaded = _load_paper_ccs(bpf_cc)
            _announce(spec, scenario, data, runs, duration, _demo_ccs(testbed, bpf_cc, paper_ccs))
            with console.status("bringing the emulated testbed up"):
                testbed.up(spec)
            server = _start_api(port)
            _run(spec, port, serve, stream_mbps)
        except Stopped as exc:
            stopped = exc
            console.print(f"\ninterrupted ({exc})")
        finally:
            with shielded(), console.status("tearing down"):
                from service.flows.campaign.runner import install
                from service.settings import get_settings

                executor = install(get_settings())
                executor.stop()
                if server is not None:
                    server.stop()
                testbed.down(spec.name)
                # The probe it was in fails on the removed testbed; the campaign then stops.
                # No thread of ours may outlive the demo: one still running while the
                # interpreter finalises can crash it (SIGSEGV after a clean teardown).
                for name, ended in (("campaign executor", executor.join(timeout_s=30)),
                                    ("API server", server is None or server.join(30))):
                    if not ended:
                        console.print(f"[yellow]the {name} thread did not end[/]")
                if loaded:  # exactly what this demo registered, never anyone else's
                    bpf_cc.unload(list(loaded), map_ids=loaded)
            console.print(f"testbed {spec.name} removed; the data stays in {data}")
    if stopped is not None and stopped.signum != signal.SIGINT:
        raise typer.Exit(stopped.exit_code)  # what a shell expects of a process sent SIGTERM


def _load_paper_ccs(bpf_cc) -> dict[str, int]:
    try:
        with console.status("compiling and registering hybla, scalable, vegas, olia (BPF)"):
            return bpf_cc.load(list(PAPER_CCS))
    except Exception as exc:  # CapabilityError or a compiler error: say it, don't go on
        fail(f"--paper-ccs: {exc}")


def _demo_ccs(testbed, bpf_cc, paper_ccs: bool) -> list[str]:
    """The kernel's own congestion controls, and the paper's BPF ones when --paper-ccs asked
    for them: a BPF control somebody else registered can be unregistered mid-campaign."""
    try:
        others = set(bpf_cc.ours())
    except Exception:  # no bpftool: then nobody registered ours either
        others = set()
    wanted = set(PAPER_CCS) if paper_ccs else set()
    return sorted(c for c in testbed.available_congestion_controls()
                  if c not in others or c in wanted)


def _announce(spec, scenario: str, data: Path, runs: int, duration: float,
              ccs: list[str]) -> None:
    """Fix the campaign's CCs (through the environment) and print the plan with its budget."""
    from service.algorithm.topology import TopologySpec
    from service.flows.campaign.plan import (
        CampaignParameters,
        planned_probes,
        resolve,
        selection_probes,
    )
    from service.settings import Settings

    os.environ["MPCOA_CAMPAIGN_CCS"] = json.dumps(ccs)
    # The budget is the product's default for adaptive campaigns, resolved as the campaign
    # will resolve it (`plan.resolve`): what the paper's grid would take plus the measured
    # selection, each probe as long as the timing rule makes it, so the demo's length is known
    # in advance; the campaign spends only what its decisions need of it.
    body, rtts = _topology_body(spec)
    links = [(sf.bandwidth_kbps, rtts[sf.name]) for sf in TopologySpec(**body).subflows()]
    plan = resolve(CampaignParameters(), Settings(), links)
    budget_s = plan.probe_seconds_budget or 0.0
    n = len(links)
    grid_probes = planned_probes(n, len(ccs), len(plan.pms), len(plan.buffer_grid_mib), runs)
    probes = grid_probes + selection_probes(n, len(ccs))
    console.print(f"[bold]mpcoa demo[/]: scenario {scenario} ({spec.description}); data in {data}")
    console.print(
        f"plan ({plan.mode}, the default): {len(ccs)} CCs ({', '.join(ccs)}); Ω with one impact "
        f"run per CC, the measured subflow selection, then the buffer sweep over "
        f"{len(plan.pms)} PM x {len(plan.buffer_grid_mib)} buffers, probes chosen as measured "
        f"({duration:g} s or longer where the paths' RTTs need it); budget {budget_s:.0f} "
        f"probe-seconds ({budget_s / 60:.1f} min: the paper's grid of {grid_probes} probes and "
        f"the selection's {probes - grid_probes})"
    )


def _check_probe_tool(choice: str, stream: bool) -> None:
    """Refuse a probe tool this host cannot run before anything is built (both sites of the
    emulated testbed are this host)."""
    from probes.base import CapabilityError
    from probes.tools.choice import askable, choose, inventory
    from probes.tools.netperfmeter import default_binary

    if choice not in askable():
        fail(f"--probe-tool: {choice!r} is not one of {', '.join(askable())}")
    tools = inventory(netperfmeter=default_binary())["tools"]
    kinds = ["bulk"] + (["paced"] if stream else [])
    try:
        for kind in kinds:
            choose(choice, kind, [tools, tools])
    except CapabilityError as exc:
        fail(f"--probe-tool {choice}: {exc}")


# what the demo keeps of the caller's environment: where the probe tools are
KEPT_ENV = ("MPCOA_NETPERFMETER",)


def _configure(data: Path, runs: int, duration: float, port: int, testbed: str,
               probe_tool: str = "auto") -> None:
    """The demo's settings, through the environment so every part of the process agrees."""
    from service.settings import get_settings

    for key in [k for k in os.environ if k.startswith("MPCOA_") and k not in KEPT_ENV]:
        del os.environ[key]
    os.environ.update(
        {
            "MPCOA_DATA_DIR": str(data),
            "MPCOA_DATABASE_URL": f"sqlite:///{data / 'demo.sqlite3'}",
            "MPCOA_CAMPAIGN_RUNS": str(runs),
            "MPCOA_CAMPAIGN_DURATION_S": str(duration),
            "MPCOA_CAMPAIGN_BUFFER_GRID_MIB": json.dumps(DEMO_BUFFERS_MIB),
            "MPCOA_PORT": str(port),
            "MPCOA_TESTBED": testbed,  # its own, should another testbed have the same sites
            "MPCOA_PROBE_TOOL": probe_tool,
        }
    )
    get_settings.cache_clear()


class _Api:
    """The API and dashboard served by uvicorn in a thread of the demo's process."""

    def __init__(self, server, thread: threading.Thread) -> None:
        self.server, self.thread = server, thread

    def stop(self) -> None:
        self.server.should_exit = True

    def join(self, timeout_s: float) -> bool:
        self.thread.join(timeout_s)
        return not self.thread.is_alive()


def _start_api(port: int) -> _Api:
    import uvicorn

    from api.app import create_app
    from service.db import upgrade
    from service.settings import get_settings

    settings = get_settings()
    upgrade(settings.effective_database_url)
    server = uvicorn.Server(
        uvicorn.Config(create_app(settings), host="127.0.0.1", port=port, log_level="warning")
    )
    thread = threading.Thread(target=server.run, name="mpcoa-api", daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline:
            fail("the API did not start")
        time.sleep(0.05)
    return _Api(server, thread)


def _run(spec, port: int, serve: bool, stream_mbps: float | None = None) -> None:
    import httpx

    from service.db import session_scope
    from service.store import tokens

    with session_scope() as s:
        token = tokens.create_token(s, name=f"demo-{int(time.time())}")
    base = f"http://127.0.0.1:{port}"
    client = httpx.Client(base_url=base, headers={"Authorization": f"Bearer {token}"}, timeout=30)
    body, rtts = _topology_body(spec)
    objective = ({"kind": "stream", "bitrate_mbps": stream_mbps} if stream_mbps
                 else {"kind": "bulk"})
    r = client.post("/recommendations", json={"topology": {**body, "rtts_ms": rtts},
                                              "objective": objective})
    if r.status_code not in (200, 202):
        fail(f"POST /recommendations: {r.status_code} {r.text[:300]}")
    first = r.json()
    console.print(
        f"POST /recommendations -> {r.status_code}: provisional "
        f"{first['opm']}, buffer {_mib(first['obs_mib'])} (50 % of Eq. 1); "
        f"campaign at {base}{first['poll_url']}"
    )
    campaign = _follow(client, first["poll_url"])
    if campaign["state"] != "done":
        fail(f"campaign {campaign['id']} {campaign['state']}: {campaign.get('error')}")
    r = client.post("/recommendations", json={"topology_id": first["topology_id"],
                                              "objective": objective})
    _show(r.json(), campaign)
    url = f"{base}/dashboard/topologies/{first['topology_id']}"
    console.print(f"\n[bold]dashboard[/]: {url}")
    if serve:
        console.print("serving the API and dashboard; press Ctrl-C to stop and tear down")
        while True:
            time.sleep(3600)


def _follow(client, poll_url: str) -> dict:
    bar = Progress(
        TextColumn("[bold]campaign[/] {task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total} probes"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console,
    )
    with bar:
        task = bar.add_task("queued", total=None)
        while True:
            c = client.get(poll_url).json()
            bar.update(
                task, total=c["probes_total"], completed=c["probes_done"], description=c["state"]
            )
            if c["state"] in ("done", "failed", "cancelled"):
                return c
            time.sleep(1.0)


def _mib(value) -> str:
    return "unknown" if value is None else f"{value:.3f} MiB"


def _show(rec: dict, campaign: dict) -> None:
    promise = rec.get("promise") or {}
    if promise.get("statement"):
        console.print(f"\n[bold green]{promise['statement']}[/] "
                      f"[dim](where {promise.get('of')} of this configuration should land)[/]")
    choice = rec.get("subset_choice") or {}
    if choice.get("omega_statement"):
        console.print(f"[bold]subflows[/]: {choice['omega_statement']}")
    kind = "provisional" if rec["provisional"] else "calibrated"
    table = Table(title=f"Recommendation {rec['id']} ({kind}, campaign {campaign['id']})")
    table.add_column("")
    table.add_column("value")
    trad = rec.get("traditional") or {}
    rows = [
        ("OPM (path manager)", rec["opm"]),
        ("OCC (congestion control)", rec["occ"]),
        ("OBS (buffer)", _mib(rec["obs_mib"])),
        ("OTP (throughput)", _mbps(rec["otp_mbps"])),
        ("T* (best curve's peak)", _t_star(rec.get("t_star"))),
        ("Eq. 1 buffer B", _mib(trad.get("buffer_mib"))),
        (
            "OBS / B",
            "unknown" if trad.get("obs_ratio") is None else f"{100 * trad['obs_ratio']:.1f} %",
        ),
        ("subflows carrying data", ", ".join(rec.get("subflows_used") or []) or "—"),
        ("dropped CCs", ", ".join(campaign["notes"].get("dropped_ccs", {})) or "none"),
        ("quality flags", ", ".join(rec["quality_flags"]) or "none"),
        (
            "probes / probe-seconds / wall",
            f"{campaign['probes_done']} / "
            f"{campaign['probe_seconds_used']:.0f} s / {campaign['elapsed_s']:.0f} s",
        ),
        ("probe-seconds by phase", _by_phase(campaign)),
    ]
    stream = rec.get("stream")
    if stream:
        interval = stream.get("p99_interval_ms")  # None: one run per point, no spread known
        rows.insert(4, ("p99 frame delay at OBS",
                        f"{stream['p99_ms']:.1f} ms" + (f" ({interval[0]:.1f}-{interval[1]:.1f} "
                                                        "ms, 90 %)" if interval else "")))
        rows.insert(5, ("the arm's best p99", f"{stream['best_p99_ms']:.1f} ms at "
                        f"{stream['best_bs_mib']:.3f} MiB"))
    for row in rows:
        table.add_row(*row)
    console.print(table)


def _mbps(value) -> str:
    return "unknown" if value is None else f"{value:.2f} Mbit/s"


def _t_star(t: dict | None) -> str:
    if not t:
        return "unknown"
    return f"{t['tp_mbps']:.2f} Mbit/s at {t['bs_mib']:.3f} MiB ({t['pm']}/{t['cc']})"


def _by_phase(campaign: dict) -> str:
    spent = ((campaign.get("notes") or {}).get("probe_budget") or {}).get("spent") or {}
    return ", ".join(f"{phase} {v['probe_seconds']:.0f} s" for phase, v in spent.items()) or "—"


def register(app: typer.Typer) -> None:
    app.command("demo")(demo)

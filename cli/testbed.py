"""``mpcoa testbed up FILE | down NAME | status``: the emulated multi-homed testbed."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from probes import testbed as tb
from probes.base import ProbeError
from probes.spec import SpecError, load_spec, scenario_path

app = typer.Typer(help="Emulated multi-homed MPTCP testbed (namespaces, shaping, delay line).",
                  no_args_is_help=True)


@app.command("up")
def up_cmd(
    file: str = typer.Argument(..., help="topology file (YAML/JSON), or a shipped scenario name "
                               "(srl-hu, unis-hin, uit-haw)"),
) -> None:
    """Bring a testbed up from a topology file (idempotent)."""
    try:
        path = Path(file) if Path(file).exists() else scenario_path(file)
        spec = load_spec(path)
        bed = tb.up(spec)
    except (SpecError, ProbeError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    st = bed.status()
    typer.echo(f"testbed {bed.name} up: namespaces {', '.join(st['namespaces'])}")
    for site in spec.sites:
        for isp in site.isps:
            typer.echo(f"  {site.name}.{isp.label} {bed.address(site.name, isp.label)} "
                       f"down {isp.down_kbps * spec.rate_scale:g} kbit/s "
                       f"up {isp.up_kbps * spec.rate_scale:g} kbit/s")
    for p in spec.resolved_paths():
        typer.echo(f"  path {p.name}: {p.delay_ms:g} ms one way, loss {p.loss_pct:g} %, "
                   f"jitter {p.jitter_ms:g} ms")


@app.command("down")
def down_cmd(name: str = typer.Argument(..., help="testbed name")) -> None:
    """Remove every namespace, device and process of a testbed."""
    import re

    from probes.spec import TESTBED_NAME_PATTERN

    if not re.fullmatch(TESTBED_NAME_PATTERN, name):
        typer.echo(f"error: name: {name!r} is not a testbed name", err=True)
        raise typer.Exit(2)
    removed = tb.down(name)
    typer.echo(f"testbed {name} down" + (f": removed {len(removed)} items" if removed
                                         else ": nothing to remove"))


@app.command("status")
def status_cmd(as_json: bool = typer.Option(False, "--json", help="print JSON")) -> None:
    """List testbeds on this machine (including half-removed ones)."""
    rows = tb.status()
    if as_json:
        typer.echo(json.dumps(rows, indent=1))
        return
    if not rows:
        typer.echo("no testbeds")
        return
    for r in rows:
        health = "healthy" if r["healthy"] else "BROKEN (run down)"
        sites = " ".join(f"{s}[{','.join(labels)}]" for s, labels in r["sites"].items())
        typer.echo(f"{r['name']}: {health}; sites {sites}; namespaces {len(r['namespaces'])}; "
                   f"delay line pid {r['delayline_pid']} "
                   f"{'alive' if r['delayline_alive'] else 'dead'}")

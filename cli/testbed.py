"""``mpcoa testbed up FILE | down NAME | status``: the emulated multi-homed testbed."""

from __future__ import annotations

import time
from pathlib import Path

import typer

from cli.errors import EXIT_USAGE, PREFIX, emit_json, fail
from cli.output import say, show, table
from probes.base import ProbeError
from probes.testbed import lifecycle as tb
from probes.testbed.interrupts import Stopped, stop_on_signals
from probes.testbed.spec import SpecError, load_spec, scenario_path

app = typer.Typer(help="Emulated multi-homed MPTCP testbed (namespaces, shaping, delay line).",
                  no_args_is_help=True)


@app.command("up")
def up_cmd(
    file: str = typer.Argument(..., help="topology file (YAML/JSON), or a shipped scenario name "
                               "(srl-hu, unis-hin, uit-haw, field-shared, field-lte, "
                               "field-lossy)"),
    as_json: bool = typer.Option(False, "--json", help="print JSON"),
) -> None:
    """Bring a testbed up from a topology file (idempotent)."""
    try:
        if Path(file).exists():
            path = Path(file)
        elif "/" in file or file.endswith((".yaml", ".yml", ".json")):
            raise SpecError(f"{file}: no such file")
        else:
            path = scenario_path(file)
        spec = load_spec(path)
        # A stop signal mid-build unwinds `up`, which removes what it had built so far.
        with stop_on_signals():
            bed = tb.up(spec)
    except (SpecError, ProbeError) as exc:
        fail(str(exc))
    except Stopped as exc:
        typer.echo(f"stopped by {exc}: nothing left up", err=True)
        raise typer.Exit(exc.exit_code) from None
    st = bed.status()
    if as_json:
        emit_json({**st, "addresses": {f"{s.name}.{i.label}": bed.address(s.name, i.label)
                                       for s in spec.sites for i in s.isps}})
        return
    typer.echo(f"testbed {bed.name} up: namespaces {', '.join(st['namespaces'])}")
    for site in spec.sites:
        for isp in site.isps:
            typer.echo(f"  {site.name}.{isp.label} {bed.address(site.name, isp.label)} "
                       f"down {isp.down_kbps * spec.rate_scale:g} kbit/s "
                       f"up {isp.up_kbps * spec.rate_scale:g} kbit/s")
    for p in spec.resolved_paths():
        burst = f" in bursts of {p.loss_burst:g} packets" if p.loss_burst and p.loss_pct else ""
        typer.echo(f"  path {p.name}: {p.delay_ms:g} ms one way, loss {p.loss_pct:g} %{burst}, "
                   f"jitter {p.jitter_ms:g} ms")
    for line in _field_lines(st):
        typer.echo(line)


def _field_lines(st: dict) -> list[str]:
    """Competing traffic, schedules and bursty-loss counters of a testbed's status."""
    out = []
    for c in st.get("cross", []):
        what = {"bulk": lambda c: f"{c['flows']} x {c['cc']}",
                "onoff": lambda c: f"{c['mbps']:g} Mbit/s {c['on_s']:g} s on, {c['off_s']:g} s off",
                "web": lambda c: f"{c['mbps']:g} Mbit/s of short flows"}[c["kind"]](c)
        rate = "" if c.get("received_mbps") is None else f", {c['received_mbps']:g} Mbit/s last s"
        out.append(f"  cross {c['site']}.{c['isp']} {c['direction']}: {c['kind']} {what} "
                   f"({'running' if c['alive'] else 'DEAD'}{rate})")
    for s in st.get("schedules", []):
        out.append(f"  schedule {s['site']}.{s['isp']} every {s['period_s']:g} s: step {s['step']} "
                   f"up {s['up_kbps']:g} down {s['down_kbps']:g} kbit/s "
                   f"({'running' if s['alive'] else 'DEAD'})")
    for c in st.get("capacity_set", []):
        since = time.strftime("%H:%M:%S", time.gmtime(c["at"]))
        out.append(f"  capacity {c['site']}.{c['isp']} set: up {c['up_kbps']:g} down "
                   f"{c['down_kbps']:g} kbit/s (since {since} UTC)")
    for e in st.get("schedule_errors", []):
        out.append(f"  schedule error: {e}")
    for path, n in st.get("loss_counters", {}).items():
        mean = f", mean burst {n['dropped'] / n['bursts']:.2f}" if n["bursts"] else ""
        out.append(f"  losses {path}: {n['dropped']} of {n['packets']} packets{mean}")
    return out


@app.command("capacity")
def capacity_cmd(
    name: str = typer.Argument(..., help="testbed name"),
    site: str = typer.Argument(..., help="site name"),
    isp: str = typer.Argument(..., help="the site's ISP label"),
    up_kbps: float = typer.Option(..., "--up", help="uplink rate, kbit/s (the spec's units)"),
    down_kbps: float = typer.Option(..., "--down", help="downlink rate, kbit/s"),
    as_json: bool = typer.Option(False, "--json", help="print JSON"),
) -> None:
    """Set an ISP's link rates now, for good (a lasting capacity step), until the testbed goes
    down or they are set again."""
    import re

    from probes.testbed import capacity
    from probes.testbed.spec import TESTBED_NAME_PATTERN

    if not re.fullmatch(TESTBED_NAME_PATTERN, name):
        fail(f"name: {name!r} is not a testbed name")
    try:
        entry = capacity.set_capacity(tb.attach(name), site, isp, up_kbps=up_kbps,
                                      down_kbps=down_kbps)
    except ProbeError as exc:
        fail(str(exc))
    if as_json:
        emit_json(entry)
        return
    typer.echo(f"testbed {name}: {site}.{isp} now up {entry['up_kbps']:g} down "
               f"{entry['down_kbps']:g} kbit/s")


@app.command("down")
def down_cmd(name: str = typer.Argument(..., help="testbed name")) -> None:
    """Remove every namespace, device and process of a testbed."""
    import re

    from probes.testbed.spec import TESTBED_NAME_PATTERN

    if not re.fullmatch(TESTBED_NAME_PATTERN, name):
        fail(f"name: {name!r} is not a testbed name")
    removed = tb.down(name)
    typer.echo(f"testbed {name} down" + (f": removed {len(removed)} items" if removed
                                         else ": nothing to remove"))


@app.command("status")
def status_cmd(as_json: bool = typer.Option(False, "--json", help="print JSON")) -> None:
    """List testbeds on this machine (including half-removed ones)."""
    rows = tb.status()
    if as_json:
        emit_json(rows)
        return
    if not rows:
        typer.echo("no testbeds")
        return
    for r in rows:
        health = "healthy" if r["healthy"] else "BROKEN (run down)"
        sites = " ".join(f"{s}[{','.join(labels)}]" for s, labels in r["sites"].items())
        typer.echo(f"{r['name']}: {health}; sites {sites}; addresses {r.get('addresses')}; "
                   f"namespaces {len(r['namespaces'])}; delay line pid {r['delayline_pid']} "
                   f"{'alive' if r['delayline_alive'] else 'dead'}")
        for q in r.get("queues", []):
            typer.echo(f"  queue {q['site']}.{q['isp']} {q['direction']} {q['rate_kbps']:g} kbit/s:"
                       f" {q['packets']:g} packets = {q['ms']:g} ms ({q['source']})")
        for line in _field_lines(r):
            typer.echo(line)


# ---- congestion controls the kernel lacks, as BPF struct_ops (probes/bpf/src) -----------------
cc_app = typer.Typer(help="BPF congestion controls (scalable, hybla, vegas; coupled MPTCP "
                     "lia, olia, balia, wvegas); host-wide.",
                     no_args_is_help=True)
app.add_typer(cc_app, name="cc")
CC_NAMES_ARG = typer.Argument(None, help="scalable, hybla, vegas, lia, olia, balia, wvegas "
                              "(default: all)")


def _cc_call(fn, *args, **kw):
    try:
        return fn(*args, **kw)
    except ProbeError as exc:  # CapabilityError, BpfCcError
        fail(str(exc))


@cc_app.command("load")
def cc_load_cmd(names: list[str] | None = CC_NAMES_ARG,
                as_json: bool = typer.Option(False, "--json", help="print JSON")) -> None:
    """Build (cached) and register BPF congestion controls; present ones are left alone."""
    from probes.bpf import cc as bpf_cc

    loaded = _cc_call(bpf_cc.load, names or None)
    if as_json:  # name -> the map id this call registered, or null: it was there already
        emit_json({name: loaded.get(name) for name in names or bpf_cc.SUPPORTED})
        return
    for name in names or bpf_cc.SUPPORTED:
        how = f"loaded (map id {loaded[name]})" if name in loaded else "already available"
        typer.echo(f"{name}: {how}")


@cc_app.command("unload")
def cc_unload_cmd(
    names: list[str] | None = CC_NAMES_ARG,
    force: bool = typer.Option(False, "--force", help="unload even while probes or sockets "
                               "use them (their next socket cannot set the control)"),
    as_json: bool = typer.Option(False, "--json", help="print JSON"),
) -> None:
    """Unregister OUR BPF congestion controls (struct_ops maps named mpcoa_<cc>) only; refused
    while a running probe or a socket uses one of them."""
    from probes import cc_users
    from probes.bpf import cc as bpf_cc

    wanted = [_cc_call(bpf_cc.check_name, n) for n in names] if names else bpf_cc.SUPPORTED
    mine = [n for n in wanted if n in _cc_call(bpf_cc.ours)]
    busy = cc_users.users(mine) if mine and not force else []
    if busy:
        typer.echo(PREFIX + "not unloading, in use:\n  " + "\n  ".join(busy)
                   + "\n(wait for them to end, or --force)", err=True)
        raise typer.Exit(EXIT_USAGE)
    gone = _cc_call(bpf_cc.unload, names or None)
    if as_json:
        emit_json({"unloaded": list(gone)})
        return
    typer.echo(f"unloaded: {', '.join(gone)}" if gone else "nothing of ours to unload")


@cc_app.command("status")
def cc_status_cmd(as_json: bool = typer.Option(False, "--json", help="print JSON")) -> None:
    """Which BPF congestion controls are available, and which are registered by mpcoa."""
    from probes.bpf import cc as bpf_cc

    rows = _cc_call(bpf_cc.status)
    if as_json:
        emit_json(rows)
        return
    say(f"kernel: {' '.join(_cc_call(bpf_cc.available))}")
    listed = table("BPF CC", "state")
    for r in rows:
        state = ("ours, map id " + ",".join(map(str, r["map_ids"])) if r["ours"]
                 else "available (not ours)" if r["available"] else "not loaded")
        if r.get("retiring_map_ids"):
            state += (f"; unregistered map id {','.join(map(str, r['retiring_map_ids']))} "
                      "kept until its last socket closes")
        listed.add_row(r["name"], state)
    show(listed)

"""`mpcoa solve | fit | impact | recommend`: the algorithm on files; a summary for people, or
with `--json` the documents of docs/formats.md (what `solve` reads back from `fit`)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from functools import wraps
from pathlib import Path
from typing import Annotated, Literal

import typer

from cli.errors import emit_json, fail
from cli.output import JsonOpt, console, show, table
from service.algorithm.regression import ALL_MODEL_KINDS, fit
from service.algorithm.solver import DEFAULT_BS_MAX_MIB, DEFAULT_BS_MIN_MIB, DEFAULT_DELTA, solve
from service.formats import (
    FormatError,
    fits_to_dict,
    impact_results,
    impact_to_dict,
    parse_curves,
    parse_impact,
    parse_samples,
    solution_to_dict,
)


def bad_input_exits(func: Callable) -> Callable:
    @wraps(func)
    def wrapper(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except (FormatError, ValueError) as exc:
            fail(str(exc))

    return wrapper


def read_text(path: Path) -> str:
    name = str(path)
    try:
        return sys.stdin.read() if name == "-" else path.read_text(encoding="utf-8")
    except FileNotFoundError:
        fail(f"{name}: no such file")
    except IsADirectoryError:
        fail(f"{name}: is a directory")
    except PermissionError:
        fail(f"{name}: permission denied")
    except UnicodeDecodeError:
        fail(f"{name}: not UTF-8 text")
    except OSError as exc:
        fail(f"{name}: {exc.strerror}")
    raise AssertionError("unreachable")


def emit(document: dict, as_json: bool, summary: Callable[[dict], None]) -> None:
    emit_json(document) if as_json else summary(document)


def _g(value, digits: int = 4) -> str:
    return "-" if value is None else f"{value:.{digits}g}" if isinstance(value, float) else \
        str(value)


def _print_solution(doc: dict) -> None:
    out = console()
    out.print(f"[bold]OPM={doc['opm']} OCC={doc['occ']} OBS={_g(doc['obs_mib'])} MiB "
              f"OTP={_g(doc['otp_mbps'])} Mbit/s[/]")
    out.print(f"T*={_g(doc['tp_max_mbps'])} Mbit/s ({doc['tp_max_pm']} {doc['tp_max_cc']} at "
              f"{_g(doc['tp_max_bs_mib'])} MiB); δ={_g(doc['delta'])}, buffers "
              f"{_g(doc['bs_min_mib'])}-{_g(doc['bs_max_mib'])} MiB; flags: "
              f"{', '.join(doc['flags']) or 'none'}", markup=False)
    arms = table("PM", "CC", "peak MiB", "peak Mbit/s", "OBS MiB", "TP at OBS", "")
    for a in doc["arms"]:
        arms.add_row(a["pm"], a["cc"], _g(a["peak_bs_mib"]), _g(a["peak_tp_mbps"]),
                     _g(a["obs_mib"]), _g(a["tp_at_obs_mbps"]), "chosen" if a["chosen"] else "")
    show(arms)


def _print_fits(doc: dict) -> None:
    out = console()
    for f in doc["fits"]:
        out.print(f"[bold]{f['pm']}[/]: {f['model']} model, n={f['n']}, R²={_g(f['r2'], 3)}, "
                  f"quality gate {'passed' if f['gate_passed'] else 'FAILED'}"
                  + (f"; failing arms: {', '.join(f['failing_arms'])}" if f['failing_arms']
                     else ""))
        for w in f["warnings"]:
            out.print(f"  warning: {w}", markup=False)
    curves = table("PM", "CC", "curve")
    for c in doc["curves"]:
        shape = (f"{_g(c['plateau_mbps'])} Mbit/s plateau, knee {_g(c['knee_mib'])} MiB"
                 if c.get("kind") == "saturating" else
                 f"{_g(c['a'])} + {_g(c['b'])}·BS + {_g(c['c'])}·BS²")
        curves.add_row(c["pm"], c["cc"], shape)
    show(curves)
    out.print("(--json prints the curves document `mpcoa solve --curves` reads)")


def _print_impact(doc: dict) -> None:
    out = console()
    for r in doc["impact"]:
        out.print(f"[bold]{r['cc']}[/]: SP* {', '.join(r['subset']) or '-'}"
                  + (" (same as FullMesh)" if r["same_as_fullmesh"] else ""))
        t = table("subflow", "Ω", "")
        for sf, w in sorted(r["omegas"].items(), key=lambda kv: -kv[1]):
            t.add_row(sf, f"{w:+.3f}", "in SP*" if sf in r["subset"] else "standby")
        show(t)


def _print_recommendation(doc: dict) -> None:
    _print_solution(doc)
    console().print("fits: " + "; ".join(
        f"{f['pm']} {f['model']} R²={_g(f['r2'], 3)}" for f in doc["fits"])
        + f"; quality gate {'passed' if doc['quality_gate_passed'] else 'FAILED'}",
        markup=False)


FileArg = Annotated[Path, typer.Option(help="input file, or - for standard input")]
DeltaOpt = Annotated[
    float | None, typer.Option(help=f"throughput sacrificed, in [0, 1) (default {DEFAULT_DELTA})")
]
BsMinOpt = Annotated[
    float | None,
    typer.Option("--bs-min", help=f"smallest buffer, MiB (default {DEFAULT_BS_MIN_MIB})"),
]
BsMaxOpt = Annotated[
    float | None,
    typer.Option("--bs-max", help=f"largest buffer, MiB (default {DEFAULT_BS_MAX_MIB})"),
]
ModelOpt = Annotated[Literal[ALL_MODEL_KINDS], typer.Option(help="regression model")]
SameOpt = Annotated[
    list[str] | None,
    typer.Option("--same-as-fullmesh", help="a CC whose PCDC subset keeps every subflow"),
]


def _pick(flag: float | None, from_file: float | None, default: float) -> float:
    if flag is not None:
        return flag
    return default if from_file is None else from_file


def _fit_samples(samples: Path, model: str, same_as_fullmesh: list[str] | None) -> tuple:
    """(fits, samples): the samples also go to the solver, which checks OTP against them."""
    parsed = parse_samples(read_text(samples))
    same = [*parsed.same_as_fullmesh, *(same_as_fullmesh or [])]
    rows = [s.to_sample() for s in parsed.samples]
    return fit(rows, model=model, same_as_fullmesh=same), rows


@bad_input_exits
def solve_cmd(
    curves: FileArg,
    delta: DeltaOpt = None,
    bs_min: BsMinOpt = None,
    bs_max: BsMaxOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """The delta-relaxed minimum buffer (Eq. 9-12) from fitted curves."""
    parsed = parse_curves(read_text(curves))
    solution = solve(
        parsed.curves,
        delta=_pick(delta, parsed.delta, DEFAULT_DELTA),
        bs_min=_pick(bs_min, parsed.bs_min_mib, DEFAULT_BS_MIN_MIB),
        bs_max=_pick(bs_max, parsed.bs_max_mib, DEFAULT_BS_MAX_MIB),
    )
    emit(solution_to_dict(solution), as_json, _print_solution)


@bad_input_exits
def fit_cmd(samples: FileArg, model: ModelOpt = "paper", same_as_fullmesh: SameOpt = None,
            as_json: JsonOpt = False) -> None:
    """Regression per path manager (Eq. 8), with R^2 and p; --json: the curves that
    `mpcoa solve` reads."""
    emit(fits_to_dict(_fit_samples(samples, model, same_as_fullmesh)[0]), as_json, _print_fits)


@bad_input_exits
def impact_cmd(
    omega: Annotated[Path | None, typer.Option(help="Omega per CC and subflow (JSON)")] = None,
    series: Annotated[Path | None, typer.Option(help="TP_0 and TP_i series per CC (JSON)")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Impact factors (Eq. 5) and the PCDC subsets (Eq. 6) per congestion control."""
    if (omega is None) == (series is None):
        fail("give exactly one of --omega FILE and --series FILE")
    text = read_text(omega if omega is not None else series)
    parsed = parse_impact(text)
    if (omega is not None) != (parsed.omega is not None):
        fail(f"{'omega' if omega is not None else 'series'}: missing in the file")
    emit(impact_to_dict(impact_results(parsed)), as_json, _print_impact)


@bad_input_exits
def recommend_cmd(
    samples: FileArg,
    model: ModelOpt = "paper",
    same_as_fullmesh: SameOpt = None,
    delta: DeltaOpt = None,
    bs_min: BsMinOpt = None,
    bs_max: BsMaxOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Fit then solve: OPM, OCC, OBS, OTP from measured samples."""
    fits, rows = _fit_samples(samples, model, same_as_fullmesh)
    solution = solve(
        [c for f in fits for c in f.curves],
        delta=DEFAULT_DELTA if delta is None else delta,
        bs_min=DEFAULT_BS_MIN_MIB if bs_min is None else bs_min,
        bs_max=DEFAULT_BS_MAX_MIB if bs_max is None else bs_max,
        measured=rows,
    )
    document = solution_to_dict(solution)
    document["fits"] = fits_to_dict(fits)["fits"]
    document["quality_gate_passed"] = all(f.gate_passed for f in fits)
    emit(document, as_json, _print_recommendation)


def register(app: typer.Typer) -> None:
    app.command("solve")(solve_cmd)
    app.command("fit")(fit_cmd)
    app.command("impact")(impact_cmd)
    app.command("recommend")(recommend_cmd)

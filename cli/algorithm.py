"""`mpcoa solve | fit | impact | recommend`: the algorithm on files, JSON out (docs/formats.md)."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import asdict, replace
from functools import wraps
from pathlib import Path
from typing import Annotated

import typer

from service.algorithm.curve import Curve
from service.algorithm.curve_store import curve_from_dict
from service.algorithm.regression import ALL_MODEL_KINDS, fit
from service.algorithm.solver import DEFAULT_BS_MAX_MIB, DEFAULT_BS_MIN_MIB, DEFAULT_DELTA, solve
from service.formats import (
    DIGITS,
    FormatError,
    fits_to_dict,
    impact_results,
    impact_to_dict,
    load_json,
    parse_curves,
    parse_impact,
    parse_samples,
    solution_to_dict,
)

EXIT_BAD_INPUT = 2


def fail(message: str) -> None:
    """One line on stderr and status 2: bad input never shows a traceback."""
    typer.echo(f"mpcoa: error: {message}", err=True)
    raise typer.Exit(EXIT_BAD_INPUT)


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


def emit(document: dict) -> None:
    typer.echo(json.dumps(document, indent=2, allow_nan=False))


FileArg = Annotated[Path, typer.Option(help="input file, or - for standard input")]
DeltaOpt = Annotated[
    float | None, typer.Option(help=f"throughput sacrificed, in [0, 1) [default {DEFAULT_DELTA}]")
]
BsMinOpt = Annotated[
    float | None,
    typer.Option("--bs-min", help=f"smallest buffer, MiB [default {DEFAULT_BS_MIN_MIB}]"),
]
BsMaxOpt = Annotated[
    float | None,
    typer.Option("--bs-max", help=f"largest buffer, MiB [default {DEFAULT_BS_MAX_MIB}]"),
]
ModelOpt = Annotated[str, typer.Option(help=f"regression model: {' | '.join(ALL_MODEL_KINDS)}")]
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


def _round(value):
    return round(value, DIGITS) if isinstance(value, float) else value


def _fits_document(fits: list) -> dict:
    """formats.fits_to_dict for every curve kind (`kind` written only where it is not the paper's
    quadratic, so older readers still take those curves) plus the per-arm gate."""
    document = {
        "model": fits[0].model,
        "curves": [_curve_document(c) for f in fits for c in f.curves],
        # fits_to_dict reads only the statistics of a Fit, never its curves' parameters.
        "fits": fits_to_dict([replace(f, curves=[]) for f in fits])["fits"],
    }
    for doc, f in zip(document["fits"], fits, strict=True):
        doc["failing_arms"] = f.failing_arms
        doc["arms"] = [{k: _round(v) for k, v in asdict(arm).items()} for arm in f.arms]
    return document


def _curve_document(curve) -> dict:
    data = {k: _round(v) for k, v in curve.to_dict().items()}
    if isinstance(curve, Curve):
        data.pop("kind")
    return data


def _parse_any_curves(text: str):
    """The curves file of formats.parse_curves, with curves of any kind (`kind` key).

    Non-quadratic curves are checked by curve_store.curve_from_dict and stand in for the
    format's validation as a placeholder quadratic, so that error paths keep their indices.
    """
    doc = load_json(text)
    curves = doc.get("curves") if isinstance(doc, dict) else None
    if not isinstance(curves, list) or not any(isinstance(c, dict) and "kind" in c for c in curves):
        return parse_curves(text), None  # the paper's format, untouched
    others: dict[int, object] = {}
    plain = []
    for i, item in enumerate(doc["curves"]):
        if isinstance(item, dict) and item.get("kind", Curve.kind) != Curve.kind:
            try:
                others[i] = curve_from_dict(item)
            except ValueError as exc:
                raise FormatError(f"curves.{i}.{exc}") from None
            item = {"pm": item["pm"], "cc": item["cc"], "a": 0, "b": 0, "c": 0}
        elif isinstance(item, dict):
            item = {k: v for k, v in item.items() if k != "kind"}
        plain.append(item)
    parsed = parse_curves(json.dumps({**doc, "curves": plain}))
    curves = [others.get(i) or c.to_curve() for i, c in enumerate(parsed.curves)]
    return parsed, curves


def _solution_document(solution) -> dict:
    """formats.solution_to_dict plus the measured figures and flags (docs/formats.md)."""
    document = solution_to_dict(solution)
    for key in ("otp_fitted_mbps", "measured_obs_mib", "otp_capped_to_measured", "flags"):
        document[key] = _round(getattr(solution, key))
    for doc, arm in zip(document["arms"], solution.arms, strict=True):
        for key in (
            "kind",
            "fitted_peak_tp_mbps",
            "measured_obs_mib",
            "measured_max_mbps",
            "measured_noise_mbps",
        ):
            doc[key] = _round(getattr(arm, key))
    return document


@bad_input_exits
def solve_cmd(
    curves: FileArg,
    delta: DeltaOpt = None,
    bs_min: BsMinOpt = None,
    bs_max: BsMaxOpt = None,
) -> None:
    """The delta-relaxed minimum buffer (Eq. 9-12) from fitted curves."""
    parsed, any_curves = _parse_any_curves(read_text(curves))
    solution = solve(
        any_curves or [c.to_curve() for c in parsed.curves],
        delta=_pick(delta, parsed.delta, DEFAULT_DELTA),
        bs_min=_pick(bs_min, parsed.bs_min_mib, DEFAULT_BS_MIN_MIB),
        bs_max=_pick(bs_max, parsed.bs_max_mib, DEFAULT_BS_MAX_MIB),
    )
    emit(_solution_document(solution))


@bad_input_exits
def fit_cmd(samples: FileArg, model: ModelOpt = "paper", same_as_fullmesh: SameOpt = None) -> None:
    """Regression per path manager (Eq. 8): curves JSON that `mpcoa solve` reads, with R^2 and p."""
    emit(_fits_document(_fit_samples(samples, model, same_as_fullmesh)[0]))


@bad_input_exits
def impact_cmd(
    omega: Annotated[Path | None, typer.Option(help="Omega per CC and subflow (JSON)")] = None,
    series: Annotated[Path | None, typer.Option(help="TP_0 and TP_i series per CC (JSON)")] = None,
) -> None:
    """Impact factors (Eq. 5) and the PCDC subsets (Eq. 6) per congestion control."""
    if (omega is None) == (series is None):
        fail("give exactly one of --omega FILE and --series FILE")
    text = read_text(omega if omega is not None else series)
    parsed = parse_impact(text)
    if (omega is not None) != (parsed.omega is not None):
        fail(f"{'omega' if omega is not None else 'series'}: missing in the file")
    emit(impact_to_dict(impact_results(parsed)))


@bad_input_exits
def recommend_cmd(
    samples: FileArg,
    model: ModelOpt = "paper",
    same_as_fullmesh: SameOpt = None,
    delta: DeltaOpt = None,
    bs_min: BsMinOpt = None,
    bs_max: BsMaxOpt = None,
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
    document = _solution_document(solution)
    document["fits"] = _fits_document(fits)["fits"]
    document["quality_gate_passed"] = all(f.gate_passed for f in fits)
    emit(document)


def register(app: typer.Typer) -> None:
    app.command("solve")(solve_cmd)
    app.command("fit")(fit_cmd)
    app.command("impact")(impact_cmd)
    app.command("recommend")(recommend_cmd)

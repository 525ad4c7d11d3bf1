"""The stable JSON/CSV formats of the algorithm's inputs and outputs (docs/formats.md).

Parsing is strict (unknown keys, NaN, wrong types are refused) and every error is a `FormatError`
whose message names the offending field, so the CLI can print one line and exit with status 2.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from probes import documents
from probes.vocabulary import PathManager

from .algorithm.curve import Curve, normalize_cc, normalize_pm
from .algorithm.impact import ImpactResult, impact_from_omegas, impact_from_series
from .algorithm.regression import Fit, Sample
from .algorithm.saturating_curve import AnyCurve, SaturatingCurve
from .algorithm.solver import SolverAnswer

Finite = Annotated[float, Field(allow_inf_nan=False)]
NonNegative = Annotated[float, Field(ge=0, allow_inf_nan=False)]
DIGITS = 6  # output precision: well below the paper's two decimals, stable across platforms


class FormatError(ValueError):
    """Bad input; the message names the field."""


# Curves as JSON-ready dicts and back: {"kind": "quadratic" | "saturating", "pm", "cc", ...}, the
# one serialised form of a curve, for the stored fits and the CLI's files alike. A dict without
# "kind" is the paper's quadratic (the format of stored fits before kinds existed, and of the
# paper's curves files). Reading checks every field and names the bad one first ("a: ...").
CURVE_KINDS = {Curve.kind: Curve, SaturatingCurve.kind: SaturatingCurve}
_PARAMS = {
    Curve.kind: ("a", "b", "c"),
    SaturatingCurve.kind: ("plateau_mbps", "knee_mib", "sharpness"),
}


def curve_to_dict(curve: AnyCurve) -> dict[str, Any]:
    """{"kind", "pm", "cc", <the kind's parameters>, "same_as_fullmesh"}."""
    return {
        "kind": curve.kind,
        "pm": curve.pm,
        "cc": curve.cc,
        **{name: getattr(curve, name) for name in _PARAMS[curve.kind]},
        "same_as_fullmesh": curve.same_as_fullmesh,
    }


def curve_from_dict(data: Mapping) -> AnyCurve:
    """A curve from its dict; ValueError("<field>: <what is wrong>") otherwise."""
    kind = data.get("kind", Curve.kind)
    if not isinstance(kind, str) or kind not in CURVE_KINDS:
        raise ValueError(f"kind: must be one of {', '.join(CURVE_KINDS)}, got {kind!r}")
    expected = {"kind", "pm", "cc", "same_as_fullmesh", *_PARAMS[kind]}
    extra = sorted(set(data) - expected)
    if extra:
        raise ValueError(f"{extra[0]}: not a field of a {kind} curve")
    missing = [name for name in ("pm", "cc", *_PARAMS[kind]) if name not in data]
    if missing:
        raise ValueError(f"{missing[0]}: missing in a {kind} curve")
    for name, check in (("pm", normalize_pm), ("cc", normalize_cc)):
        if not isinstance(data[name], str):
            raise ValueError(f"{name}: must be a string, got {data[name]!r}")
        try:
            check(data[name])
        except ValueError as exc:
            raise ValueError(f"{name}: {exc}") from None
    params = {name: data[name] for name in _PARAMS[kind]}
    for name, value in params.items():
        # bool is an int to Python, never a number to a JSON reader
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError(f"{name}: must be a number, got {value!r}")
        if not math.isfinite(value):
            raise ValueError(f"{name}: must be finite, got {value!r}")
    same = data.get("same_as_fullmesh", False)
    if not isinstance(same, bool):
        raise ValueError(f"same_as_fullmesh: must be true or false, got {same!r}")
    return CURVE_KINDS[kind](pm=data["pm"], cc=data["cc"], same_as_fullmesh=same, **params)


def _strict() -> ConfigDict:
    return ConfigDict(extra="forbid", frozen=True)


class _PmCc(BaseModel):
    model_config = _strict()
    pm: PathManager
    cc: str

    @field_validator("pm", mode="before")
    @classmethod
    def _pm(cls, v: Any) -> Any:
        return normalize_pm(v) if isinstance(v, str) else v  # read in any case

    @field_validator("cc")
    @classmethod
    def _cc(cls, v: str) -> str:
        return normalize_cc(v)


class CurvesFile(BaseModel):
    """The curves file's envelope; each curve is read by `curve_from_dict`, the
    reader of stored fits, so every kind is accepted here as there."""

    model_config = _strict()
    delta: Finite | None = None
    bs_min_mib: Finite | None = None
    bs_max_mib: Finite | None = None
    curves: list[dict[str, Any]] = Field(min_length=1)
    # `mpcoa fit` writes its statistics next to the curves; `solve` accepts and ignores them.
    model: str | None = None
    fits: list[dict[str, Any]] | None = None


@dataclass(frozen=True)
class Curves:
    """A read curves file: the curves, of any kind, and the solver bounds it gives (or None)."""

    curves: list[AnyCurve]
    delta: float | None
    bs_min_mib: float | None
    bs_max_mib: float | None


class SampleIn(_PmCc):
    bs_mib: Annotated[float, Field(gt=0, allow_inf_nan=False)]
    tp_mbps: NonNegative

    def to_sample(self) -> Sample:
        return Sample(self.pm, self.cc, self.bs_mib, self.tp_mbps)


class SamplesFile(BaseModel):
    model_config = _strict()
    samples: list[SampleIn] = Field(min_length=1)
    same_as_fullmesh: list[str] = Field(default_factory=list)


class SeriesIn(BaseModel):
    model_config = _strict()
    tp0: list[NonNegative] = Field(min_length=1)
    excluded: dict[str, list[NonNegative]] = Field(min_length=1)


class ImpactFile(BaseModel):
    """Either Omega values per CC and subflow, or the TP_0 / TP_i series to compute them from."""

    model_config = _strict()
    omega: dict[str, dict[str, Finite]] | None = None
    series: dict[str, SeriesIn] | None = None


# --- reading ------------------------------------------------------------------------------------


def _field_path(loc: tuple) -> str:
    return ".".join(str(part) for part in loc) or "(top level)"


def _validate(model: type[BaseModel], data: Any) -> Any:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        msg = err["msg"].removeprefix("Value error, ")
        raise FormatError(f"{_field_path(err['loc'])}: {msg}") from None


def load_json(text: str) -> Any:
    """Strict JSON: no NaN or Infinity, no key given twice, no absurd nesting."""
    try:
        data = json.loads(text, parse_constant=_refuse_constant, object_pairs_hook=_one_each)
    except json.JSONDecodeError as exc:
        raise FormatError(
            f"invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"
        ) from None
    except RecursionError:
        raise FormatError(_TOO_DEEP) from None
    if not documents.nests_within(data, documents.MAX_DEPTH):
        raise FormatError(_TOO_DEEP)
    return data


_TOO_DEEP = f"invalid JSON: nested deeper than {documents.MAX_DEPTH} levels"


def _one_each(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise FormatError(f"invalid JSON: the key {key!r} is given twice")
        out[key] = value
    return out


def _refuse_constant(name: str) -> float:
    raise FormatError(f"invalid JSON: {name} is not a number")


def parse_curves(text: str) -> Curves:
    parsed = _validate(CurvesFile, load_json(text))
    curves = []
    for i, item in enumerate(parsed.curves):
        try:
            curves.append(curve_from_dict(item))
        except ValueError as exc:  # "<field>: <what is wrong>"
            raise FormatError(f"curves.{i}.{exc}") from None
    return Curves(curves, parsed.delta, parsed.bs_min_mib, parsed.bs_max_mib)


def parse_impact(text: str) -> ImpactFile:
    parsed = _validate(ImpactFile, load_json(text))
    if (parsed.omega is None) == (parsed.series is None):
        raise FormatError("omega/series: give exactly one of the two")
    return parsed


SAMPLE_COLUMNS = ("pm", "cc", "bs_mib", "tp_mbps")


def parse_samples(text: str) -> SamplesFile:
    """JSON `{"samples": [...]}` or CSV with the header pm,cc,bs_mib,tp_mbps."""
    if text.lstrip().startswith(("{", "[")):
        return _validate(SamplesFile, load_json(text))
    reader = csv.DictReader(io.StringIO(text))
    header = [h.strip() for h in (reader.fieldnames or [])]
    if sorted(header) != sorted(SAMPLE_COLUMNS):
        raise FormatError(
            f"CSV header: expected {','.join(SAMPLE_COLUMNS)}, got {','.join(header)}"
        )
    rows = []
    for line, row in enumerate(reader, start=2):
        values = {k.strip(): (v or "").strip() for k, v in row.items() if k is not None}
        if None in row:
            raise FormatError(f"CSV line {line}: more fields than the header")
        for key in ("bs_mib", "tp_mbps"):
            try:
                number = float(values[key])
            except ValueError:
                raise FormatError(
                    f"CSV line {line}, {key}: not a number: {values[key]!r}"
                ) from None
            if not math.isfinite(number):
                raise FormatError(f"CSV line {line}, {key}: must be finite")
            values[key] = number
        try:
            rows.append(SampleIn.model_validate(values))
        except ValidationError as exc:
            err = exc.errors()[0]
            msg = err["msg"].removeprefix("Value error, ")
            raise FormatError(f"CSV line {line}, {_field_path(err['loc'])}: {msg}") from None
    if not rows:
        raise FormatError("samples: no data rows")
    return SamplesFile(samples=rows)


# --- computing on parsed input ----------------------------------------------------------------


def impact_results(parsed: ImpactFile) -> list[ImpactResult]:
    results = []
    try:
        if parsed.omega is not None:
            for cc, omegas in parsed.omega.items():
                if not omegas:
                    raise FormatError(f"omega.{cc}: no subflows")
                results.append(impact_from_omegas(normalize_cc(cc), omegas))
        else:
            for cc, series in parsed.series.items():
                results.append(impact_from_series(normalize_cc(cc), series.tp0, series.excluded))
    except FormatError:
        raise
    except ValueError as exc:  # the algorithm's own checks (empty series, zero TP_0, ...)
        raise FormatError(str(exc)) from None
    return results


# --- writing ------------------------------------------------------------------------------------


def _r(value: float | None) -> float | None:
    return None if value is None else round(float(value), DIGITS)


def _round(value: Any) -> Any:
    """Floats to DIGITS decimals; anything else (ints, None, flags, lists) as it is."""
    return round(value, DIGITS) if isinstance(value, float) else value


def curve_to_file(curve: AnyCurve) -> dict:
    """A curve as `mpcoa fit` writes it: `curve_to_dict`'s form, rounded, and without `kind` for
    the paper's quadratic, so that readers of the paper's format still take those curves."""
    data = {k: _round(v) for k, v in curve_to_dict(curve).items()}
    if data["kind"] == Curve.kind:
        del data["kind"]
    return data


def fit_to_dict(fit: Fit) -> dict:
    return {
        "pm": fit.pm,
        "model": fit.model,
        "n": fit.n,
        "r2": _r(fit.r2),
        "adj_r2": _r(fit.adj_r2),
        "buffer_p_value": fit.buffer_p_value,
        "max_p_value": fit.max_p_value,
        "gate_passed": fit.gate_passed,
        "coefficients": [
            {"name": c.name, "value": _r(c.value), "p_value": c.p_value} for c in fit.coefficients
        ],
        "curve_p_values": fit.curve_p_values,
        "warnings": fit.warnings,
        "failing_arms": fit.failing_arms,
        "arms": [{k: _round(v) for k, v in asdict(arm).items()} for arm in fit.arms],
    }


def fits_to_dict(fits: list[Fit]) -> dict:
    return {
        "model": fits[0].model,
        "curves": [curve_to_file(c) for f in fits for c in f.curves],
        "fits": [fit_to_dict(f) for f in fits],
    }


def solution_to_dict(solution: SolverAnswer) -> dict:
    return {
        "opm": solution.opm,
        "occ": solution.occ,
        "obs_mib": _r(solution.obs_mib),
        "otp_mbps": _r(solution.otp_mbps),
        "tp_max_mbps": _r(solution.tp_max_mbps),
        "tp_max_bs_mib": _r(solution.tp_max_bs_mib),
        "tp_max_pm": solution.tp_max_pm,
        "tp_max_cc": solution.tp_max_cc,
        "target_mbps": _r(solution.target_mbps),
        "delta": solution.delta,
        "bs_min_mib": solution.bs_min_mib,
        "bs_max_mib": solution.bs_max_mib,
        "arms": [
            {
                "pm": arm.pm,
                "cc": arm.cc,
                "peak_bs_mib": _r(arm.peak_bs_mib),
                "peak_tp_mbps": _r(arm.peak_tp_mbps),
                "obs_mib": _r(arm.obs_mib),
                "tp_at_obs_mbps": _r(arm.tp_at_obs_mbps),
                "same_as_fullmesh": arm.same_as_fullmesh,
                "chosen": (arm.pm, arm.cc) == (solution.opm, solution.occ),
                # what the measurements support (None where the solver had none)
                "kind": arm.kind,
                "fitted_peak_tp_mbps": _round(arm.fitted_peak_tp_mbps),
                "measured_obs_mib": _round(arm.measured_obs_mib),
                "measured_max_mbps": _round(arm.measured_max_mbps),
                "measured_noise_mbps": _round(arm.measured_noise_mbps),
            }
            for arm in solution.arms
        ],
        "otp_fitted_mbps": _round(solution.otp_fitted_mbps),
        "measured_obs_mib": _round(solution.measured_obs_mib),
        "otp_capped_to_measured": solution.otp_capped_to_measured,
        "flags": solution.flags,
    }


def impact_to_dict(results: list[ImpactResult]) -> dict:
    return {
        "impact": [
            {
                "cc": r.cc,
                "omegas": {name: _r(v) for name, v in r.omegas.items()},
                "subset": r.subset,
                "standby": r.standby,
                "same_as_fullmesh": r.same_as_fullmesh,
            }
            for r in results
        ]
    }

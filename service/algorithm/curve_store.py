"""Curves as JSON-ready dicts and back: {"kind": "quadratic" | "saturating", "pm", "cc", ...}.

The one serialised form of a curve, for the stored fits and the CLI's files alike. A dict without
"kind" is the paper's quadratic (the format of stored fits before kinds existed, and of the
paper's curves files). Reading checks every field and names the bad one first ("a: ...").
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from .curve import Curve, normalize_cc, normalize_pm
from .saturating_curve import SaturatingCurve

AnyCurve = Curve | SaturatingCurve
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
    if kind not in CURVE_KINDS:
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

"""Curves as JSON-ready dicts and back: {"kind": "quadratic" | "saturating", "pm", "cc", ...}.

A dict without "kind" is the paper's quadratic (the format of stored fits before kinds existed).
"""

from __future__ import annotations

from collections.abc import Mapping

from .curve import Curve, normalize_cc, normalize_pm
from .saturating_curve import SaturatingCurve

AnyCurve = Curve | SaturatingCurve
CURVE_KINDS = {Curve.kind: Curve, SaturatingCurve.kind: SaturatingCurve}
_PARAMS = {
    Curve.kind: ("a", "b", "c"),
    SaturatingCurve.kind: ("plateau_mbps", "knee_mib", "sharpness"),
}


def curve_to_dict(curve: AnyCurve) -> dict:
    return curve.to_dict()


def curve_from_dict(data: Mapping) -> AnyCurve:
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
        try:
            check(data[name])
        except ValueError as exc:
            raise ValueError(f"{name}: {exc}") from None
    params = {name: data[name] for name in _PARAMS[kind]}
    same = bool(data.get("same_as_fullmesh", False))
    return CURVE_KINDS[kind](pm=data["pm"], cc=data["cc"], same_as_fullmesh=same, **params)

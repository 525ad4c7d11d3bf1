"""The field types a bundle schema is written in (`bundle_schema_v1`, and later versions):
strict, bounded, and naming what is wrong in their messages."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator, ConfigDict, Field

from probes.vocabulary import FORBIDDEN_TEXT

from . import bundle_limits as limits

#: A section of the document: no key it does not know, no value coerced from another type.
STRICT = ConfigDict(strict=True, extra="forbid", frozen=True)


def _timestamp(value: Any) -> datetime:
    if not isinstance(value, str) or len(value) > 40:
        raise ValueError("must be an ISO 8601 timestamp")
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise ValueError(f"{value!r} is not an ISO 8601 timestamp") from None
    if parsed.tzinfo is None:
        raise ValueError("a timestamp needs its UTC offset")
    if not 1970 <= parsed.year <= 9000:  # also keeps the conversion to UTC within range
        raise ValueError(f"{value!r} is not a time a probe ran at")
    return parsed


def _plain(value: str) -> str:
    bad = FORBIDDEN_TEXT.search(value)
    if bad:
        raise ValueError(f"control character U+{ord(bad.group()):04X} at {bad.start()}")
    return value


def bounded(value: Any) -> Any:
    """Free-form JSON: at most MAX_JSON_DEPTH deep (a reader recursing on it stays well within
    Python's recursion limit)."""
    stack = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict | list):
            if depth > limits.MAX_JSON_DEPTH:
                raise ValueError(f"nested deeper than {limits.MAX_JSON_DEPTH} levels")
            stack.extend((v, depth + 1) for v in (node.values() if isinstance(node, dict)
                                                   else node))
    return value


Timestamp = Annotated[datetime, BeforeValidator(_timestamp)]


def Num(lo: float, hi: float, *, gt: bool = False) -> Any:
    """A finite JSON number in [lo, hi] ((lo, hi] with `gt`); an integer is a number too."""
    bound = {"gt": lo} if gt else {"ge": lo}
    return Annotated[float, Field(**bound, le=hi, allow_inf_nan=False)]


def Int(lo: int, hi: int) -> Any:
    return Annotated[int, Field(ge=lo, le=hi)]


def Text(max_length: int) -> Any:
    """A string of at most `max_length` characters, no control or bidi-formatting character."""
    return Annotated[str, Field(max_length=max_length), AfterValidator(_plain)]


def Raw(max_length: int) -> Any:
    """A string kept as it came (a tool's output: newlines allowed)."""
    return Annotated[str, Field(max_length=max_length)]


def Items(item: Any, max_length: int, min_length: int = 0) -> Any:
    """A list of at most `max_length` items, its length checked before any item is (a list of
    millions is refused at once, not after millions of checks)."""
    def short_enough(value: Any) -> Any:
        if isinstance(value, list) and len(value) > max_length:
            raise ValueError(f"{len(value)} items, more than {max_length}")
        return value

    return Annotated[list[item], BeforeValidator(short_enough),
                     Field(min_length=min_length, max_length=max_length)]


Json = Annotated[Any, AfterValidator(bounded)]
JsonObject = Annotated[dict[str, Any], AfterValidator(bounded)]

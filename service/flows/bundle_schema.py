"""What a campaign bundle's document may hold, one schema per format version (docs/formats.md).

`validate_document` reads bundle.json's text into the schema of the version it names: strict
pydantic models, every value of its column's type and within what a campaign can contain
(`bundle_limits`). The schemas of each version live in their own module (`bundle_schema_v1`); a
new version adds a module and a line to `SCHEMAS`. A bad document is an `Invalid` naming the field.
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from probes.vocabulary import FORBIDDEN_TEXT

from ..errors import Invalid
from . import bundle_limits as limits

FORMAT = "mpcoa-campaign-bundle"


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


def _no_constant(name: str):
    raise ValueError(f"{name} is not a finite number")


def parse_json(content: bytes, what: str) -> Any:
    """JSON text as Python values; NaN and Infinity refused, and strings no database stores (a
    NUL, a lone surrogate); nesting beyond the interpreter's recursion limit an Invalid like any
    other."""
    try:
        value = json.loads(content.decode("utf-8"), parse_constant=_no_constant)
    except (UnicodeDecodeError, ValueError) as exc:
        raise Invalid(f"{what} is not JSON: {str(exc)[:200]}", ("bundle",)) from None
    except RecursionError:
        raise Invalid(f"{what} is nested too deeply", ("bundle",)) from None
    if _ESCAPED.search(content):  # JSON text writes a NUL or a surrogate only as an escape
        _storable(value, what)
    return value


_ESCAPED = re.compile(rb"\\u(?:0000|d[89a-f])", re.IGNORECASE)
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def _storable(value: Any, what: str) -> None:
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            stack.extend(node)
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
        elif isinstance(node, str) and (bad := _UNSTORABLE.search(node)):
            raise Invalid(f"{what}: a string holds U+{ord(bad.group()):04X}, which no database "
                          "stores", ("bundle",))


def _schemas() -> dict[int, type[BaseModel]]:
    from . import bundle_schema_v1

    return {1: bundle_schema_v1.Document}


def versions() -> list[int]:
    return sorted(_schemas())


def check_version(doc: Any) -> dict[str, Any]:
    """The document's format and version, checked before anything else is read."""
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise Invalid(f"bundle.json: format must be {FORMAT!r}", ("format",))
    version = doc.get("version")
    # `type(...) is int`: true is an int to Python, not a version to a reader
    if type(version) is not int or version not in _schemas():
        raise Invalid(f"version {str(version)[:40]!r}: this mpcoa reads version "
                      + " or ".join(str(v) for v in versions()), ("version",))
    return doc


def validate_document(doc: dict[str, Any]) -> BaseModel:
    """A parsed bundle.json (`check_version` passed) against the schema of its version."""
    try:
        return _schemas()[doc["version"]].model_validate(doc)
    except ValidationError as exc:
        raise _invalid(exc) from None
    except RecursionError:
        raise Invalid("nested too deeply", ("bundle",)) from None


def _invalid(exc: ValidationError) -> Invalid:
    err = exc.errors(include_url=False, include_input=False)[0]
    loc = tuple(err["loc"])
    return Invalid(str(err["msg"])[:300] + (f" ({exc.error_count() - 1} more problems)"
                                            if exc.error_count() > 1 else ""), loc)

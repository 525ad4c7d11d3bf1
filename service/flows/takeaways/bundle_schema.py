"""What a campaign bundle's document may hold, one schema per format version (docs/formats.md).

`validate_document` reads bundle.json's text into the schema of the version it names: strict
pydantic models, every value of its column's type and within what a campaign can contain
(`bundle_limits`). The schemas of each version live in their own module (`bundle_schema_v1`,
`bundle_schema_v2`); a
new version adds a module and a line to `SCHEMAS`. A bad document is an `Invalid` naming the field.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import BaseModel, ValidationError

from ...errors import Invalid
from . import bundle_schema_v1, bundle_schema_v2

FORMAT = "mpcoa-campaign-bundle"


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


#: The document's schema per format version.
SCHEMAS: dict[int, type[BaseModel]] = {1: bundle_schema_v1.Document,
                                        2: bundle_schema_v2.Document}


def check_version(doc: Any) -> dict[str, Any]:
    """The document's format and version, checked before anything else is read."""
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise Invalid(f"bundle.json: format must be {FORMAT!r}", ("format",))
    version = doc.get("version")
    # `type(...) is int`: true is an int to Python, not a version to a reader
    if type(version) is not int or version not in SCHEMAS:
        raise Invalid(f"version {str(version)[:40]!r}: this mpcoa reads version "
                      + " or ".join(str(v) for v in sorted(SCHEMAS)), ("version",))
    return doc


def validate_document(doc: dict[str, Any]) -> BaseModel:
    """A parsed bundle.json (`check_version` passed) against the schema of its version."""
    try:
        return SCHEMAS[doc["version"]].model_validate(doc)
    except ValidationError as exc:
        raise _invalid(exc) from None
    except RecursionError:
        raise Invalid("nested too deeply", ("bundle",)) from None


def _invalid(exc: ValidationError) -> Invalid:
    err = exc.errors(include_url=False, include_input=False)[0]
    loc = tuple(err["loc"])
    return Invalid(str(err["msg"])[:300] + (f" ({exc.error_count() - 1} more problems)"
                                            if exc.error_count() > 1 else ""), loc)

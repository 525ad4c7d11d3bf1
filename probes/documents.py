"""YAML and JSON documents from files the operator wrote, parsed strictly: a key given twice, a
document nested absurdly deep or text that is not UTF-8 is refused with one line that says so,
never taken silently (YAML's and JSON's parsers keep the last of two equal keys) nor answered
with a RecursionError."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

#: far deeper than any topology, testbed or answer file (they nest 4 or 5 levels)
MAX_DEPTH = 32


class DocumentError(ValueError):
    """The document cannot be read or parsed; the message says where and why (one line)."""


class _StrictLoader(yaml.SafeLoader):
    """yaml.safe_load's loader, except that a mapping may not give a key twice."""


def _mapping(loader: _StrictLoader, node: yaml.MappingNode) -> dict:
    seen: set = set()
    for key_node, _value in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":  # `<<`: explicit keys override merged ones
            continue
        key = loader.construct_object(key_node, deep=True)
        try:
            duplicate = key in seen
        except TypeError:  # an unhashable key: construct_mapping says so
            break
        if duplicate:
            raise DocumentError(f"line {key_node.start_mark.line + 1}: the key {key!r} is given "
                                "twice")
        seen.add(key)
    loader.flatten_mapping(node)
    return loader.construct_mapping(node, deep=True)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise DocumentError(f"the key {key!r} is given twice")
        out[key] = value
    return out


def _no_constant(name: str) -> float:
    raise DocumentError(f"{name} is not a number")


def nests_within(value: Any, limit: int) -> bool:
    """Whether `value` nests no deeper than `limit` (iteratively: no recursion to run out of)."""
    stack = [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict | list):
            if level > limit:
                return False
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, level + 1) for child in children)
    return True


def parse(text: str, kind: str) -> Any:
    """`text` as `kind` ('json' or 'yaml'); a DocumentError says what is wrong."""
    try:
        if kind == "json":
            data = json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_no_constant)
        else:
            data = yaml.load(text, Loader=_StrictLoader)  # noqa: S506 (a SafeLoader)
    except RecursionError:
        raise DocumentError(f"nested deeper than {MAX_DEPTH} levels") from None
    except json.JSONDecodeError as exc:
        raise DocumentError(f"not valid JSON: line {exc.lineno} column {exc.colno}: "
                            f"{exc.msg}") from None
    except yaml.YAMLError as exc:
        raise DocumentError(f"not valid YAML: {' '.join(str(exc).split())[:300]}") from None
    if not nests_within(data, MAX_DEPTH):
        raise DocumentError(f"nested deeper than {MAX_DEPTH} levels")
    return data


def load(path: str | Path, max_bytes: int = 1 << 20) -> Any:
    """The JSON (a .json file) or YAML (anything else) document in `path`; a DocumentError
    names the file and says what is wrong with it."""
    p = Path(path)
    try:
        if p.stat().st_size > max_bytes:
            raise DocumentError(f"{p}: larger than {max_bytes} bytes")
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise DocumentError(f"{p}: not UTF-8 text") from None
    except OSError as exc:
        raise DocumentError(f"{p}: {exc.strerror or exc}") from None
    try:
        return parse(text, "json" if p.suffix == ".json" else "yaml")
    except DocumentError as exc:
        raise DocumentError(f"{p}: {exc}") from None

"""A result's stored JSON form, read from every form ever stored (`StoredForm`).

The algorithm's settled results (`adaptive.BulkDecision`, `stream_choice.StreamDecision`,
`Alternative`, `adaptive.variation.Variation`, `window_spread.WindowSpread`) are kept in a
campaign's state as they are, through this form; nothing above re-declares them.

A class names its fields' readers (`READERS`, the stored key is the field's name); `from_dict`
reads each key with its reader, keeps a key it does not name, or whose value is not of its type,
in `other` as stored (an imported bundle's may be anything: a read never fails), and remembers the
keys it read (`present`); `to_dict` writes back exactly those keys (an older form without a key
reads the default and writes back without it), or every named key for a value made here. A key in
`DERIVED` is one the value computes (a property): written from it, accepted on reading (for
`present`) but never passed to the constructor: a stored one is kept as it was, in `other`.
`WRITERS` rounds a field as it is stored; a key in `OPTIONAL` is written by a value made here
only when it is set.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import field
from typing import Any, ClassVar


def PRESENT():
    """The keys a value was read with (`to_dict`); not part of its meaning. A new `Field` per
    use: dataclasses name the one they are given."""
    return field(default=None, compare=False, repr=False)


def OTHER():
    """Keys a stored form carried that this version does not name: compared, never hashed."""
    return field(default_factory=dict, hash=False, repr=False)


# --- readers: the stored value as its type, or ValueError (the value is then kept in `other`) --
def text(value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise ValueError(value)


def number(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(value)
    return value


def count(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(value)
    return value


def flag(value: Any) -> bool | None:
    if value is None or isinstance(value, bool):
        return value
    raise ValueError(value)


def names(value: Any) -> tuple[str, ...]:
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise ValueError(value)
    return tuple(value)


def why(value: Any) -> Mapping[str, str]:
    if not isinstance(value, Mapping) or not all(isinstance(v, str) for v in value.values()):
        raise ValueError(value)
    return dict(value)


def nested(kind: type) -> Callable[[Any], Any]:
    def read(value: Any) -> Any:
        if value is None:
            return None
        if not isinstance(value, Mapping):
            raise ValueError(value)
        return kind.from_dict(value)
    return read


def each(kind: type) -> Callable[[Any], tuple]:
    """A list of JSON objects, each read as `kind`."""
    def read(value: Any) -> tuple:
        if not isinstance(value, (list, tuple)) or not all(isinstance(v, Mapping) for v in value):
            raise ValueError(value)
        return tuple(kind.from_dict(v) for v in value)
    return read


def as_json(value: Any) -> Any:
    """A field as JSON: a nested value its stored form, a tuple a list, a float that is not
    finite None (JSON has no infinity: PostgreSQL refuses it, SQLite stores text no reader
    parses)."""
    if hasattr(value, "to_dict"):
        return value.to_dict()
    if isinstance(value, Mapping):
        return {k: as_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [as_json(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


class StoredForm:
    """`from_dict`/`to_dict` by the class's `READERS` (stored key = field name)."""

    READERS: ClassVar[Mapping[str, Callable[[Any], Any]]] = {}
    # keys every stored form of the class carries, written before the fields
    CONSTANT: ClassVar[Mapping[str, Any]] = {}
    # keys the value computes: written from the attribute, never given to the constructor
    DERIVED: ClassVar[frozenset[str]] = frozenset()
    # a field's value as it is stored (rounded), where it is not the value itself
    WRITERS: ClassVar[Mapping[str, Callable[[Any], Any]]] = {}
    # keys a value made here writes only when set (not None)
    OPTIONAL: ClassVar[frozenset[str]] = frozenset()

    other: Mapping[str, Any]
    present: frozenset[str] | None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]):
        values: dict[str, Any] = {}
        other: dict[str, Any] = {}
        for key, raw in data.items():
            if key in cls.CONSTANT:
                continue
            reader = cls.READERS.get(key)
            try:
                if reader is None:
                    raise ValueError(key)
                value = reader(raw)
            except (TypeError, ValueError, KeyError):
                other[key] = raw  # kept as stored (see the module's docstring)
                continue
            if key in cls.DERIVED:
                other[key] = raw  # written back as it was (not computed again)
            else:
                values[key] = value
        present = frozenset(k for k in data if k in cls.READERS and k not in other)
        return cls(**values, other=other, present=present)

    def to_dict(self) -> dict[str, Any]:
        out = {}
        for name in self.READERS:  # in the class's order; a key kept as stored in its place
            if name in self.other:
                out[name] = as_json(self.other[name])
                continue
            if self.present is not None and name not in self.present:
                continue
            if self.present is None and not self._written(name):
                continue
            value = getattr(self, name)
            write = self.WRITERS.get(name)
            out[name] = as_json(value if write is None or value is None else write(value))
        return {**self.CONSTANT, **out, **as_json(self.other)}

    def _written(self, name: str) -> bool:
        """Whether a value made here writes `name` (every key but an `OPTIONAL` one unset)."""
        return name not in self.OPTIONAL or getattr(self, name) is not None

"""A typed value's stored JSON form, read from every form ever stored (`StoredForm`).

A class names its fields' readers (`READERS`, the stored key is the field's name); `from_dict`
reads each key with its reader, keeps a key it does not name, or whose value is not of its type,
in `other` as stored (an imported bundle's may be anything: a read never fails), and remembers the
keys it read (`present`); `to_dict` writes back exactly those keys (an older form without a key
reads the default and writes back without it), or every field for a value made here.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import field
from typing import Any, ClassVar

# the keys a value was read with (`to_dict`); not part of its meaning
PRESENT = field(default=None, compare=False, repr=False)


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
                values[key] = reader(raw)
            except (TypeError, ValueError, KeyError):
                other[key] = raw  # kept as stored (see the module's docstring)
        return cls(**values, other=other, present=frozenset(k for k in data if k in cls.READERS))

    def to_dict(self) -> dict[str, Any]:
        out = {name: as_json(getattr(self, name)) for name in self.READERS
               if self.present is None or name in self.present}
        return {**self.CONSTANT, **out, **as_json(self.other)}



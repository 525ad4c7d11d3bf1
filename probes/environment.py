"""The probes' own settings (a state folder, a binary, a timeout), as service/settings.py reads
them: every MPCOA_ variable is read there, and the probes are the layer below it, so it installs
its reader here when it is imported (every entry point, the CLI, the API and the workers, imports
it). Used on their own, without it, the probes keep their defaults."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

_reader: Callable[[str], Any] | None = None


def install(reader: Callable[[str], Any]) -> None:
    global _reader
    _reader = reader


def get(name: str, default: Any = None) -> Any:
    """The setting `name` (a field of service.settings.ProbeSettings), or `default` when unset
    or when no reader is installed."""
    value = None if _reader is None else _reader(name)
    return default if value is None else value

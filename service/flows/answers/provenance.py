"""An answer's provenance as sent: one key order, whichever path produced the row.

The provenance is free-form JSON (what the answer came from: its campaign, fits, counts, notes).
Its stored form is not its sent form: a fresh row holds the dict as the answer built it, a row
read back from PostgreSQL holds JSONB's order (shorter keys first), one read back from SQLite
the stored text's. So the answer is rendered with every object's keys sorted, at every depth
(lists keep their order): the same answer, fresh, cached or read back from either database, is
the same bytes, and a hash or ETag of it is safe.

`data_age_s`: the age of the answer's newest measurement when the answer was first given (its
row stored), in seconds. A repeated question gets the stored row back, so the figure does not
grow with the clock; the answer's data age now is `newest_measurement_at` to the reader's clock.
"""

from __future__ import annotations

from typing import Any


def canonical(value: Any) -> Any:
    """`value` with the keys of every object in it sorted (lists keep their order)."""
    if isinstance(value, dict):
        return {key: canonical(value[key]) for key in sorted(value)}
    if isinstance(value, list):
        return [canonical(item) for item in value]
    return value

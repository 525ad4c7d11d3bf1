"""The measured subflow selection as the campaign's state keeps it (`CampaignState.selection`).

`flows.campaign.phases.selection` decides it once per campaign: per CC the algorithm's own
result (`algorithm.selection.SelectionResult`: SP*, the path that led there, the standbys, Ω's
view), stored as it is through its `to_dict`/`from_dict`. Everything that reads it (the sweep,
the answer, the report, the dashboard, the bundle) reads those attributes; `to_dict` is the
stored JSON form (the `run_state` column, bundle versions 1 and 2) and `from_dict` reads every
form ever stored: keys a form did not have take their defaults, keys this version does not name
are kept and written back as they were (`algorithm.stored_form`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..algorithm.selection_types import SelectionResult


@dataclass(frozen=True)
class Selection:
    """The campaign's measured selection: `done` once decided, and per CC its result."""

    done: bool = False
    ccs: Mapping[str, SelectionResult] = field(default_factory=dict)
    other: Mapping[str, Any] = field(default_factory=dict)

    def of(self, cc: str | None) -> SelectionResult | None:
        """The CC's selection; None where the selection did not decide one (or `cc` is None)."""
        return None if cc is None else self.ccs.get(cc)

    def usable(self, cc: str | None) -> SelectionResult | None:
        """The CC's selection where it rests on a measurement (SP* the sweep and answer use)."""
        entry = self.of(cc)
        return entry if entry is not None and entry.usable else None

    def to_dict(self) -> dict[str, Any]:
        return {"done": self.done, "ccs": {cc: e.to_dict() for cc, e in self.ccs.items()},
                **self.other}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | Selection | None) -> Selection | None:
        """Reads the stored form; a `Selection` passes through, None stays None. A CC's entry
        that is not a JSON object (an imported bundle's may be anything) is left out."""
        if data is None or isinstance(data, Selection):
            return data
        return cls(done=bool(data.get("done", False)),
                   ccs={cc: SelectionResult.from_dict(e)
                        for cc, e in (data.get("ccs") or {}).items() if isinstance(e, Mapping)},
                   other={k: v for k, v in data.items() if k not in ("done", "ccs")})

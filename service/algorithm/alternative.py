"""A configuration the measurements cannot tell apart from the chosen one (the answer's
"within reach"); the sentence that names it is `state.confidence_summary`'s."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from .stored_form import OTHER, PRESENT, StoredForm, names, number, text


@dataclass(frozen=True)
class Alternative(StoredForm):
    """A configuration the measurements cannot tell apart from the chosen one: `label` as a user
    reads it (`FullMesh/bbr`, `subflows K-C`), `relative` its mean against the chosen mean
    (-0.02 is 2 % less), and what it differs in (`pm`, `cc`, `subset`). Stored as it is (a
    decision's `alternatives`; a selection's subsets within reach keep `label` and `relative`
    only)."""

    label: str = ""
    relative: float = 0.0
    differs_in: tuple[str, ...] = ()
    other: Mapping[str, Any] = OTHER()
    present: frozenset[str] | None = PRESENT()
    READERS: ClassVar = {"label": text, "relative": number, "differs_in": names}

"""A configuration the measurements cannot tell apart from the chosen one (the answer's
"within reach"); the sentence that names it is `flows.answers.confidence_summary`'s."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Alternative:
    """A configuration the measurements cannot tell apart from the chosen one: `label` as a user
    reads it (`FullMesh/bbr`, `subflows K-C`), `relative` its mean against the chosen mean
    (-0.02 is 2 % less), and what it differs in (`pm`, `cc`, `subset`)."""

    label: str
    relative: float
    differs_in: tuple[str, ...] = ()

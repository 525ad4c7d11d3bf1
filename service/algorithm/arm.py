"""One (path manager, congestion control) arm: the unit every calibration phase decides over.

A NamedTuple, so that it is hashable, orders like the (pm, cc) pair and compares equal to it:
code that still builds plain `(pm, cc)` tuples finds the same dictionary entries.
"""

from __future__ import annotations

from typing import NamedTuple

from probes.vocabulary import PathManager


class Arm(NamedTuple):
    pm: PathManager
    cc: str

    @property
    def label(self) -> str:
        """How answers and statements name it: `PCDC/bbr`."""
        return f"{self.pm}/{self.cc}"

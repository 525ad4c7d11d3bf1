"""A campaign's typed state and the reads of it every flow domain shares.

Above the algorithm, below the store and the flows: `CampaignState` (`campaign_state`) holds
what a campaign's phases decided, storing the algorithm's own frozen results (the sweep's
`BulkDecision` / `StreamDecision` inside `sweep_outcome`, `Alternative`, `Variation`,
`WindowSpread`, the selection's `SelectionResult` per CC) through their `to_dict` /
`from_dict`; `models/` keeps its JSON column only.
`selected` reads the measured selection off it (SP* per CC, the sweep's arms), and
`confidence_summary` is the sentence a decided answer leads with: both are read by the campaign,
answers and take-away domains alike, so they live below all of them.
"""

from .campaign_parts import ImportOrigin, OmegaCCs, Warm, WarmCheck
from .campaign_state import (
    STATE_VERSION,
    Budget,
    CampaignState,
    Tally,
    put_state,
    state_of,
)
from .selection_state import Selection
from .sweep_outcome import (
    STOP_BUDGET,
    STOP_SETTLED,
    BulkSweepOutcome,
    DecidedPromise,
    StreamSweepOutcome,
    SweepOutcome,
    read_sweep_decision,
)

__all__ = [
    "STATE_VERSION",
    "STOP_BUDGET",
    "STOP_SETTLED",
    "Budget",
    "BulkSweepOutcome",
    "CampaignState",
    "DecidedPromise",
    "ImportOrigin",
    "OmegaCCs",
    "Selection",
    "StreamSweepOutcome",
    "SweepOutcome",
    "Tally",
    "Warm",
    "WarmCheck",
    "put_state",
    "read_sweep_decision",
    "state_of",
]

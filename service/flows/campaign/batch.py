"""A batch of calibrations, like Flent's batches: several topologies from a file, run in a
shuffled order whose seed is stored, resumable after an interruption (`mpcoa calibrate --batch`).

The state file is JSON (`BatchState`): the seed, the order it gave, and per topology the campaign
that calibrates it. Resuming reads it back and goes on: a topology whose campaign is done is
skipped, one whose campaign is still queued or running is run on (the same campaign, its stored
probes kept), one never started or whose campaign failed or was cancelled gets a new campaign.
The order is shuffled so that a slow drift over the day (time of day, other traffic) does not
always fall on the same topologies; the seed makes the order replayable.
"""

from __future__ import annotations

import json
import os
import random
import secrets
from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy.orm import Session

from models import ACTIVE_CAMPAIGN_STATES

from ...errors import Invalid, NotFound
from ...store import campaigns as campaign_store

STATE_VERSION = 1
MAX_TOPOLOGIES = 1000


def read_topology_ids(text: str) -> list[int]:
    """One topology id per line; blank lines and `#` comments ignored; no repeats."""
    ids: list[int] = []
    for n, line in enumerate(text.splitlines(), start=1):
        item = line.split("#", 1)[0].strip()
        if not item:
            continue
        if not item.isdigit() or not 1 <= int(item) <= 2**31 - 1:
            raise Invalid(f"{item[:20]!r} is not a topology id", (f"line {n}",))
        if int(item) in ids:
            raise Invalid(f"topology {item} is listed twice", (f"line {n}",))
        ids.append(int(item))
    if not ids:
        raise Invalid("no topology ids", ("batch",))
    if len(ids) > MAX_TOPOLOGIES:
        raise Invalid(f"more than {MAX_TOPOLOGIES} topologies", ("batch",))
    return ids


@dataclass
class BatchState:
    seed: int
    order: list[int]
    campaigns: dict[int, int] = field(default_factory=dict)  # topology id -> campaign id

    @classmethod
    def new(cls, topology_ids: list[int], seed: int | None = None) -> BatchState:
        seed = secrets.randbelow(2**31) if seed is None else seed
        order = list(topology_ids)
        random.Random(seed).shuffle(order)  # noqa: S311 (a replayable order, not a secret)
        return cls(seed=seed, order=order)

    def to_json(self) -> str:
        return json.dumps({"version": STATE_VERSION, "seed": self.seed, "order": self.order,
                           "campaigns": {str(t): c for t, c in self.campaigns.items()}},
                          indent=1)

    @classmethod
    def from_json(cls, text: str) -> BatchState:
        try:
            doc = json.loads(text)
            if doc.get("version") != STATE_VERSION:
                raise ValueError(f"version {doc.get('version')!r}, not {STATE_VERSION}")
            state = cls(seed=int(doc["seed"]), order=[int(t) for t in doc["order"]],
                        campaigns={int(t): int(c) for t, c in doc["campaigns"].items()})
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise Invalid(f"not a batch state file ({exc})", ("state",)) from None
        return state

    def save(self, path: Path) -> None:
        """Written whole or not at all (a rename), so an interrupted batch can always resume."""
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(self.to_json())
        os.replace(tmp, path)


def next_topology(
    session: Session, state: BatchState, handled: set[int]
) -> tuple[int, int | None] | None:
    """(topology id, campaign to run on or None for a new one), or None when every topology is
    done or was `handled` by this run (a failed campaign is tried again once per run)."""
    for tid in state.order:
        if tid in handled:
            continue
        cid = state.campaigns.get(tid)
        if cid is None:
            return tid, None
        try:
            campaign = campaign_store.get_campaign(session, campaign_id=cid)
        except NotFound:  # the state names a campaign this database does not have: anew
            return tid, None
        if campaign.state in ACTIVE_CAMPAIGN_STATES:
            return tid, cid
        if campaign.state != "done":
            return tid, None
    return None

"""Version 2 of the campaign bundle's document (docs/formats.md, "Campaign bundle").

Version 1 with one change: the campaign row carries its `run_state`
(service/state/campaign_state.py: the probe budget and what the phases decided) where version 1
had seven budget columns and `notes`. Every other section is version 1's (`bundle_schema_v1`); a
version-1 document still imports (flows/takeaways/bundle_import converts its row with
`CampaignState.from_legacy`).
"""

# ruff: noqa: RUF012 -- pydantic models (`Open` is a BaseModel ruff cannot see): defaults are copied
from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from . import bundle_limits as lim
from .bundle_fields import Int, Items, JsonObject, Num, Text
from .bundle_schema_v1 import (
    CC,
    AdaptiveNote,
    CampaignPlan,
    Count,
    ExtraImpactRuns,
    Mib,
    Open,
    SelectionNote,
    Spent,
    Subflows,
)
from .bundle_schema_v1 import (
    Document as DocumentV1,
)

Phase = Text(16)
Unsettled = Annotated[dict[CC, Subflows], Field(max_length=lim.MAX_OFFERED_CCS)]


class PhasePlan(Open):
    probes: Count = 0
    probe_seconds: Num(0, 1e12) = 0.0


class BudgetState(Open):
    cap_s: Num(0, 1e9, gt=True) | None = None
    planned: Count = 0
    done: Count = 0
    used_s: Num(0, 1e12) = 0.0
    phase_plan: Annotated[dict[Phase, PhasePlan], Field(max_length=16)] = {}
    spent: Annotated[dict[Phase, Spent], Field(max_length=16)] = {}
    asked: Annotated[dict[Phase, Count], Field(max_length=16)] = {}
    settled: bool = False
    exhausted: bool = False
    extra_impact_runs: ExtraImpactRuns = {}
    extra_rounds: Int(0, 10_000) = 0


class WarmState(Open):
    from_campaign: Int(0, 2**63 - 1) | None = None
    from_recommendation: Int(0, 2**63 - 1) | None = None
    probes: Count = 0
    verdict: Text(64) | None = None
    checks: Items(JsonObject, 1000) = []


class RunState(Open):
    """What store/campaigns.flags and report, flows/answers/calibrated and flows/campaign/selected
    read."""

    version: Literal[1] = 1
    budget: BudgetState = BudgetState()
    warm: WarmState | None = None
    omega_ccs: JsonObject | None = None
    unsettled_omegas: Unsettled | None = None
    selection: SelectionNote | None = None
    sweep_decision: AdaptiveNote | None = None
    grid_extended: Items(Mib, lim.MAX_GRID) | None = None
    grid_below_plateau: Mib | None = None
    failed_probes: Items(JsonObject, lim.MAX_MEASUREMENTS) | None = None
    unfitted_arms: Items(Text(64), 4 * lim.MAX_CCS) | None = None
    imported: JsonObject | None = None
    other: JsonObject = {}


class CampaignRow(CampaignPlan):
    """Version 2: the campaign's state in one value."""

    run_state: RunState = RunState()


class Document(DocumentV1):
    version: Literal[2]
    campaign: CampaignRow

"""A probe tool is a plug-in: a toy tool registered from this module alone (no other file knows
it) is accepted by the plan, found in the testbed's inventory, chosen, and runs every probe of a
real campaign on the emulated testbed through the production flows (start, the in-process
runner, the testbed prober, recording, the answer). Unregistered, the plan refuses its name.

The toy measures with iperf3's backend under its own name, counting its probes: what is under
test is the way in, not a new way to measure."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import ValidationError
from sqlalchemy import select

from models import Measurement
from probes.base import MeasurementRequest, MeasurementResult
from probes.tools.iperf3 import Iperf3Backend
from probes.tools.registry import ProbeTool, register, unregister
from service.algorithm.topology import TopologySpec
from service.db import session_scope, upgrade
from service.flows.campaign import dispatch
from service.flows.campaign.plan import CampaignParameters
from service.flows.campaign.runner import run_campaign
from service.settings import get_settings
from service.store import campaigns, recommendations
from service.store.inventory import ensure_topology

from .conftest import topology_body

pytestmark = pytest.mark.netns

PARAMS = {"ccs": ["reno"], "buffer_grid_mib": [0.0625, 0.125, 0.25], "runs": 1, "duration_s": 2,
          "mode": "grid", "probe_tool": "toy",
          "probe_seconds_budget": (3 + 6) * 2}  # the paper's procedure once: no extra rounds


class ToyBackend:
    def __init__(self, tool: Toy, pair: Any) -> None:
        self.tool, self.inner = tool, Iperf3Backend(pair)

    def capabilities(self) -> dict[str, Any]:
        return self.inner.capabilities()

    def measure(self, request: MeasurementRequest) -> MeasurementResult:
        self.tool.probes.append(request)
        result = self.inner.measure(request)
        return result.model_copy(update={"tool": self.tool.name, "tool_version": "0.1"})


class Toy(ProbeTool):
    name = "toy"
    measures = ("bulk",)
    preference = 90
    install = "install the toy"

    def __init__(self) -> None:
        self.probes: list[MeasurementRequest] = []

    def found(self, binary: str | None = None) -> dict[str, str | None]:
        return {"toy": "0.1"}

    def backend(self, pair: Any, **options: Any) -> ToyBackend:
        return ToyBackend(self, pair)


@pytest.fixture
def toy() -> Iterator[Toy]:
    tool = register(Toy())
    try:
        yield tool
    finally:
        unregister(tool.name)


@pytest.fixture
def embedded(testbed, tmp_path, monkeypatch):
    """Production's embedded default (SQLite, in-process), this test's testbed probed."""
    url = f"sqlite:///{tmp_path / 'toy.sqlite3'}"
    monkeypatch.setenv("MPCOA_DATABASE_URL", url)
    monkeypatch.setenv("MPCOA_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("MPCOA_TESTBED", testbed.name)
    monkeypatch.setitem(dispatch._executors, "inprocess", lambda *_: None)  # run below
    get_settings.cache_clear()
    upgrade(url)
    try:
        yield get_settings()
    finally:
        get_settings.cache_clear()


def test_a_toy_tool_registered_here_runs_a_whole_campaign(sites, toy, embedded):
    settings = embedded
    with session_scope() as s:
        tid = ensure_topology(s, spec=TopologySpec.model_validate(topology_body(*sites))).id
        cid = dispatch.start_campaign(s, topology_id=tid, params=CampaignParameters(**PARAMS),
                                      reason="manual", settings=settings).id
    assert run_campaign(cid, settings=settings) == "done"
    with session_scope() as s:
        campaign = campaigns.get_campaign(s, campaign_id=cid)
        assert campaign.probe_tool == "toy", campaign.error
        rows = s.scalars(select(Measurement).where(Measurement.campaign_id == cid)).all()
        answer = recommendations.calibrated_recommendation_of(s, campaign_id=cid)
    # every probe of every phase ran on the toy, and it ran no other
    assert rows and {(m.tool, m.tool_version) for m in rows} == {("toy", "0.1")}
    assert len(toy.probes) >= len(rows) and {r.tool for r in toy.probes} == {"toy"}
    assert {m.status for m in rows} == {"ok"}, [m.error for m in rows if m.status != "ok"]
    assert answer is not None and answer.opm and answer.occ, campaign.error


def test_an_unregistered_tool_is_refused_by_the_plan():
    with pytest.raises(ValidationError, match="probe_tool"):
        CampaignParameters(**PARAMS)

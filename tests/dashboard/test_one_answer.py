"""The Fits page and the API give the same answer: OPM, OCC and OBS of a grid campaign (answered
from its fitted curves) and of an adaptive one (answered from its measured buffers), both seeded
with production's default model."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from probes.vocabulary import ISP, Site
from service.algorithm.topology import TopologySpec
from service.flows.campaign import recording
from service.flows.campaign.derive import fit_from_runs
from service.flows.campaign.finish import finish_campaign
from service.store import campaigns, inventory, results
from service.store.measurements import MeasurementRecord
from tests.conftest import new_campaign

from .crawl import crawl

pytestmark = pytest.mark.postgres
ADAPTIVE_GRID = [0.25, 0.5, 1.0, 2.0, 4.0, 8.0]


def _shown_answer(live, topology_id: int, delta: float) -> tuple[str, str, str]:
    page = httpx.get(live.url(f"/dashboard/topologies/{topology_id}/fits?delta={delta}"))
    assert page.status_code == 200, page.text
    shown = re.search(r"The smallest buffer reaching it: <strong>(\S+) / (\S+) at ([\d.]+) MiB",
                      page.text)
    assert shown is not None, page.text
    return shown.groups()


def _api_answer(live, topology_id: int, delta: float) -> tuple[str, str, str]:
    auth = {"Authorization": f"Bearer {live.token}"}
    posted = httpx.post(live.url("/recommendations"), headers=auth, timeout=30,
                        json={"topology_id": topology_id, "delta": delta})
    assert posted.status_code == 200, posted.text
    rec = httpx.get(live.url(f"/recommendations/{posted.json()['id']}")).json()
    assert rec["kind"] == "calibrated"
    return rec["opm"], rec["occ"], f"{rec['obs_mib']:.2f}"


@pytest.mark.parametrize("delta", [0.07, 0.15])
def test_a_grid_campaign_shows_the_answer_the_api_gives(live, delta):
    s = live.seeded
    assert _shown_answer(live, s.topology_id, delta) == _api_answer(live, s.topology_id, delta)


def _adaptive_topology(live) -> int:
    """A campaign in adaptive mode whose arms ramp up to a plateau with a knee between grid
    points: the fitted curves reach the target between measured buffers, the measured means only
    at one -- the answer is the measured buffer."""
    with live.session_factory() as session:
        spec = TopologySpec(
            local=Site(name="AdaptLo", isps=[ISP(name="Fiber", label="F", down_kbps=20000,
                                                 up_kbps=20000)]),
            remote=Site(name="AdaptRe", isps=[ISP(name="Uni", label="U", down_kbps=20000,
                                                  up_kbps=20000)]),
        )
        topology_id = inventory.ensure_topology(session, spec=spec, rtts_ms={"F-U": 40.0}).id
        campaign = new_campaign(session, topology_id, ccs=["cubic", "reno"], runs=2,
                                duration_s=5, buffer_grid_mib=ADAPTIVE_GRID, mode="adaptive")
        campaigns.set_state(session, campaign_id=campaign.id, state="running")
        plateau = {"cubic": 18.0, "reno": 15.0}
        knee = {"FullMesh": 1.4, "PCDC": 2.9}
        start = datetime.now(UTC) - timedelta(hours=1)
        for cc in plateau:
            for run in range(2):
                recording.record(session, MeasurementRecord(
                    campaign_id=campaign.id, phase="impact", pm="FullMesh", cc=cc,
                    bs_mib=8.0, run=run, subflows=["F-U"], duration_s=5,
                    goodput_mbps=[plateau[cc]] * 5, tool="synthetic", started_at=start,
                    finished_at=start))
        for pm, k in knee.items():
            for cc, top in plateau.items():
                for bs in ADAPTIVE_GRID:
                    for run in range(2):
                        tp = top * min(1.0, bs / k) + (0.1 if run else -0.1)
                        recording.record(session, MeasurementRecord(
                            campaign_id=campaign.id, phase="buffer", pm=pm, cc=cc,
                            bs_mib=bs, run=run, subflows=["F-U"], duration_s=5,
                            goodput_mbps=[tp] * 5, tool="synthetic", started_at=start,
                            finished_at=start))
        results.store_fits(session, campaign_id=campaign.id,
                           fits=fit_from_runs(session, campaign=campaign).fits)
        finish_campaign(session, campaign_id=campaign.id)
        session.commit()
    return topology_id


def test_an_adaptive_campaign_shows_the_answer_the_api_gives(live):
    topology_id = _adaptive_topology_once(live)
    delta = 0.07
    shown = _shown_answer(live, topology_id, delta)
    assert shown == _api_answer(live, topology_id, delta)
    assert float(shown[2]) in ADAPTIVE_GRID  # read off a measured buffer, not a fitted curve
    page = httpx.get(live.url(f"/dashboard/topologies/{topology_id}/fits")).text
    assert set(re.findall(r'<td class="model">(\w+)</td>', page)) == {"measured"}


def test_every_page_and_every_link_it_shows_answers_200(live):
    """From the index, every page and link (pages, downloads, static files, the API's answers)
    of the seeded data, the adaptive campaign included."""
    _adaptive_topology_once(live)
    with httpx.Client(base_url=live.base_url) as client:
        seen = crawl(lambda path: client.get(path), "/dashboard/")
    assert {p: s for p, s in seen.items() if s != 200} == {}
    s = live.seeded
    for path in (f"/dashboard/topologies/{s.topology_id}/fits",
                 f"/dashboard/topologies/{s.noisy_topology_id}/fits",
                 f"/dashboard/campaigns/{s.running_campaign_id}"):
        assert path in seen


_adaptive: dict[str, int] = {}


def _adaptive_topology_once(live) -> int:
    if "id" not in _adaptive:
        _adaptive["id"] = _adaptive_topology(live)
    return _adaptive["id"]

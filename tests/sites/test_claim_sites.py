"""calibration.claim takes the topology's two sites too (issue 11 item 5)."""

from __future__ import annotations

import pytest

from probes.vocabulary import ISP, Site
from service import db
from service.algorithm.topology import Topology
from service.flows import calibration
from service.flows.plan import ProbeStep
from service.settings import Settings
from service.store import campaigns, inventory, sitelocks
from tests.conftest import migrated_database, new_campaign


def _site(name: str) -> Site:
    # one ISP per site, the same wherever the site appears (a site's ISPs are its identity)
    label = name[-1]
    return Site(name=name, isps=[ISP(name=f"isp{label}", label=label, down_kbps=1e4, up_kbps=1e4)])


@pytest.fixture(scope="module")
def three_campaigns():
    """A-B, B-C (shares B) and D-E (disjoint), each with a queued campaign."""
    with migrated_database("mpcoa_sites") as url:
        engine = db.make_engine(url, pool_size=4)
        pairs = {"ab": ("SA", "SB"), "bc": ("SB", "SC"), "de": ("SD", "SE")}
        ids = {}
        with db.session_scope(engine) as s:
            for key, (a, b) in pairs.items():
                spec = Topology(local=_site(a), remote=_site(b))
                topology = inventory.ensure_topology(s, spec=spec)
                ids[key] = new_campaign(s, topology.id, runs=1, duration_s=5).id
        yield engine, ids
        engine.dispose()


@pytest.mark.postgres
def test_a_probe_holds_its_sites_across_campaigns(three_campaigns):
    engine, ids = three_campaigns
    step = ProbeStep(phase="impact", pm="fullmesh", cc="cubic", bs_mib=1.0, run=0)
    settings = Settings()
    with db.session_scope(engine) as s:
        ab = calibration.claim(s, campaign_id=ids["ab"], step=step, settings=settings)
    assert ab is not None
    with db.session_scope(engine) as s:
        bc = calibration.claim(s, campaign_id=ids["bc"], step=step, settings=settings)
        de = calibration.claim(s, campaign_id=ids["de"], step=step, settings=settings)
    assert bc is None, "SB is busy with A-B's probe"
    assert de is not None, "a disjoint pair runs in parallel"
    with db.session_scope(engine) as s:
        # the refused campaign gave its lease back: nobody holds B-C
        assert campaigns.get_campaign(s, campaign_id=ids["bc"]).lease_id is None
        got = sitelocks.holders(s)
        assert got == {"SA": ab, "SB": ab, "SC": None, "SD": de, "SE": de}
        calibration.release(s, campaign_id=ids["ab"], lease_id=ab)
    with db.session_scope(engine) as s:
        bc = calibration.claim(s, campaign_id=ids["bc"], step=step, settings=settings)
    assert bc is not None
    with db.session_scope(engine) as s:
        assert sitelocks.holders(s)["SB"] == bc
        calibration.release(s, campaign_id=ids["bc"], lease_id=bc)
        calibration.release(s, campaign_id=ids["de"], lease_id=de)
        assert set(sitelocks.holders(s).values()) == {None}

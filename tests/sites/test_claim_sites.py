"""leasing.claim takes the topology's two sites too."""

from __future__ import annotations

from datetime import timedelta

import pytest

from models import utcnow
from probes.vocabulary import Site
from service import db
from service.algorithm.topology import TopologySpec
from service.flows.campaign import leasing
from service.flows.campaign.plan import ProbeStep
from service.settings import Settings
from service.state import put_state, state_of
from service.store import campaigns, inventory, sitelocks
from tests.builders import site
from tests.conftest import migrated_database, new_campaign

OWNER = "the executor's turn"  # the token every claim here is made under


def _site(name: str) -> Site:
    # one ISP per site, the same wherever the site appears (a site's ISPs are its identity)
    return Site.model_validate(site(name, [(name[-1], 1e4)]))


@pytest.fixture(scope="module")
def three_campaigns():
    """A-B, B-C (shares B) and D-E (disjoint), each with a queued campaign."""
    with migrated_database("mpcoa_sites") as url:
        engine = db.make_engine(url, pool_size=4)
        pairs = {"ab": ("SA", "SB"), "bc": ("SB", "SC"), "de": ("SD", "SE")}
        ids = {}
        with db.session_scope(engine) as s:
            for key, (a, b) in pairs.items():
                spec = TopologySpec(local=_site(a), remote=_site(b))
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
        ab = leasing.claim(s, campaign_id=ids["ab"], step=step, owner=OWNER, settings=settings)
    assert ab is not None
    with db.session_scope(engine) as s:
        bc = leasing.claim(s, campaign_id=ids["bc"], step=step, owner=OWNER, settings=settings)
        de = leasing.claim(s, campaign_id=ids["de"], step=step, owner=OWNER, settings=settings)
    assert bc is None, "SB is busy with A-B's probe"
    assert de is not None, "a disjoint pair runs in parallel"
    with db.session_scope(engine) as s:
        # the refused campaign gave its lease back: nobody holds B-C
        assert campaigns.get_campaign(s, campaign_id=ids["bc"]).lease_id is None
        got = sitelocks.holders(s)
        assert got == {"SA": ab, "SB": ab, "SC": None, "SD": de, "SE": de}
        leasing.release(s, campaign_id=ids["ab"], lease_id=ab, owner=OWNER)
    with db.session_scope(engine) as s:
        bc = leasing.claim(s, campaign_id=ids["bc"], step=step, owner=OWNER, settings=settings)
    assert bc is not None
    with db.session_scope(engine) as s:
        assert sitelocks.holders(s)["SB"] == bc
        leasing.release(s, campaign_id=ids["bc"], lease_id=bc, owner=OWNER)
        leasing.release(s, campaign_id=ids["de"], lease_id=de, owner=OWNER)
        assert set(sitelocks.holders(s).values()) == {None}


@pytest.mark.postgres
def test_a_campaign_gives_its_sites_way_to_the_busier_site_s_asking_campaign(three_campaigns):
    """The fleet policy in `claim`: B-C (little work left) leaves SB to A-B (much more) while
    A-B's executor is asking for it, and takes SB when A-B stopped asking."""
    engine, ids = three_campaigns
    step = ProbeStep(phase="impact", pm="fullmesh", cc="cubic", bs_mib=1.0, run=0)
    settings = Settings()

    def claim(key: str) -> str | None:
        with db.session_scope(engine) as s:
            return leasing.claim(s, campaign_id=ids[key], step=step, owner=OWNER, settings=settings)

    def release(key: str, lease: str) -> None:
        with db.session_scope(engine) as s:
            leasing.release(s, campaign_id=ids[key], lease_id=lease, owner=OWNER)

    with db.session_scope(engine) as s:
        for key, planned in (("ab", 40), ("bc", 4)):
            c = campaigns.get_campaign(s, campaign_id=ids[key])
            put_state(c, state_of(c).with_budget(planned=planned))
    bc = claim("bc")
    assert bc is not None, "nobody else asks for SB: B-C takes it"
    assert claim("ab") is None, "SB is busy"
    with db.session_scope(engine) as s:
        assert campaigns.get_campaign(s, campaign_id=ids["ab"]).site_wait_at is not None
    release("bc", bc)

    assert claim("bc") is None, "A-B asked for SB and has more work on it: B-C gives way"
    with db.session_scope(engine) as s:
        row = campaigns.get_campaign(s, campaign_id=ids["bc"])
        assert row.lease_id is None and row.site_wait_at is not None
        assert set(sitelocks.holders(s).values()) <= {None}
    ab = claim("ab")
    assert ab is not None, "the busier site's campaign starts first"
    with db.session_scope(engine) as s:
        assert campaigns.get_campaign(s, campaign_id=ids["ab"]).site_wait_at is None
    release("ab", ab)

    # A-B's executor stopped asking (dead, or between probes for longer than the window)
    stale = utcnow() - timedelta(seconds=settings.site_wait_fresh_s + 5)
    with db.session_scope(engine) as s:
        campaigns.mark_site_wait(s, campaign_id=ids["ab"], at=stale)
    bc = claim("bc")
    assert bc is not None, "a campaign nobody runs never holds the others up"
    release("bc", bc)

"""The fleet policy and its benchmark (issue 11 item 5)."""

from __future__ import annotations

import random

import pytest
from sqlalchemy import create_engine
from sqlalchemy.orm import Session

from benchmarks.fleet import campaigns, simulate
from models import SiteLock
from service.flows.campaign.fleet import Pending, choose, gives_way, lower_bound


def test_choose_never_shares_a_site_and_starts_the_busiest_site_first():
    pending = [
        Pending("a>b", ("a", "b"), 10.0),
        Pending("b>c", ("b", "c"), 50.0),
        Pending("c>d", ("c", "d"), 5.0),
        Pending("d>a", ("d", "a"), 1.0),
    ]
    # site work: a 11, b 60, c 55, d 6 -> b>c first (b busiest), then d>a (a, d still free)
    assert [p.campaign for p in choose(pending, {"a", "b", "c", "d"})] == ["b>c", "d>a"]
    assert choose(pending, {"a", "c"}) == []


@pytest.mark.slow
def test_the_simulation_meets_the_target_with_the_real_locks():
    engine = create_engine("sqlite://")
    SiteLock.__table__.create(engine)
    plan = campaigns(6, 10, random.Random(7))
    with Session(engine) as session:
        makespan = simulate(plan, session)
    bound = lower_bound(
        {c: sum(d) for c, (_, d) in plan.items()}, {c: s for c, (s, _) in plan.items()}
    )
    assert bound <= makespan <= 1.25 * bound


def test_a_campaign_gives_way_only_to_an_asking_busier_rival_sharing_a_site():
    pending = [
        Pending("a>b", ("a", "b"), 100.0),  # b's busiest campaign
        Pending("b>c", ("b", "c"), 10.0),
        Pending("d>e", ("d", "e"), 1.0),
    ]
    free = {"a", "b", "c", "d", "e"}
    assert gives_way("b>c", pending, free, asking={"a>b"}) == "a>b"
    # nobody is asking for a>b's sites (its executor is gone or has not come back yet)
    assert gives_way("b>c", pending, free, asking=set()) is None
    # a>b cannot start anyway (a is busy): b>c must not wait for it
    assert gives_way("b>c", pending, free - {"a"}, asking={"a>b"}) is None
    # a disjoint pair never gives way, and the busiest campaign never does
    assert gives_way("d>e", pending, free, asking={"a>b", "b>c"}) is None
    assert gives_way("a>b", pending, free, asking={"b>c"}) is None
    # the rivals' order counts every pending campaign's work, not only the asking ones'
    more = [*pending, Pending("c>f", ("c", "f"), 500.0)]
    assert gives_way("a>b", more, free, asking={"b>c"}) == "b>c"

"""The fleet policy and its benchmark (issue 11 item 5)."""

from __future__ import annotations

import random

from sqlalchemy import create_engine
from sqlalchemy.orm import Session

from benchmarks.fleet import campaigns, simulate
from models import SiteLock
from service.flows.fleet import Pending, choose, lower_bound


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

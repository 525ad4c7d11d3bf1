"""Fleet scheduling: every ordered pair of N sites is a campaign; how close to the bound?

    .venv/bin/python benchmarks/fleet.py [--sites 6 12] [--probes 20] [--seed 1]

A discrete-event simulation with simulated probe durations (seeded, uniform 5-60 s). Each waiting
campaign decides as the workers' `leasing.claim` does, with
`service.flows.campaign.fleet.gives_way`; exclusion is the production `acquire_sites` /
`release_sites` on a SQLite database with a simulated clock (`now`), so two probes on one site would
be refused by the same code the workers run. Prints makespan, the lower bound (the busiest
site's total probe time) and their ratio per N; the target is a ratio <= 1.25.
"""

from __future__ import annotations

import argparse
import heapq
import itertools
import json
import random
from datetime import UTC, datetime, timedelta

from sqlalchemy import create_engine
from sqlalchemy.orm import Session

from models import SiteLock
from service.flows.campaign.fleet import Pending, gives_way, lower_bound
from service.store.sitelocks import acquire_sites, release_sites

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def campaigns(n: int, probes: int, rng: random.Random) -> dict[str, tuple]:
    """campaign -> (sites, [probe durations]); every ordered pair of n sites."""
    names = [f"site{i:02d}" for i in range(n)]
    return {
        f"{a}>{b}": ((a, b), [rng.uniform(5, 60) for _ in range(probes)])
        for a, b in itertools.permutations(names, 2)
    }


def simulate(plan: dict[str, tuple], session: Session) -> float:
    """The makespan of running `plan` as the workers do: whenever sites come free, every waiting
    campaign's executor asks `gives_way` (what `leasing.claim` asks) and takes its sites with
    the database lock unless it gives way."""
    queues = {c: list(d) for c, (_, d) in plan.items()}
    sites = {s for c in queues for s in plan[c][0]}
    busy: set[str] = set()
    running: list[tuple[float, str]] = []  # (finish time, campaign) heap
    now = 0.0
    while True:
        waiting = [c for c, q in queues.items() if q and c not in {r[1] for r in running}]
        pending = [Pending(c, plan[c][0], sum(queues[c])) for c in waiting]
        for me in waiting:  # the executors' retries, in any order
            if set(plan[me][0]) & busy:
                continue  # the lock would refuse it (skipped here only to save the query)
            if gives_way(me, pending, sites - busy, asking=set(waiting)) is not None:
                continue
            duration = queues[me][0]
            if not acquire_sites(
                session,
                sites=list(plan[me][0]),
                holder=me,
                lasts=timedelta(seconds=duration + 1),
                now=T0 + timedelta(seconds=now),
            ):
                continue  # a site is busy: the lock refuses, as it does the workers
            queues[me].pop(0)
            busy.update(plan[me][0])
            heapq.heappush(running, (now + duration, me))
            pending = [p for p in pending if p.campaign != me]
        if not running:
            return now
        now, done = heapq.heappop(running)
        release_sites(session, holder=done)
        busy.difference_update(plan[done][0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sites", type=int, nargs="+", default=[6, 12])
    parser.add_argument("--probes", type=int, default=20)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    engine = create_engine("sqlite://")
    SiteLock.__table__.create(engine)
    for n in args.sites:
        plan = campaigns(n, args.probes, random.Random(args.seed * 1000 + n))
        with Session(engine) as session:
            makespan = simulate(plan, session)
            session.rollback()
        bound = lower_bound(
            {c: sum(d) for c, (_, d) in plan.items()}, {c: s for c, (s, _) in plan.items()}
        )
        print(
            json.dumps(
                {
                    "sites": n,
                    "campaigns": len(plan),
                    "probes": len(plan) * args.probes,
                    "makespan_s": round(makespan, 1),
                    "lower_bound_s": round(bound, 1),
                    "ratio": round(makespan / bound, 3),
                }
            )
        )


if __name__ == "__main__":
    main()

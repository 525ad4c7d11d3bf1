"""A database full of rows, written by the service's own code at head, and what each migration
keeps of it: every table's rows, compared column by column where both revisions have them."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from sqlalchemy import inspect

from models import utcnow
from service import db
from service.algorithm.topology import TopologySpec
from service.flows.answers.recommend import recommend
from service.store import (
    applied,
    artifacts,
    browser_sessions,
    campaigns,
    inventory,
    leases,
    measurements,
    probesessions,
    schedules,
    sitelocks,
    tokens,
)
from tests.api.calibration import seed_srl_hu
from tests.builders import paper_site

#: a table's rows, by primary key: {column: value}
Rows = dict[tuple, dict[str, Any]]


def populate(url: str) -> None:
    """Every table of head gets rows through the code that writes them in production: a finished
    SRL -> HU campaign (its measurements, impact factors, fits and answer), a raw output and a
    capability report, a schedule and its event, a token and its login, a probe session, an
    apply, the site locks and a lease."""
    engine = db.make_engine(url)
    try:
        with db.session_scope(engine) as s:
            spec = TopologySpec(local=paper_site("SRL"), remote=paper_site("HU"))
            topology = inventory.ensure_topology(
                s, spec=spec, rtts_ms={n: 310.0 for n in spec.subflow_names()})
            campaign = seed_srl_hu(s, topology.id, runs=1, commit=False)["campaign"]
            lo, hi = campaigns.buffer_range(campaign)
            outcome = recommend(s, topology_id=topology.id, delta=campaign.delta, bs_min_mib=lo,
                                bs_max_mib=hi, queue_campaign=False, finished=campaign)
            campaign.recommendation_id = outcome.recommendation_id
            first = measurements.list_runs(s, campaign_id=campaign.id, phases=("impact",))[0]
            artifacts.store_artifacts(s, measurement_id=first.id,
                                      artifacts={"iperf3-client.json": b'{"end": {}}'})
            artifacts.save_capabilities(s, site_name="SRL", report={"kernel": "6.1.0-test"})
            schedules.set_schedule(s, topology_id=topology.id, cron="0 3 * * *",
                                   parameters={"runs": 1})
            schedules.add_event(s, campaign=campaign, previous_campaign_id=None,
                                kind="obs_moved", subject="SRL-HU", before=1.0, after=1.0)
            tokens.create_token(s, name="walk")
            token = tokens.list_tokens(s)[0]
            browser_sessions.open_session(s, token_id=token.id,
                                          expires_at=utcnow() + timedelta(hours=1))
            probesessions.open_session(s, campaign_id=campaign.id, lease_id="walk",
                                       step_key="impact/cubic/0",
                                       deadline=utcnow() + timedelta(minutes=5))
            applied.add_apply(s, topology_id=topology.id,
                              recommendation_id=outcome.recommendation_id, plan={"sites": {}})
            sitelocks.acquire_sites(s, sites=["SRL", "HU"], holder="walk",
                                    lasts=timedelta(minutes=5))
            leases.take_lease(s, name="scheduler", holder="walk", lasts=timedelta(minutes=5))
    finally:
        engine.dispose()


def snapshot(url: str) -> dict[str, Rows]:
    """Every table's rows as stored (the driver's values, no ORM), keyed by primary key."""
    engine = db.make_engine(url)
    try:
        with engine.connect() as conn:
            found = inspect(conn)
            tables: dict[str, Rows] = {}
            for table in found.get_table_names():
                if table == "alembic_version":
                    continue
                cols = [c["name"] for c in found.get_columns(table)]
                key = found.get_pk_constraint(table)["constrained_columns"] or cols
                quoted = ", ".join(f'"{c}"' for c in cols)
                rows = conn.exec_driver_sql(f'SELECT {quoted} FROM "{table}"').fetchall()
                tables[table] = {tuple(r[cols.index(k)] for k in key):
                                 dict(zip(cols, r, strict=True)) for r in rows}
            return tables
    finally:
        engine.dispose()


#: what a migration moves between columns of one row, in both directions (a downgrade folds the
#: typed state back into the campaign's notes, the upgrade takes it out again): not compared
#: across that migration
MOVED = {"0003": {"campaigns.notes"}}


def lost(before: dict[str, Rows], after: dict[str, Rows], moved=frozenset()) -> list[str]:
    """What `after` lost of `before`, in the tables both have: rows that are gone, and values
    that changed in the columns both have (a column one revision lacks is not compared, nor
    the `moved` ones, "table.column")."""
    problems = []
    for table in sorted(before.keys() & after.keys()):
        old, new = before[table], after[table]
        if old.keys() != new.keys():
            problems.append(f"{table}: {len(old)} rows -> {len(new)} rows")
            continue
        for key, row in old.items():
            changed = sorted(c for c in row.keys() & new[key].keys()
                             if row[c] != new[key][c] and f"{table}.{c}" not in moved)
            if changed:
                problems.append(f"{table} {key}: {changed} changed")
    return problems


def restrict(tables: dict[str, Rows], like: dict[str, Rows]) -> dict[str, Rows]:
    """`tables` with only the tables and columns that `like` has."""
    out: dict[str, Rows] = {}
    for name in tables.keys() & like.keys():
        columns = set(next(iter(like[name].values()), {})) or None
        out[name] = {k: {c: v for c, v in row.items() if columns is None or c in columns}
                     for k, row in tables[name].items()}
    return out


def counts(tables: dict[str, Rows]) -> dict[str, int]:
    return {name: len(rows) for name, rows in tables.items()}


def revisions() -> list[str]:
    """Every revision id, oldest first."""
    from alembic.script import ScriptDirectory

    script = ScriptDirectory.from_config(db.alembic_config("sqlite://"))
    return [r.revision for r in reversed(list(script.walk_revisions()))]

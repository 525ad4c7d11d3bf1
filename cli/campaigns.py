"""`mpcoa campaign list|cancel`: campaigns without curl, on the configured database as
`GET /campaigns` and `POST /campaigns/{id}/cancel` do (a running campaign stops after its
current probe: its runner reads the state between probes)."""

from __future__ import annotations

from typing import Annotated, Literal

import typer

from api.schemas import MAX_ID, CampaignOut
from cli.bundle import ready_database
from cli.errors import emit_json, service_failure
from cli.output import JsonOpt, say, show, table
from models import CAMPAIGN_STATES
from service.db import session_scope
from service.errors import ServiceError

app = typer.Typer(help="Measurement campaigns and their progress.", no_args_is_help=True)




@app.command("list")
def campaign_list(
    topology_id: Annotated[int | None, typer.Option("--topology", min=1, max=MAX_ID,
                                                    help="only this topology's")] = None,
    state: Annotated[Literal[CAMPAIGN_STATES] | None, typer.Option(
        help="only campaigns in this state")] = None,
    limit: Annotated[int, typer.Option(min=1, max=500, help="how many, at most")] = 50,
    offset: Annotated[int, typer.Option(min=0, max=MAX_ID, help="how many to skip")] = 0,
    as_json: JsonOpt = False,
) -> None:
    """Campaigns, newest first (as `GET /campaigns`)."""
    from service.store import campaigns

    ready_database()
    with session_scope() as s:
        rows, total = campaigns.list_campaigns(s, topology_id=topology_id, state=state,
                                               limit=limit, offset=offset)
        items = [CampaignOut.of(r) for r in rows]
    if as_json:
        emit_json({"items": [i.model_dump(mode="json") for i in items], "total": total,
                   "limit": limit, "offset": offset})
        return
    if not items:
        say("no campaigns")
        return
    rows = table("id", "topology", "state", "mode", "probes", "reason", "error",
                 title=None if len(items) == total else
                 f"campaigns {offset + 1}-{offset + len(items)} of {total}")
    for c in items:
        rows.add_row(str(c.id), str(c.topology_id), c.state, c.mode,
                     f"{c.probes_done}/{c.probes_total}", c.reason, c.error or "")
    show(rows)


@app.command("cancel")
def campaign_cancel(
    campaign_id: Annotated[int, typer.Argument(min=1, max=MAX_ID, help="campaign id")],
    as_json: JsonOpt = False,
) -> None:
    """Cancel a queued or running campaign (as `POST /campaigns/{id}/cancel`); cancelling a
    cancelled one again is no error, a finished one cannot be cancelled (status 2)."""
    from service.store import campaigns

    ready_database()
    try:
        with session_scope() as s:
            out = CampaignOut.of(campaigns.set_state(s, campaign_id=campaign_id,
                                                     state="cancelled"))
    except ServiceError as exc:
        service_failure(exc)
    if as_json:
        emit_json(out.model_dump(mode="json"))
        return
    say(f"campaign {out.id}: {out.state}")

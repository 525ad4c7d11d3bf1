"""`mpcoa campaign list|cancel`: campaigns without curl, on the configured database as
`GET /campaigns` and `POST /campaigns/{id}/cancel` do (a running campaign stops after its
current probe: its runner reads the state between probes)."""

from __future__ import annotations

from typing import Annotated, Literal

import typer

from api.schemas import MAX_ID, CampaignOut
from cli.bundle import ready_database
from cli.errors import emit_json, service_failure
from models import CAMPAIGN_STATES
from service.db import session_scope
from service.errors import ServiceError

app = typer.Typer(help="Measurement campaigns and their progress.", no_args_is_help=True)
JsonOpt = Annotated[bool, typer.Option("--json", help="print JSON")]


def _line(c: CampaignOut) -> str:
    return (f"{c.id}\ttopology {c.topology_id}\t{c.state}\t{c.mode}\t"
            f"{c.probes_done}/{c.probes_total} probes\t{c.reason}"
            + (f"\t{c.error}" if c.error else ""))


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
        typer.echo("no campaigns")
    for c in items:
        typer.echo(_line(c))


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
    typer.echo(f"campaign {out.id}: {out.state}")

"""Campaigns with their progress, and the measurements behind every answer (paginated)."""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Path, Query, Request, Response, status
from fastapi.responses import StreamingResponse

from api.deps import Limit, Offset, SessionDep, commit, require_read, require_write
from api.schemas import (
    MAX_ID,
    ArtifactOut,
    CampaignIn,
    CampaignOut,
    MeasurementDetail,
    MeasurementOut,
    Page,
)
from models import CAMPAIGN_STATES, MEASUREMENT_PHASES, MEASUREMENT_STATUSES
from probes.base import ARTIFACT_NAME_PATTERN
from probes.vocabulary import CongestionControl, PathManager
from service.errors import Conflict
from service.flows.campaign import mptcp_gate
from service.flows.campaign.dispatch import start_campaign
from service.flows.campaign.plan import CampaignParameters
from service.flows.takeaways import measurement_table
from service.flows.takeaways.bundle_export import spooled_bundle
from service.store import artifacts as artifact_store
from service.store import campaigns as svc
from service.store import measurements

Id = Annotated[int, Path(ge=1, le=MAX_ID)]
OptionalId = Annotated[int | None, Query(ge=1, le=MAX_ID)]
State = Literal[CAMPAIGN_STATES]

router = APIRouter()
# a campaign's probes last seconds each: polling faster than this only loads the server
POLL_AFTER_S = 5


@router.get(
    "/campaigns",
    response_model=Page[CampaignOut],
    tags=["campaigns"],
    dependencies=[Depends(require_read)],
)
def list_campaigns(
    session: SessionDep,
    topology_id: OptionalId = None,
    state: Annotated[State | None, Query()] = None,
    limit: Limit = 50,
    offset: Offset = 0,
):
    rows, total = svc.list_campaigns(
        session, topology_id=topology_id, state=state, limit=limit, offset=offset
    )
    return Page[CampaignOut](
        items=[CampaignOut.of(r) for r in rows], total=total, limit=limit, offset=offset
    )


@router.post(
    "/campaigns",
    response_model=CampaignOut,
    status_code=status.HTTP_202_ACCEPTED,
    tags=["campaigns"],
    dependencies=[Depends(require_write)],
    responses={
        401: {"description": "no valid token"},
        404: {"description": "unknown topology"},
        409: {"description": "the topology has a queued or running campaign, or MPTCP cannot "
                            "work between its sites (a blackhole lockout, repeated fallbacks)"},
    },
)
def create_campaign(body: CampaignIn, request: Request, response: Response, session: SessionDep):
    # One active campaign per topology; the database's partial unique index settles the race
    # between two requests that both pass this check (409 through api.errors).
    active = svc.active_campaign(session, topology_id=body.topology_id)
    if active is not None:
        raise Conflict(
            f"topology {body.topology_id} has campaign {active.id} {active.state}; "
            "cancel it or wait for it to finish",
            ("body", "topology_id"),
        )
    # MPTCP must be able to work between the sites, or every probe would be plain TCP
    mptcp_gate.check(session, body.topology_id, request.app.state.settings)
    campaign = start_campaign(
        session,
        topology_id=body.topology_id,
        params=CampaignParameters.model_validate(body.model_dump(exclude={"topology_id"})),
        reason="api",
        settings=request.app.state.settings,
    )
    commit(session)
    response.headers["Location"] = f"/campaigns/{campaign.id}"
    response.headers["Retry-After"] = str(POLL_AFTER_S)
    return CampaignOut.of(campaign)


@router.get(
    "/campaigns/{campaign_id}",
    response_model=CampaignOut,
    tags=["campaigns"],
    dependencies=[Depends(require_read)],
    responses={404: {"description": "unknown id"}},
)
def get_campaign(campaign_id: Id, session: SessionDep):
    return CampaignOut.of(svc.get_campaign(session, campaign_id=campaign_id))


@router.post(
    "/campaigns/{campaign_id}/cancel",
    response_model=CampaignOut,
    tags=["campaigns"],
    dependencies=[Depends(require_write)],
    responses={
        401: {"description": "no valid token"},
        404: {"description": "unknown id"},
        409: {"description": "the campaign already finished"},
    },
)
def cancel_campaign(campaign_id: Id, session: SessionDep):
    campaign = svc.set_state(session, campaign_id=campaign_id, state="cancelled")
    commit(session)
    return CampaignOut.of(campaign)


@router.get(
    "/campaigns/{campaign_id}/bundle",
    tags=["campaigns"],
    dependencies=[Depends(require_read)],
    response_class=StreamingResponse,
    responses={200: {"description": "the campaign bundle, a .tar.gz (docs/formats.md)",
                     "content": {"application/gzip": {}}},
               404: {"description": "unknown id"}},
)
def download_bundle(campaign_id: Id, session: SessionDep):
    """Everything about one campaign in one file: metadata, every measurement with its evidence
    and raw outputs, the derived Omegas, selection, fits and answer; `mpcoa import` loads it."""
    spool = spooled_bundle(session, campaign_id=campaign_id)
    size = spool.seek(0, io.SEEK_END)
    spool.seek(0)
    return StreamingResponse(_chunks(spool), media_type="application/gzip", headers={
        "Content-Length": str(size),
        "Content-Disposition": f'attachment; filename="mpcoa-campaign-{campaign_id}.tar.gz"'})


def _chunks(spool, size: int = 256 * 1024) -> Iterator[bytes]:
    """The spooled bundle in pieces, then closed (also when the client went away)."""
    try:
        while chunk := spool.read(size):
            yield chunk
    finally:
        spool.close()


TableFormat = Literal[measurement_table.FORMATS]


@router.get(
    "/campaigns/{campaign_id}/measurements",
    tags=["campaigns"],
    dependencies=[Depends(require_read)],
    response_class=Response,
    responses={200: {"description": "one row per probe, typed columns, units in the names",
                     "content": {"text/csv": {}, "application/vnd.apache.parquet": {}}},
               404: {"description": "unknown id"},
               422: {"description": "a format other than csv or parquet"}},
)
def download_measurements(
    campaign_id: Id, session: SessionDep,
    format_: Annotated[TableFormat, Query(alias="format")] = "csv",
):
    """The campaign's measurements as a table for analysis (pandas, R, a spreadsheet)."""
    svc.get_campaign(session, campaign_id=campaign_id)  # 404 before an empty table
    rows = measurements.list_runs(session, campaign_id=campaign_id,
                                  phases=measurement_table.PHASES)
    return Response(
        content=measurement_table.render(rows, format_),
        media_type=measurement_table.MEDIA_TYPES[format_],
        headers={"Content-Disposition":
                 f'attachment; filename="mpcoa-campaign-{campaign_id}-measurements.{format_}"'})


@router.get(
    "/measurements",
    response_model=Page[MeasurementOut],
    tags=["measurements"],
    dependencies=[Depends(require_read)],
)
def list_measurements(
    session: SessionDep,
    campaign_id: OptionalId = None,
    topology_id: OptionalId = None,
    phase: Annotated[Literal[MEASUREMENT_PHASES] | None, Query()] = None,
    pm: Annotated[PathManager | None, Query()] = None,
    cc: Annotated[CongestionControl | None, Query()] = None,
    status_: Annotated[Literal[MEASUREMENT_STATUSES] | None, Query(alias="status")] = None,
    limit: Limit = 50,
    offset: Offset = 0,
):
    rows, total = measurements.list_measurements(
        session,
        campaign_id=campaign_id,
        topology_id=topology_id,
        phase=phase,
        pm=pm,
        cc=cc,
        status=status_,
        limit=limit,
        offset=offset,
    )
    return Page[MeasurementOut](
        items=[MeasurementOut.model_validate(r) for r in rows],
        total=total,
        limit=limit,
        offset=offset,
    )


@router.get(
    "/measurements/{measurement_id}",
    response_model=MeasurementDetail,
    tags=["measurements"],
    dependencies=[Depends(require_read)],
    responses={404: {"description": "unknown id"}},
)
def get_measurement(measurement_id: Id, session: SessionDep):
    return MeasurementDetail.model_validate(
        measurements.get_measurement(session, measurement_id=measurement_id)
    )


ArtifactName = Annotated[str, Path(pattern=ARTIFACT_NAME_PATTERN, max_length=100)]


@router.get(
    "/measurements/{measurement_id}/artifacts",
    response_model=list[ArtifactOut],
    tags=["measurements"],
    dependencies=[Depends(require_read)],
    responses={404: {"description": "unknown id"}},
)
def list_artifacts(measurement_id: Id, session: SessionDep, request: Request):
    """The raw outputs stored with a measurement (iperf3 JSON, NetPerfMeter files, logs)."""
    rows = artifact_store.list_artifacts(session, measurement_id=measurement_id)
    return [ArtifactOut(name=r.name, size=r.size, media_type=r.media_type,
                        url=str(request.url_for("download_artifact", measurement_id=measurement_id,
                                                name=r.name)))
            for r in rows]


@router.get(
    "/measurements/{measurement_id}/artifacts/{name}",
    tags=["measurements"],
    dependencies=[Depends(require_read)],
    response_class=Response,
    responses={200: {"description": "the artifact as the tool wrote it"},
               404: {"description": "unknown id or name"}},
)
def download_artifact(measurement_id: Id, name: ArtifactName, session: SessionDep):
    media, data = artifact_store.get_artifact(session, measurement_id=measurement_id, name=name)
    return Response(content=data, media_type=media,
                    headers={"Content-Disposition": f'attachment; filename="{name}"'})

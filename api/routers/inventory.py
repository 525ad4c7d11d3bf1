"""Sites with their ISPs, topologies, and the paper's tables per topology."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Path, Query, Response, status

from api.deps import Limit, Offset, SessionDep, commit, require_read, require_write
from api.schemas import (
    MAX_ID,
    FitTable,
    ImpactTable,
    Page,
    SiteCapabilitiesOut,
    SiteIn,
    SiteOut,
    SubsetTable,
    TopologyIn,
    TopologyOut,
    TopologyPatch,
)
from service.algorithm.regression import ALL_MODEL_KINDS
from service.store import artifacts as artifact_store
from service.store import inventory, results

Id = Annotated[int, Path(ge=1, le=MAX_ID)]
OptionalId = Annotated[int | None, Query(ge=1, le=MAX_ID)]
ERRORS = {401: {"description": "no valid token"}, 404: {"description": "unknown id"}}

router = APIRouter()


def topology_out(row) -> TopologyOut:
    return TopologyOut.model_validate(
        {
            "id": row.id,
            "local_site": SiteOut.model_validate(row.local_site),
            "remote_site": SiteOut.model_validate(row.remote_site),
            "subflows": row.subflows,
            "homogeneous": inventory.topology_spec(row).is_homogeneous(),
            "created_at": row.created_at,
            "updated_at": row.updated_at,
        }
    )


# --- sites ---------------------------------------------------------------------------------------
@router.get(
    "/sites", response_model=Page[SiteOut], tags=["sites"], dependencies=[Depends(require_read)]
)
def list_sites(session: SessionDep, limit: Limit = 50, offset: Offset = 0):
    rows, total = inventory.list_sites(session, limit=limit, offset=offset)
    return Page[SiteOut](
        items=[SiteOut.model_validate(r) for r in rows], total=total, limit=limit, offset=offset
    )


@router.get(
    "/sites/{site_id}/capabilities",
    response_model=SiteCapabilitiesOut,
    tags=["sites"],
    dependencies=[Depends(require_read)],
    responses=ERRORS,
)
def get_site_capabilities(site_id: Id, session: SessionDep):
    """The latest capability report of the site's worker; 404 when it has not reported."""
    inventory.get_site(session, site_id=site_id)
    row = artifact_store.get_capabilities(session, site_id=site_id)
    return SiteCapabilitiesOut(site_id=row.site_id, reported_at=row.reported_at, report=row.report)


@router.post(
    "/sites",
    response_model=SiteOut,
    status_code=status.HTTP_201_CREATED,
    tags=["sites"],
    dependencies=[Depends(require_write)],
    responses={**ERRORS, 409: {"description": "a site of that name exists"}},
)
def create_site(body: SiteIn, session: SessionDep, response: Response):
    site = inventory.create_site(session, spec=body.spec(), description=body.description)
    commit(session)
    response.headers["Location"] = f"/sites/{site.id}"
    return SiteOut.model_validate(site)


@router.get(
    "/sites/{site_id}",
    response_model=SiteOut,
    tags=["sites"],
    dependencies=[Depends(require_read)],
    responses=ERRORS,
)
def get_site(site_id: Id, session: SessionDep):
    return SiteOut.model_validate(inventory.get_site(session, site_id=site_id))


@router.put(
    "/sites/{site_id}",
    response_model=SiteOut,
    tags=["sites"],
    dependencies=[Depends(require_write)],
    responses={**ERRORS, 409: {"description": "name taken, or ISP labels of a used site changed"}},
)
def update_site(site_id: Id, body: SiteIn, session: SessionDep):
    site = inventory.update_site(
        session, site_id=site_id, spec=body.spec(), description=body.description
    )
    commit(session)
    session.refresh(site)
    return SiteOut.model_validate(site)


@router.delete(
    "/sites/{site_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    tags=["sites"],
    dependencies=[Depends(require_write)],
    responses={**ERRORS, 409: {"description": "the site is used by a topology"}},
)
def delete_site(site_id: Id, session: SessionDep):
    inventory.delete_site(session, site_id=site_id)
    commit(session)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


# --- topologies ----------------------------------------------------------------------------------
@router.get(
    "/topologies",
    response_model=Page[TopologyOut],
    tags=["topologies"],
    dependencies=[Depends(require_read)],
)
def list_topologies(session: SessionDep, limit: Limit = 50, offset: Offset = 0):
    rows, total = inventory.list_topologies(session, limit=limit, offset=offset)
    return Page[TopologyOut](
        items=[topology_out(r) for r in rows], total=total, limit=limit, offset=offset
    )


@router.post(
    "/topologies",
    response_model=TopologyOut,
    status_code=status.HTTP_201_CREATED,
    tags=["topologies"],
    dependencies=[Depends(require_write)],
    responses={**ERRORS, 409: {"description": "the site pair exists"}},
)
def create_topology(body: TopologyIn, session: SessionDep, response: Response):
    row = inventory.create_topology(
        session,
        local_site_id=body.local_site_id,
        remote_site_id=body.remote_site_id,
        rtts_ms=body.rtts_ms,
    )
    commit(session)
    response.headers["Location"] = f"/topologies/{row.id}"
    return topology_out(row)


@router.get(
    "/topologies/{topology_id}",
    response_model=TopologyOut,
    tags=["topologies"],
    dependencies=[Depends(require_read)],
    responses=ERRORS,
)
def get_topology(topology_id: Id, session: SessionDep):
    return topology_out(inventory.get_topology(session, topology_id=topology_id))


@router.patch(
    "/topologies/{topology_id}",
    response_model=TopologyOut,
    tags=["topologies"],
    dependencies=[Depends(require_write)],
    responses=ERRORS,
)
def patch_topology(topology_id: Id, body: TopologyPatch, session: SessionDep):
    row = inventory.update_topology_rtts(session, topology_id=topology_id, rtts_ms=body.rtts_ms)
    commit(session)
    return topology_out(row)


@router.delete(
    "/topologies/{topology_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    tags=["topologies"],
    dependencies=[Depends(require_write)],
    responses={**ERRORS, 409: {"description": "the topology has campaigns or recommendations"}},
)
def delete_topology(topology_id: Id, session: SessionDep):
    inventory.delete_topology(session, topology_id=topology_id)
    commit(session)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


# --- the paper's tables --------------------------------------------------------------------------
@router.get(
    "/topologies/{topology_id}/impact-factors",
    response_model=ImpactTable,
    tags=["tables"],
    summary="Table 2: impact factors Omega per CC and subflow",
    dependencies=[Depends(require_read)],
    responses=ERRORS,
)
def get_impact_factors(topology_id: Id, session: SessionDep, campaign_id: OptionalId = None):
    return results.impact_table(session, topology_id=topology_id, campaign_id=campaign_id)


@router.get(
    "/topologies/{topology_id}/pcdc-subsets",
    response_model=SubsetTable,
    tags=["tables"],
    summary="Table 3: the PCDC subflow subset SP* per CC",
    dependencies=[Depends(require_read)],
    responses=ERRORS,
)
def get_pcdc_subsets(topology_id: Id, session: SessionDep, campaign_id: OptionalId = None):
    return results.subset_table(session, topology_id=topology_id, campaign_id=campaign_id)


@router.get(
    "/topologies/{topology_id}/fits",
    response_model=FitTable,
    tags=["tables"],
    summary="Table 4: buffer-to-throughput regressions per PM",
    dependencies=[Depends(require_read)],
    responses=ERRORS,
)
def get_fits(
    topology_id: Id,
    session: SessionDep,
    campaign_id: OptionalId = None,
    model_kind: Annotated[Literal[ALL_MODEL_KINDS] | None, Query()] = None,
):
    campaign, rows = results.fit_table(
        session, topology_id=topology_id, campaign_id=campaign_id, model_kind=model_kind
    )
    return {
        "topology_id": topology_id,
        "campaign_id": campaign.id if campaign else None,
        "fits": rows,
    }

"""Sites, their ISPs, and topologies (site pairs with their subflows): the stored inventory.

Validation of names, labels and bandwidths is the vocabulary's own (`probes.vocabulary`, through
`service.algorithm.topology`); this module keeps the rows consistent with it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from sqlalchemy import bindparam, func, select
from sqlalchemy.orm import Session

from models import ISP, Campaign, Recommendation, Site, Subflow, Topology

from ..algorithm import topology as algo
from ..errors import Conflict, Invalid, NotFound


# --- sites --------------------------------------------------------------------------------------
def get_site(session: Session, *, site_id: int) -> Site:
    site = session.get(Site, site_id)
    if site is None:
        raise NotFound(f"site {site_id} not found")
    return site


def list_sites(
    session: Session, *, limit: int = 100, offset: int = 0
) -> tuple[list[Site], int]:
    total = session.scalar(select(func.count(Site.id))) or 0
    rows = session.scalars(select(Site).order_by(Site.id).limit(limit).offset(offset))
    return list(rows), total


def site_spec(site: Site) -> algo.Site:
    """The row as the algorithm's validated Site."""
    return site_spec_of(site.name, [(i.name, i.label, i.down_kbps, i.up_kbps) for i in site.isps])


def site_spec_of(name: str, isps) -> algo.Site:
    """A site's name and its ISPs as (name, label, down_kbps, up_kbps) as the algorithm's Site:
    the one conversion from stored values (`site_spec`, `flows.answers.snapshot`)."""
    return algo.Site(name=name, isps=[
        algo.ISP(name=n, label=lb, down_kbps=d, up_kbps=u) for n, lb, d, u in isps
    ])


def without_addresses(spec: algo.Site) -> algo.Site:
    """The site as the algorithm knows it: an ISP's address plays no part in its maths."""
    return spec.model_copy(update={"isps": [i.model_copy(update={"address": None})
                                            for i in spec.isps]})


def _other_addresses(site: Site, spec: algo.Site) -> bool:
    """Whether `spec` names an ISP address other than the stored one (none given: the same)."""
    stored = {i.label: i.address for i in site.isps}
    return any(i.address is not None and i.address != stored.get(i.label) for i in spec.isps)


def registered_addresses(session: Session, *, site: str) -> dict[str, str]:
    """ISP label -> the address the site is registered with, for the ISPs that have one."""
    row = _find_site(session, site)
    return {i.label: i.address for i in (row.isps if row else []) if i.address}


def _isp_rows(spec: algo.Site) -> list[ISP]:
    return [
        ISP(position=k, name=i.name, label=i.label, down_kbps=i.down_kbps, up_kbps=i.up_kbps,
            address=i.address)
        for k, i in enumerate(spec.isps)
    ]


def find_site(session: Session, name: str) -> Site | None:
    return session.scalar(select(Site).where(Site.name == name))


_find_site = find_site


def create_site(session: Session, *, spec: algo.Site, description: str = "") -> Site:
    if _find_site(session, spec.name) is not None:
        raise Conflict(f"a site named {spec.name!r} exists", ("body", "name"))
    site = Site(name=spec.name, description=description, isps=_isp_rows(spec))
    session.add(site)
    session.flush()
    return site


def ensure_site(session: Session, *, spec: algo.Site, loc: tuple[str | int, ...] = ()) -> Site:
    """The stored site with this name and exactly these ISPs, created if absent.

    A stored site of the same name with other ISPs is a conflict: an inline topology never changes
    a stored site behind its other topologies' back (update it with PUT /sites/{id} instead).
    """
    site = _find_site(session, spec.name)
    if site is None:
        return create_site(session, spec=spec)
    if site_spec(site) != without_addresses(spec) or _other_addresses(site, spec):
        raise Conflict(
            f"site {spec.name!r} is stored with other ISPs (id {site.id}); "
            "send the same ISPs or update the site first",
            loc,
        )
    return site


def _topologies_of(session: Session, site_id: int) -> list[Topology]:
    return list(
        session.scalars(
            select(Topology).where(
                (Topology.local_site_id == site_id) | (Topology.remote_site_id == site_id)
            )
        )
    )


def update_site(
    session: Session, *, site_id: int, spec: algo.Site, description: str | None = None
) -> Site:
    """Replace a site's name, description and ISPs.

    ISPs are matched by label. A site used by a topology keeps its set of labels (the subflows, and
    every measurement named after them, depend on it): adding or removing one there is a conflict;
    names and bandwidths may change, and the subflows' bandwidths follow.
    """
    site = get_site(session, site_id=site_id)
    other = _find_site(session, spec.name)
    if other is not None and other.id != site.id:
        raise Conflict(f"a site named {spec.name!r} exists", ("body", "name"))
    topologies = _topologies_of(session, site.id)
    old_labels = [i.label for i in site.isps]
    new_labels = [i.label for i in spec.isps]
    if topologies and sorted(old_labels) != sorted(new_labels):
        raise Conflict(
            f"site {site.name!r} is used by topologies {[t.id for t in topologies]}: "
            "its ISP labels cannot change",
            ("body", "isps"),
        )
    site.name = spec.name
    if description is not None:
        site.description = description
    by_label = {i.label: i for i in site.isps}
    if sorted(old_labels) == sorted(new_labels):
        # Two ISPs may swap names: park the names first so no flush meets a transient clash.
        for row in site.isps:
            row.name = f"~{row.id}"
        session.flush()
        for k, isp in enumerate(spec.isps):
            row = by_label[isp.label]
            row.position, row.name = k, isp.name
            row.down_kbps, row.up_kbps = isp.down_kbps, isp.up_kbps
            row.address = isp.address
    else:
        site.isps.clear()
        session.flush()
        site.isps.extend(_isp_rows(spec))
    session.flush()
    for topology in topologies:
        session.refresh(topology)
        _sync_subflows(session, topology, keep_rtts=True)
    session.flush()
    return site


def delete_site(session: Session, *, site_id: int) -> None:
    site = get_site(session, site_id=site_id)
    topologies = _topologies_of(session, site.id)
    if topologies:
        raise Conflict(
            f"site {site.name!r} is used by topologies {[t.id for t in topologies]}; "
            "delete those first"
        )
    session.delete(site)
    session.flush()


# --- topologies ---------------------------------------------------------------------------------
def get_topology(session: Session, *, topology_id: int) -> Topology:
    topology = session.get(Topology, topology_id)
    if topology is None:
        raise NotFound(f"topology {topology_id} not found")
    return topology


# The hot path of POST /recommendations reads a topology as plain rows (two statements built
# once) instead of ORM objects with their selectin loads: the ORM's five statements cost more CPU
# than the rest of a repeated answer.
_TOPOLOGY_ISPS = (
    select(
        Topology.local_site_id, Site.id.label("site_id"), Site.name.label("site_name"),
        ISP.name, ISP.label, ISP.down_kbps, ISP.up_kbps,
    )
    .join(Site, Site.id.in_([Topology.local_site_id, Topology.remote_site_id]))
    .join(ISP, ISP.site_id == Site.id)
    .where(Topology.id == bindparam("topology_id"))
    .order_by(Site.id, ISP.position)
)
_TOPOLOGY_SUBFLOWS = (
    select(Subflow.name, Subflow.bandwidth_kbps, Subflow.rtt_ms)
    .where(Subflow.topology_id == bindparam("topology_id"))
    .order_by(Subflow.position)
)


def topology_rows(session: Session, *, topology_id: int) -> tuple[tuple, tuple, tuple]:
    """The topology's content as plain tuples: (local site, remote site, subflows), a site being
    (name, ((isp name, label, down, up), ...)) in position order and a subflow
    (name, bandwidth, configured RTT). NotFound for an unknown id."""
    sites: dict[int, tuple[str, list]] = {}
    local_id = None
    conn = session.connection()  # Core rows: the ORM's per-statement set-up is not needed here
    for row in conn.execute(_TOPOLOGY_ISPS, {"topology_id": topology_id}):
        local_id = row.local_site_id
        site = sites.setdefault(row.site_id, (row.site_name, []))
        site[1].append((row.name, row.label, row.down_kbps, row.up_kbps))
    if local_id is None:
        raise NotFound(f"topology {topology_id} not found")
    (local,) = [(n, tuple(i)) for sid, (n, i) in sites.items() if sid == local_id]
    (remote,) = [(n, tuple(i)) for sid, (n, i) in sites.items() if sid != local_id]
    subflows = tuple(
        tuple(r) for r in conn.execute(_TOPOLOGY_SUBFLOWS, {"topology_id": topology_id})
    )
    return local, remote, subflows


def list_topologies(
    session: Session, *, limit: int = 100, offset: int = 0
) -> tuple[list[Topology], int]:
    total = session.scalar(select(func.count(Topology.id))) or 0
    rows = session.scalars(select(Topology).order_by(Topology.id).limit(limit).offset(offset))
    return list(rows), total


def topology_spec(topology: Topology) -> algo.TopologySpec:
    """The row as the algorithm's validated Topology."""
    return algo.TopologySpec(
        local=site_spec(topology.local_site), remote=site_spec(topology.remote_site)
    )


def _check_rtts(spec: algo.TopologySpec, rtts_ms: Mapping[str, float] | None, loc: tuple) -> None:
    names = spec.subflow_names()
    for name, value in (rtts_ms or {}).items():
        if name not in names:
            raise Invalid(f"unknown subflow {name!r}; the topology has {names}", (*loc, name))
        if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
            raise Invalid(f"RTT must be a positive number of ms, got {value!r}", (*loc, name))


def _sync_subflows(session: Session, topology: Topology, keep_rtts: bool) -> None:
    """Make the subflow rows match the sites' ISPs (f1, Eq. 3)."""
    old_rtts = {sf.name: sf.rtt_ms for sf in topology.subflows} if keep_rtts else {}
    spec = topology_spec(topology)
    local = {i.label: i for i in topology.local_site.isps}
    remote = {i.label: i for i in topology.remote_site.isps}
    existing = {sf.name: sf for sf in topology.subflows}
    wanted = []
    for k, sf in enumerate(spec.subflows()):
        row = existing.get(sf.name) or Subflow(name=sf.name)
        row.position = k
        row.local_isp_id = local[sf.local_isp.label].id
        row.remote_isp_id = remote[sf.remote_isp.label].id
        row.bandwidth_kbps = sf.bandwidth_kbps
        row.rtt_ms = old_rtts.get(sf.name, row.rtt_ms)
        wanted.append(row)
    topology.subflows[:] = wanted


def create_topology(
    session: Session,
    *,
    local_site_id: int,
    remote_site_id: int,
    rtts_ms: Mapping[str, float] | None = None,
) -> Topology:
    if local_site_id == remote_site_id:
        raise Invalid("local and remote site must differ", ("body", "remote_site_id"))
    local = session.get(Site, local_site_id)
    if local is None:
        raise NotFound(f"site {local_site_id} not found")
    remote = session.get(Site, remote_site_id)
    if remote is None:
        raise NotFound(f"site {remote_site_id} not found")
    existing = find_topology(session, local_site_id=local.id, remote_site_id=remote.id)
    if existing is not None:
        raise Conflict(
            f"topology {local.name} -> {remote.name} exists (id {existing.id})",
            ("body", "remote_site_id"),
        )
    spec = algo.TopologySpec(local=site_spec(local), remote=site_spec(remote))
    _check_rtts(spec, rtts_ms, ("body", "rtts_ms"))
    topology = Topology(local_site=local, remote_site=remote)
    session.add(topology)
    session.flush()
    _sync_subflows(session, topology, keep_rtts=False)
    for sf in topology.subflows:
        sf.rtt_ms = (rtts_ms or {}).get(sf.name)
    session.flush()
    return topology


def find_topology(
    session: Session, *, local_site_id: int, remote_site_id: int
) -> Topology | None:
    return session.scalar(
        select(Topology).where(
            Topology.local_site_id == local_site_id, Topology.remote_site_id == remote_site_id
        )
    )


def ensure_topology(
    session: Session,
    *,
    spec: algo.TopologySpec,
    rtts_ms: Mapping[str, float] | None = None,
    loc: tuple[str | int, ...] = ("body", "topology"),
) -> Topology:
    """The stored topology for an inline one: sites matched by name and content, created if absent.

    RTTs sent inline are validated and fill in the subflows' RTTs where given.
    """
    _check_rtts(spec, rtts_ms, (*loc, "rtts_ms"))
    local = ensure_site(session, spec=spec.local, loc=(*loc, "local"))
    remote = ensure_site(session, spec=spec.remote, loc=(*loc, "remote"))
    topology = find_topology(session, local_site_id=local.id, remote_site_id=remote.id)
    if topology is None:
        return create_topology(
            session, local_site_id=local.id, remote_site_id=remote.id, rtts_ms=rtts_ms
        )
    if rtts_ms:
        for sf in topology.subflows:
            if sf.name in rtts_ms:
                sf.rtt_ms = float(rtts_ms[sf.name])
        session.flush()
    return topology


def update_topology_rtts(
    session: Session, *, topology_id: int, rtts_ms: Mapping[str, float | None]
) -> Topology:
    """Set (or with None clear) the operator-supplied RTT of some subflows."""
    topology = get_topology(session, topology_id=topology_id)
    given = {k: v for k, v in rtts_ms.items() if v is not None}
    _check_rtts(topology_spec(topology), given, ("body", "rtts_ms"))
    names = {sf.name for sf in topology.subflows}
    for name in rtts_ms:
        if name not in names:
            raise Invalid(f"unknown subflow {name!r}", ("body", "rtts_ms", name))
    for sf in topology.subflows:
        if sf.name in rtts_ms:
            value = rtts_ms[sf.name]
            sf.rtt_ms = None if value is None else float(value)
    session.flush()
    return topology


def delete_topology(session: Session, *, topology_id: int) -> None:
    """Delete a topology that has no campaigns or recommendations (their data is kept)."""
    topology = get_topology(session, topology_id=topology_id)
    campaigns = session.scalar(
        select(func.count(Campaign.id)).where(Campaign.topology_id == topology.id)
    )
    recommendations = session.scalar(
        select(func.count(Recommendation.id)).where(Recommendation.topology_id == topology.id)
    )
    if campaigns or recommendations:
        raise Conflict(
            f"topology {topology.id} has {campaigns} campaigns and {recommendations} "
            "recommendations; their measurements are kept, so it cannot be deleted"
        )
    session.delete(topology)
    session.flush()

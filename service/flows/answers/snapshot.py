"""What an answer needs of a stored topology, as plain values: its algorithm spec, its subflows'
bandwidths and configured RTTs, and a key that is its whole content."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.orm import Session

from models import Topology

from ...algorithm import topology as algo
from ...store import inventory


@dataclass(frozen=True)
class TopologySnapshot:
    """`key` is the topology's whole content (sites, ISPs, subflows with bandwidths and configured
    RTTs): any change gives another key."""

    id: int
    key: tuple
    spec: algo.TopologySpec
    subflows: dict[str, tuple[float, float | None]]  # name -> (bandwidth kbit/s, configured RTT)

    @property
    def rtts_ms(self) -> dict[str, float]:
        return {name: rtt for name, (_bw, rtt) in self.subflows.items() if rtt is not None}


def snapshot_of(topology: Topology) -> TopologySnapshot:
    def site(row) -> tuple:
        return row.name, tuple((i.name, i.label, i.down_kbps, i.up_kbps) for i in row.isps)

    subflows = tuple((sf.name, sf.bandwidth_kbps, sf.rtt_ms) for sf in topology.subflows)
    return _snapshot(topology.id, site(topology.local_site), site(topology.remote_site), subflows)


def snapshot_by_id(session: Session, topology_id: int) -> TopologySnapshot:
    """The stored topology's snapshot from plain rows (NotFound for an unknown id)."""
    local, remote, subflows = inventory.topology_rows(session, topology_id=topology_id)
    return _snapshot(topology_id, local, remote, subflows)


def _snapshot(topology_id: int, local: tuple, remote: tuple, subflows: tuple) -> TopologySnapshot:
    return TopologySnapshot(
        id=topology_id,
        key=(topology_id, local, remote, subflows),
        spec=algo.TopologySpec(local=inventory.site_spec_of(*local),
                               remote=inventory.site_spec_of(*remote)),
        subflows={name: (bw, rtt) for name, bw, rtt in subflows},
    )

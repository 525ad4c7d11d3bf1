"""f1 (Eq. 3): a two-site topology and the subflows it yields.

A subflow is one (local ISP, remote ISP) pair, named "<local label>-<remote label>"; FullMesh uses
all N = Ns x Mr of them. The sender is the local site, so a subflow's bottleneck bandwidth in the
sending direction is min(local uplink, remote downlink).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, model_validator

# The site/ISP model and its bounds are the project's vocabulary, defined once.
from probes.vocabulary import (  # noqa: F401 - re-exported for the algorithm's users
    ISP,
    LABEL_PATTERN,
    MAX_ISPS_PER_SITE,
    NAME_PATTERN,
    Kbps,
    Label,
    Name,
    Site,
    subflow_name,
)


class Subflow(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str
    local_isp: ISP
    remote_isp: ISP

    @property
    def bandwidth_kbps(self) -> float:
        """Bottleneck of the sending direction: local uplink vs remote downlink."""
        return min(self.local_isp.up_kbps, self.remote_isp.down_kbps)


class TopologySpec(BaseModel):
    """Sender ("local") and receiver ("remote") site: the algorithm's value, validated and frozen.

    The stored row is `models.Topology` (with ids, RTTs and timestamps);
    `store.inventory.topology_spec` turns one into the other.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    local: Site
    remote: Site

    @model_validator(mode="after")
    def _distinct_sites(self) -> TopologySpec:
        if self.local.name == self.remote.name:
            raise ValueError(f"local and remote site are both {self.local.name!r}")
        return self

    def subflows(self) -> list[Subflow]:
        """f1: SP, every (local ISP, remote ISP) pair, in Table 2's order."""
        return [
            Subflow(name=subflow_name(lo.label, re.label), local_isp=lo, remote_isp=re)
            for lo in self.local.isps
            for re in self.remote.isps
        ]

    def subflow_names(self) -> list[str]:
        return [sf.name for sf in self.subflows()]

    def is_homogeneous(self, tolerance: float = 0.5) -> bool:
        """The paper's rule of thumb (Section 5.3): similar subflow bandwidths -> homogeneous.

        Homogeneous when every subflow's sending bandwidth is within `tolerance` (relative) of the
        largest one; UiT-HAW (512 vs 384 kbit/s) is, SRL-HU (1e5 vs 256 kbit/s) is not.
        """
        bws = [sf.bandwidth_kbps for sf in self.subflows()]
        return min(bws) >= (1.0 - tolerance) * max(bws)

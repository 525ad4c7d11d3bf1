"""f1 (Eq. 3): a two-site topology and the subflows it yields.

A subflow is one (local ISP, remote ISP) pair, named "<local label>-<remote label>"; FullMesh uses
all N = Ns x Mr of them. The sender is the local site, so a subflow's bottleneck bandwidth in the
sending direction is min(local uplink, remote downlink).
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, model_validator

# Short identifiers only: these names end up in namespace, device and queue names.
NAME_PATTERN = r"^[A-Za-z][A-Za-z0-9_]{0,31}$"
LABEL_PATTERN = r"^[A-Za-z][A-Za-z0-9]{0,7}$"
MAX_ISPS_PER_SITE = 16

Name = Annotated[str, Field(pattern=NAME_PATTERN, description="short identifier")]
Label = Annotated[str, Field(pattern=LABEL_PATTERN, description="short ISP label, e.g. K")]
Kbps = Annotated[float, Field(gt=0, le=1e9, allow_inf_nan=False, description="kbit/s")]


class ISP(BaseModel):
    """One access link of a site (Table 1 of the paper)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: Name
    label: Label
    down_kbps: Kbps
    up_kbps: Kbps


class Site(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: Name
    isps: list[ISP] = Field(min_length=1, max_length=MAX_ISPS_PER_SITE)

    @model_validator(mode="after")
    def _unique_isps(self) -> Site:
        for attr in ("label", "name"):
            values = [getattr(isp, attr) for isp in self.isps]
            dupes = sorted({v for v in values if values.count(v) > 1})
            if dupes:
                raise ValueError(f"duplicate ISP {attr} {dupes[0]!r} in site {self.name!r}")
        return self


class Subflow(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str
    local_isp: ISP
    remote_isp: ISP

    @property
    def bandwidth_kbps(self) -> float:
        """Bottleneck of the sending direction: local uplink vs remote downlink."""
        return min(self.local_isp.up_kbps, self.remote_isp.down_kbps)


class Topology(BaseModel):
    """Sender ("local") and receiver ("remote") site."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    local: Site
    remote: Site

    @model_validator(mode="after")
    def _distinct_sites(self) -> Topology:
        if self.local.name == self.remote.name:
            raise ValueError(f"local and remote site are both {self.local.name!r}")
        return self

    def subflows(self) -> list[Subflow]:
        """f1: SP, every (local ISP, remote ISP) pair, in Table 2's order."""
        return [
            Subflow(name=f"{lo.label}-{re.label}", local_isp=lo, remote_isp=re)
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

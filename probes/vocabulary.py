"""The project's vocabulary, defined once: names and their patterns, the path managers, and the
site/ISP model with its bounds.

It lives in `probes`, the bottom layer, because every layer needs it and imports only go down:
the testbed's scenario files, the algorithm's topology, the tables and the API bodies all import
these definitions instead of declaring their own.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Annotated, Literal, get_args

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
)

# Short identifiers only: site and ISP names end up in namespace, device and queue names.
NAME_PATTERN = r"^[A-Za-z][A-Za-z0-9_]{0,31}$"
LABEL_PATTERN = r"^[A-Za-z][A-Za-z0-9]{0,7}$"
SUBFLOW_PATTERN = r"^[A-Za-z][A-Za-z0-9]{0,7}-[A-Za-z][A-Za-z0-9]{0,7}$"
# The kernel's congestion-control names: lower-case identifiers ("cubic", "hybla", "olia").
CC_PATTERN = r"^[a-z][a-z0-9_]{0,15}$"

# Path managers (Section 3 of the paper), spelt one way everywhere: API, tables, probes, files.
# `PathManager` is the one type for a path manager's name; read input through `normalize_pm`.
PathManager = Literal["PCDC", "FullMesh"]
PATH_MANAGERS: tuple[PathManager, ...] = get_args(PathManager)
PCDC: PathManager = "PCDC"
FULLMESH: PathManager = "FullMesh"

MAX_ISPS_PER_SITE = 16
MAX_KBPS = 1e9  # 1 Tbit/s: above any access link, below float trouble

Name = Annotated[str, Field(pattern=NAME_PATTERN, description="short identifier")]
Label = Annotated[str, Field(pattern=LABEL_PATTERN, description="short ISP label, e.g. K")]
SubflowName = Annotated[
    str, Field(pattern=SUBFLOW_PATTERN, description="'<local label>-<remote label>'")
]
CongestionControl = Annotated[str, Field(pattern=CC_PATTERN, description="kernel CC name")]
# Strict: a bandwidth is a JSON number, never a string such as "100000" that lax parsing would
# turn into one.
Kbps = Annotated[
    float, Field(gt=0, le=MAX_KBPS, allow_inf_nan=False, strict=True, description="kbit/s")
]

# Characters free text must not carry: C0/C1 controls, line/paragraph separators, and the
# bidirectional overrides, embeddings and isolates that make text display unlike what it is
# ("Trojan Source").
FORBIDDEN_TEXT = re.compile(
    "[\x00-\x1f\x7f-\x9f\u2028\u2029\u200e\u200f\u061c\u202a-\u202e\u2066-\u2069]"
)


def _plain_text(value: str) -> str:
    bad = FORBIDDEN_TEXT.search(value)
    if bad:
        raise ValueError(
            f"control or bidirectional-formatting character U+{ord(bad.group()):04X} at "
            f"position {bad.start()}"
        )
    return value


Description = Annotated[
    str,
    Field(max_length=200, description="free text: no control or bidi-formatting characters"),
    AfterValidator(_plain_text),
]


def address_problem(addr: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str | None:
    """Why an address cannot be a site's ISP address (an MPTCP endpoint other sites reach), or
    None: every one of these would fail in the first probe."""
    if addr.is_unspecified or addr.is_multicast:
        return f"{addr} is not a host's address"
    if addr.version == 6 and addr.is_link_local:
        return (f"{addr} is link-local: it needs a zone (%IFNAME) and no other site reaches "
                "it; give the interface's global or unique local IPv6 address")
    if addr.version == 6 and addr.ipv4_mapped is not None:
        return f"{addr} is IPv4-mapped: give the IPv4 address {addr.ipv4_mapped}"
    return None


def _isp_address(value: str) -> str:
    """An ISP's address, IPv4 or IPv6, written as the kernel prints it."""
    if not isinstance(value, str):
        raise ValueError("an IPv4 or IPv6 address as a string")
    try:
        addr = ipaddress.ip_address(value)
    except ValueError:
        raise ValueError(f"{value[:64]!r} is not an IPv4 or IPv6 address") from None
    problem = address_problem(addr)
    if problem:
        raise ValueError(problem)
    return str(addr)


IspAddress = Annotated[
    str,
    Field(max_length=64, description="the site's address on this ISP: IPv4 or IPv6"),
    AfterValidator(_isp_address),
]


def subflow_name(local_label: str, remote_label: str) -> str:
    """Eq. 3: a subflow is named after its two ISPs, e.g. K-CU."""
    return f"{local_label}-{remote_label}"


def normalize_pm(name: str) -> PathManager:
    """'pcdc', 'Fullmesh', ... into the canonical 'PCDC' / 'FullMesh'."""
    by_key = {pm.lower(): pm for pm in PATH_MANAGERS}
    key = str(name).strip().lower()
    if key not in by_key:
        raise ValueError(f"unknown path manager {name!r} (expected PCDC or FullMesh)")
    return by_key[key]


class ISP(BaseModel):
    """One access link of a site (Table 1 of the paper)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: Name
    label: Label
    down_kbps: Kbps
    up_kbps: Kbps
    #: the site's address on this ISP, IPv4 or IPv6 (optional: a site worker's ``--isp`` says
    #: where its probes run; an apply refuses when the two disagree)
    address: IspAddress | None = None


class Site(BaseModel):
    """A multi-homed site and its ISPs; labels and names are unique within the site."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: Name
    isps: list[ISP] = Field(min_length=1, max_length=MAX_ISPS_PER_SITE)

    @field_validator("isps")
    @classmethod
    def _unique_isps(cls, isps: list[ISP], info: ValidationInfo) -> list[ISP]:
        site = info.data.get("name", "?")
        for attr in ("label", "name", "address"):
            values = [getattr(isp, attr) for isp in isps if getattr(isp, attr) is not None]
            dupes = sorted({v for v in values if values.count(v) > 1})
            if dupes:
                raise ValueError(f"duplicate ISP {attr} {dupes[0]!r} in site {site!r}")
        families = {ipaddress.ip_address(i.address).version for i in isps if i.address}
        if len(families) > 1:  # a subflow joins two addresses of one family
            raise ValueError(f"site {site!r}: ISP addresses of both families; a site's probes "
                             "run over one (every ISP's IPv4 address, or every ISP's IPv6 one)")
        return isps

    def isp(self, label: str) -> ISP:
        for isp in self.isps:
            if isp.label == label:
                return isp
        raise KeyError(label)

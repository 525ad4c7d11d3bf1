"""Topology files of the emulated testbed: parsing and validation.

A file (YAML or JSON) describes two sites, each with its ISPs (down/up kbit/s), and per path
(local ISP label - remote ISP label, the subflow name) the one-way delay, loss and jitter::

    name: demo                 # testbed name, short identifier (namespaces are mpcoa-<name>-*)
    rate_scale: 1.0            # every rate is multiplied by this (documented per scenario)
    addresses: ipv4            # ipv4 | ipv6 | dual: the links' address families (default ipv4)
    sites:
      - name: A
        isps:
          - {name: Uninett, label: U, down_kbps: 20000, up_kbps: 20000}
      - name: B
        isps:
          - {name: DFN, label: D, down_kbps: 20000, up_kbps: 20000}
    defaults: {delay_ms: 10, loss_pct: 0, jitter_ms: 0}
    paths:
      U-D: {delay_ms: 25}

Anything unknown, out of range or not a short identifier is refused with a message naming the
field. Names are only ever used as argv items and in device names derived from validated labels.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from probes.testbed.field_spec import (
    MAX_CROSS_PER_ISP,
    Cross,
    LossBurst,
    ScheduleSpec,
    check_loss_burst,
    cross_list,
)
from probes.vocabulary import ISP, MAX_ISPS_PER_SITE, Site

MAX_DELAY_MS = 10_000.0
TESTBED_NAME_PATTERN = r"^[A-Za-z][A-Za-z0-9_]{0,15}$"  # namespaces are mpcoa-<name>-<site>
DelayMs = Annotated[float, Field(ge=0, le=MAX_DELAY_MS, allow_inf_nan=False)]
LossPct = Annotated[float, Field(ge=0, lt=100, allow_inf_nan=False)]


#: the address families of the testbed's links (docs/testbed.md): IPv4 only, IPv6 only, or both
#: (dual: both on every link, probes over IPv6)
AddressFamilies = Literal["ipv4", "ipv6", "dual"]
ADDRESS_FAMILIES: tuple[str, ...] = get_args(AddressFamilies)


class SpecError(ValueError):
    """A topology file was refused; the message names the field."""


QueueMs = Annotated[float, Field(gt=0, le=10_000, allow_inf_nan=False)]
QueuePackets = Annotated[int, Field(ge=1, le=100_000)]


def _one_queue_size(obj: Any, where: str) -> None:
    if obj.queue_ms is not None and obj.queue_packets is not None:
        raise ValueError(f"{where}queue_ms: give queue_ms or queue_packets, not both")


class IspSpec(ISP):
    """An ISP of the vocabulary (its names and bounds), with the testbed's queue for its link."""

    #: this ISP link's bottleneck queue (both directions), overriding the testbed's
    queue_ms: QueueMs | None = None
    queue_packets: QueuePackets | None = None
    #: competing traffic through this ISP's link from a host outside the two sites
    #: (probes/testbed/field_spec.py)
    cross: list[Cross] | None = Field(default=None, max_length=MAX_CROSS_PER_ISP)
    #: this link's capacity over time, repeating (probes/testbed/field_spec.py)
    schedule: ScheduleSpec | None = None

    _cross_list = field_validator("cross", mode="before")(cross_list)

    @model_validator(mode="after")
    def _queue(self) -> IspSpec:
        _one_queue_size(self, "")
        if self.address is not None:
            raise ValueError("address: the testbed gives its links their addresses (the "
                             "top-level addresses: ipv4 | ipv6 | dual)")
        return self


class SiteSpec(Site):
    """A site of the vocabulary whose ISPs carry testbed queue sizes."""

    isps: list[IspSpec] = Field(min_length=1, max_length=MAX_ISPS_PER_SITE)

    def isp(self, label: str) -> IspSpec:
        for i in self.isps:
            if i.label == label:
                return i
        raise KeyError(label)


class PathSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    delay_ms: DelayMs | None = None
    loss_pct: LossPct | None = None
    jitter_ms: DelayMs | None = None
    #: losses in bursts of this mean length in packets (Gilbert-Elliott), the rate staying
    #: loss_pct; None = independent losses
    loss_burst: LossBurst | None = None


class PathDefaults(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    delay_ms: DelayMs = 0.0
    loss_pct: LossPct = 0.0
    jitter_ms: DelayMs = 0.0
    loss_burst: LossBurst | None = None


class ResolvedPath(BaseModel):
    """A path with every value filled in and the rate scale applied."""

    model_config = ConfigDict(frozen=True)

    name: str
    a_label: str
    b_label: str
    delay_ms: float
    loss_pct: float
    jitter_ms: float
    loss_burst: float | None = None


class TestbedSpec(BaseModel):
    """A validated topology file."""

    __test__ = False  # not a pytest test class
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: Annotated[str, Field(pattern=TESTBED_NAME_PATTERN)]
    description: str = Field(default="", max_length=2000)
    rate_scale: float = Field(default=1.0, gt=0, le=1000, allow_inf_nan=False)
    addresses: AddressFamilies = "ipv4"
    #: bottleneck queue of every link, in ms at the link's rate or in packets (1514 bytes);
    #: neither = one BDP of the link's slowest path, 20..500 ms, at least 2 packets
    #: (probes/testbed/queues.py). An ISP's own queue_ms / queue_packets overrides it.
    queue_ms: QueueMs | None = None
    queue_packets: QueuePackets | None = None
    sites: list[SiteSpec] = Field(min_length=2, max_length=2)
    defaults: PathDefaults = Field(default_factory=PathDefaults)
    paths: dict[str, PathSpec] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _check(self) -> TestbedSpec:
        _one_queue_size(self, "")
        a, b = self.sites
        if a.name == b.name:
            raise ValueError(f"sites: both sites are named {a.name!r}")
        valid = {f"{x.label}-{y.label}" for x in a.isps for y in b.isps}
        crossed = [f"{s.name}.{i.label}" for s in self.sites for i in s.isps if i.cross]
        if self.addresses == "ipv6" and crossed:
            raise ValueError(f"addresses: ipv6 with cross traffic ({', '.join(crossed)}): the "
                             "competing hosts speak IPv4; use addresses: dual or ipv4")
        for key in self.paths:
            if key not in valid:
                raise ValueError(
                    f"paths.{key}: not a path '<{a.name} ISP label>-<{b.name} ISP label>' "
                    f"(valid: {', '.join(sorted(valid))})"
                )
        for p in self.resolved_paths():
            if p.jitter_ms > p.delay_ms:
                raise ValueError(f"paths.{p.name}.jitter_ms: larger than delay_ms")
            check_loss_burst(f"paths.{p.name}.", p.loss_pct, p.loss_burst)
            if p.loss_burst is not None and p.loss_pct == 0 and \
                    self.paths.get(p.name, PathSpec()).loss_burst is not None:
                raise ValueError(f"paths.{p.name}.loss_burst: the path has no loss "
                                 "(loss_pct 0): give loss_pct too")
        return self

    # ---- derived values -------------------------------------------------------------------
    def site(self, name: str) -> SiteSpec:
        for s in self.sites:
            if s.name == name:
                return s
        raise KeyError(name)

    def site_index(self, name: str) -> int:
        return [s.name for s in self.sites].index(name)

    def resolved_paths(self) -> list[ResolvedPath]:
        a, b = self.sites
        out = []
        for x in a.isps:
            for y in b.isps:
                key = f"{x.label}-{y.label}"
                p = self.paths.get(key, PathSpec())
                d = self.defaults
                out.append(
                    ResolvedPath(
                        name=key,
                        a_label=x.label,
                        b_label=y.label,
                        delay_ms=d.delay_ms if p.delay_ms is None else p.delay_ms,
                        loss_pct=d.loss_pct if p.loss_pct is None else p.loss_pct,
                        jitter_ms=d.jitter_ms if p.jitter_ms is None else p.jitter_ms,
                        loss_burst=d.loss_burst if p.loss_burst is None else p.loss_burst,
                    )
                )
        return out

    def path(self, a_label: str, b_label: str) -> ResolvedPath:
        for p in self.resolved_paths():
            if p.a_label == a_label and p.b_label == b_label:
                return p
        raise KeyError(f"{a_label}-{b_label}")

    def rate_kbps(self, site: str, label: str, direction: str) -> float:
        isp = self.site(site).isp(label)
        v = isp.down_kbps if direction == "down" else isp.up_kbps
        return v * self.rate_scale

    def subflow_names(self, sender: str, receiver: str) -> list[str]:
        s, r = self.site(sender), self.site(receiver)
        return [f"{x.label}-{y.label}" for x in s.isps for y in r.isps]

    def capacity_kbps(self, sender: str, receiver: str, subflows: list[str] | None = None) -> float:
        """Min-cut (max-flow) from sender to receiver over the given subflows (default all).

        Bipartite: source -> local ISP (uplink) -> remote ISP (downlink) -> sink; each subflow
        edge is unbounded, so the max flow is the min over subsets S of local ISPs of
        up(not S) + down(neighbours of S).
        """
        names = subflows if subflows is not None else self.subflow_names(sender, receiver)
        pairs = [tuple(n.split("-")) for n in names]
        locals_ = sorted({p[0] for p in pairs})
        best = float("inf")
        for mask in range(1 << len(locals_)):
            chosen = {lo for i, lo in enumerate(locals_) if mask >> i & 1}
            cut = sum(self.rate_kbps(sender, lo, "up") for lo in locals_ if lo not in chosen)
            remotes = {re for lo, re in pairs if lo in chosen}
            cut += sum(self.rate_kbps(receiver, re, "down") for re in remotes)
            best = min(best, cut)
        return best

    def has_field_conditions(self) -> bool:
        return any(isp.cross or isp.schedule for s in self.sites for isp in s.isps) or any(
            p.loss_burst is not None for p in self.resolved_paths())

    def digest(self) -> str:
        # Field conditions left unset are left out, so a quiet scenario keeps the digest it had
        # before they existed (results stored with it still match).
        data = self.model_dump(mode="json")
        if data.get("addresses") == "ipv4":  # the default: older scenarios keep their digest
            del data["addresses"]
        return hashlib.sha256(
            json.dumps(_without_unset_fields(data),
                       sort_keys=True).encode()
        ).hexdigest()[:16]


_FIELD_KEYS = ("cross", "schedule", "loss_burst", "address")


def _without_unset_fields(data: Any) -> Any:
    if isinstance(data, dict):
        return {k: _without_unset_fields(v) for k, v in data.items()
                if not (k in _FIELD_KEYS and v is None)}
    if isinstance(data, list):
        return [_without_unset_fields(v) for v in data]
    return data


def _format_error(exc: ValidationError) -> str:
    parts = []
    for e in exc.errors():
        loc = ".".join(str(x) for x in e["loc"])
        msg = e["msg"]
        if e["type"] == "extra_forbidden":
            msg = "unknown key"
        elif loc == "addresses" and e["type"] == "literal_error":
            msg = f"{e['input']!r} is not one of {' | '.join(ADDRESS_FAMILIES)}"
        parts.append(f"{loc}: {msg}" if loc else msg)
    return "; ".join(parts)


def parse_spec(data: Any) -> TestbedSpec:
    """Validate already-loaded data; raises SpecError naming the field."""
    if not isinstance(data, dict):
        raise SpecError("topology file: top level must be a mapping")
    try:
        return TestbedSpec.model_validate(data)
    except ValidationError as exc:
        raise SpecError(_format_error(exc)) from None


def load_spec(path: str | Path) -> TestbedSpec:
    """Load a YAML (.yaml/.yml) or JSON topology file (strictly: `probes.documents`)."""
    from probes import documents

    try:
        data = documents.load(path)
    except documents.DocumentError as exc:
        raise SpecError(f"topology file {exc}") from None
    return parse_spec(data)


def shipped_scenarios() -> tuple[str, ...]:
    """The names of the scenario files shipped with the package."""
    return tuple(sorted(p.stem for p in (Path(__file__).parent / "scenarios").glob("*.yaml")))


def scenario_path(name: str) -> Path:
    """Path of a shipped scenario file (srl-hu, unis-hin, uit-haw; with field conditions
    field-shared, field-lte, field-lossy)."""
    if not re.fullmatch(r"[a-z0-9][a-z0-9-]{0,31}", name):  # a name, never a path
        raise SpecError(f"scenario {name!r}: no such scenario")
    p = Path(__file__).parent / "scenarios" / f"{name}.yaml"
    if not p.is_file():
        raise SpecError(f"scenario {name!r}: no such scenario")
    return p

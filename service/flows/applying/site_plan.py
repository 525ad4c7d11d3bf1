"""An answer turned into what each site must configure for the kernel's own path manager.

Pure: a topology, an answer (OPM, OCC, OBS, SP*, the standby order) and the sites' addresses in;
per site the MPTCP endpoints, limits, sysctls and socket buffer out (`plan_sites`), then, given
what a site has now, the changes with the values they replace (`changes`).

The in-kernel path manager marks a whole local *address* (an endpoint) as backup, never one
(local ISP, remote ISP) pair: the sender's backup endpoints and the receiver's backup `signal`
endpoints make every subflow touching them backup (the default scheduler sends on a subflow only
when neither end asked for backup). So the subflows that carry data are a product L x R of the
sender's and the receiver's non-backup addresses. An SP* that is no such product is planned as
the largest product inside it (a dropped useful path costs its share; an added harmful one can
cost nearly everything: the selection's own rule), and the plan says which subflows it drops.
Every other subflow is still established, as backup: the standbys the failover promotes.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from probes.vocabulary import PathManager

from ...algorithm.topology import TopologySpec
from .endpoint_ids import endpoint_ids
from .largest_product import largest_product

MIB = 2**20
INT_MAX = 2**31 - 1
MPTCP_MAX = 8  # the kernel's maximum for `ip mptcp limits` subflows and add_addr_accepted
# Where each setting lives on Linux 6.18 (checked in a fresh namespace, docs/workers.md):
# written inside a namespace, these change that namespace only ...
PER_NETNS = ("net.ipv4.tcp_congestion_control", "net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem",
             "net.mptcp.enabled", "net.mptcp.path_manager", "net.mptcp.pm_type",
             "mptcp endpoints", "mptcp limits")
# ... these are the host's (read-only inside a namespace: EINVAL on write), and so is the list
# of congestion controls a BPF registration adds to. A namespace's default CC must be in the
# host's tcp_allowed_congestion_control (EPERM otherwise, even for root).
HOST_WIDE = ("net.core.rmem_max", "net.core.wmem_max", "net.ipv4.tcp_allowed_congestion_control",
             "bpf congestion control")
# Which buffer regime a value serves (each buffer entry of the plan names it): an application
# that sets SO_SNDBUF/SO_RCVBUF gets exactly that buffer (the kernel doubles it), capped by
# net.core.*mem_max; one that sets nothing is autotuned up to tcp_rmem/tcp_wmem's maximum.
REGIME_LOCKED = "locked socket buffer (setsockopt) = OBS"
REGIME_AUTOTUNE = "autotuning ceiling"
REGIMES = {"net.core.rmem_max": REGIME_LOCKED, "net.core.wmem_max": REGIME_LOCKED,
           "SO_SNDBUF/SO_RCVBUF": REGIME_LOCKED, "net.ipv4.tcp_rmem": REGIME_AUTOTUNE,
           "net.ipv4.tcp_wmem": REGIME_AUTOTUNE}
KEPT_HIGHER = ("the site's ceiling is higher than planned and is kept: lowering it would cap "
               "every other connection of the site too (lower_ceilings: true lowers it)")


@dataclass(frozen=True)
class Endpoint:
    """One `ip mptcp endpoint`: an address of the site, its id and flags."""

    id: int
    label: str
    address: str
    flags: tuple[str, ...]  # of subflow, signal, backup, fullmesh

    @property
    def backup(self) -> bool:
        return "backup" in self.flags


@dataclass
class SitePlan:
    """What one site must run for the answer (desired values, not yet compared to the site's)."""

    site: str
    role: str  # "sender" | "receiver"
    endpoints: list[Endpoint]
    # at least these (a limit already higher is left alone: other connections may need it)
    limits: dict[str, int]
    sysctls: dict[str, str]  # exact values, per namespace
    buffer_max_bytes: int | None  # tcp_rmem / tcp_wmem's max (autotuning's ceiling)
    host_minimums: dict[str, int]  # host-wide sysctls that must be at least this
    socket_buffer_bytes: int | None  # SO_SNDBUF / SO_RCVBUF for applications setting their own
    bpf_cc: str | None  # the BPF congestion control to register (host-wide), if any
    standby_endpoints: list[int]  # backup endpoint ids, the next to promote first
    # set tcp_rmem / tcp_wmem's max exactly, even below the site's (the operator asked);
    # otherwise a higher ceiling the site has is kept
    lower_ceilings: bool = False


@dataclass
class ApplyPlan:
    opm: PathManager
    occ: str | None
    obs_mib: float | None
    used: list[str]  # the subflows planned to carry data
    standbys: list[str]  # every other subflow, established as backup, failover order
    dropped: list[str]  # of the answer's SP*, what the in-kernel PM cannot run beside `used`
    connect: dict[str, str]  # where an application's connection starts: source, destination
    sites: list[SitePlan]
    notes: list[str] = field(default_factory=list)
    # the answer's buffer, what is planned, and which bound lowered it and why (`buffer_bound`)
    buffer: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def plan_sites(
    spec: TopologySpec,
    *,
    opm: PathManager,
    occ: str | None,
    obs_mib: float | None,
    subflows_used: list[str],
    standby_subflows: list[str],
    local_addrs: dict[str, str],
    remote_addrs: dict[str, str],
    builtin_ccs: set[str] | frozenset[str] = frozenset(),
    bpf_ccs: set[str] | frozenset[str] = frozenset(),
    caps_mib: dict[str, float] | None = None,
    local_implicit: list[dict[str, Any]] | None = None,
    remote_implicit: list[dict[str, Any]] | None = None,
    lower_ceilings: bool = False,
    autotune_max_mib: float | None = None,
) -> ApplyPlan:
    """Per site what the answer needs. `*_addrs`: ISP label -> the site's address on it;
    `builtin_ccs`: controls the kernel has of its own; `bpf_ccs`: the ones a BPF port provides;
    `caps_mib`: bounds on the buffer written, by name (`buffer_bound`); `*_implicit`: the
    site's implicit MPTCP endpoints (`probes.site.config.read_implicit`), whose ids the plan
    leaves to them (`endpoint_ids`); `lower_ceilings`: write the autotuning ceiling exactly,
    even below a site's higher one (by default a site's higher ceiling is kept);
    `autotune_max_mib`: the answer's autotuning ceiling, measured by probes that set no buffer
    (None: not measured; the ceiling is then 2 x the locked buffer, and a note says so)."""
    local = [isp.label for isp in spec.local.isps]
    remote = [isp.label for isp in spec.remote.isps]
    for site, labels, addrs in ((spec.local.name, local, local_addrs),
                                (spec.remote.name, remote, remote_addrs)):
        missing = [lbl for lbl in labels if lbl not in addrs]
        if missing:
            raise ValueError(f"site {site}: no address known for ISP(s) {', '.join(missing)}")
    every = spec.subflow_names()
    notes: list[str] = []
    if opm == "FullMesh" or not subflows_used:
        wanted = list(every)
    else:
        unknown = [s for s in subflows_used if s not in every]
        if unknown:
            raise ValueError(f"answer: subflow(s) {', '.join(unknown)} not in the topology")
        wanted = list(subflows_used)
    ls, rs = largest_product(wanted, local, remote)
    used = [s for s in wanted if s.split("-")[0] in ls and s.split("-")[1] in rs]
    dropped = [s for s in wanted if s not in used]
    if dropped:
        notes.append("in_kernel_per_address:" + ",".join(dropped))
    order = [s for s in standby_subflows if s in every and s not in used]
    standbys = order + [s for s in every if s not in used and s not in order]
    first = used[0].split("-")
    connect = {"source": local_addrs[first[0]], "destination": remote_addrs[first[1]],
               "source_label": first[0], "destination_label": first[1]}
    buffer = buffer_bound(obs_mib, caps_mib or {})
    buf = buffer["planned_bytes"]
    if buf is None:
        notes.append("no_buffer_in_answer")
    elif buffer["capped_by"]:
        notes.append(f"buffer_capped:{buffer['capped_by']}={buf}")
    bpf = None
    if occ and occ not in builtin_ccs:
        if occ in bpf_ccs:
            bpf = occ
        else:
            notes.append(f"cc_unavailable:{occ}")
    n_sub = min(MPTCP_MAX, len(local) * len(remote) - 1)

    def standby_order(labels: list[str], side: int, ids: dict[str, int]) -> list[int]:
        seen: list[int] = []
        for s in standbys:
            lbl = s.split("-")[side]
            if lbl in labels and ids[lbl] not in seen:
                seen.append(ids[lbl])
        return seen

    l_ids = endpoint_ids(local, local_addrs, local_implicit or [])
    sender_eps = [
        Endpoint(l_ids[lbl], lbl, local_addrs[lbl],
                 ("subflow", "fullmesh") + (() if lbl in ls else ("backup",)))
        for lbl in local
    ]
    r_ids = endpoint_ids(remote, remote_addrs, remote_implicit or [])
    receiver_eps = [  # the destination is the connection's first address: never announced
        Endpoint(r_ids[lbl], lbl, remote_addrs[lbl],
                 ("signal",) + (() if lbl in rs else ("backup",)))
        for lbl in remote if lbl != first[1]
    ]
    common = {"net.mptcp.enabled": "1", "net.mptcp.path_manager": "kernel"}
    host_min = {} if buf is None else {"net.core.rmem_max": buf, "net.core.wmem_max": buf}
    # The answer's buffer is what the probes set with SO_SNDBUF/SO_RCVBUF (the locked regime).
    # Applications that set nothing are autotuned up to tcp_rmem/tcp_wmem's max: the answer's
    # autotune_max_mib where probes measured it in that regime; else twice the locked buffer
    # (the kernel doubles a set one), a figure no probe measured autotuned, as the note says.
    if autotune_max_mib is not None and autotune_max_mib > 0:
        ceiling: int | None = min(round(autotune_max_mib * MIB), INT_MAX)
        measured_in = "autotune_max_mib"
    else:
        ceiling = None if buf is None else 2 * buf
        measured_in = None if buf is None else "2 x OBS"
        if buf is not None:
            notes.append("autotune_ceiling_unmeasured")
    buffer["regimes"] = {
        "socket_buffer_bytes": {"bytes": buf, "regime": REGIME_LOCKED,
                                "for": "applications that call setsockopt"},
        "autotune_max_bytes": {"bytes": ceiling, "regime": REGIME_AUTOTUNE,
                               "for": "applications that set no socket buffer",
                               "from": measured_in, "lower_ceilings": lower_ceilings}}
    sender = SitePlan(
        site=spec.local.name, role="sender", endpoints=sender_eps,
        limits={"subflows": n_sub, "add_addr_accepted": min(MPTCP_MAX, len(remote) - 1)},
        # the answer's CC is the sender's: it was calibrated for local -> remote only
        sysctls={**common, **({"net.ipv4.tcp_congestion_control": occ} if occ else {})},
        buffer_max_bytes=ceiling, host_minimums=dict(host_min), socket_buffer_bytes=buf,
        bpf_cc=bpf, standby_endpoints=standby_order([e.label for e in sender_eps if e.backup],
                                                    0, l_ids),
        lower_ceilings=lower_ceilings,
    )
    receiver = SitePlan(
        site=spec.remote.name, role="receiver", endpoints=receiver_eps,
        limits={"subflows": n_sub, "add_addr_accepted": 0},
        sysctls=dict(common), buffer_max_bytes=ceiling, host_minimums=dict(host_min),
        socket_buffer_bytes=buf, bpf_cc=None,
        standby_endpoints=standby_order([e.label for e in receiver_eps if e.backup], 1, r_ids),
        lower_ceilings=lower_ceilings,
    )
    return ApplyPlan(opm=opm, occ=occ, obs_mib=obs_mib, used=used, standbys=standbys,
                     dropped=dropped, connect=connect, sites=[sender, receiver], notes=notes,
                     buffer=buffer)


# Why each bound exists, as the plan states it when the bound lowered the answer's buffer.
CAP_REASONS = {
    "largest_measured": "no probe of the answer's campaign ran above this buffer: a larger one "
                        "is an extrapolation of the fitted curve, not a measured figure",
    "ceiling": "the configured ceiling (MPCOA_APPLY_BUFFER_CEILING_MIB) on what an apply "
               "writes to a host",
    "kernel_int": "the sysctls and SO_SNDBUF are C ints, and the kernel doubles the buffer",
}


def buffer_bound(obs_mib: float | None, caps_mib: dict[str, float]) -> dict[str, Any]:
    """The buffer a plan writes: the answer's OBS, lowered to the smallest of `caps_mib`
    (name -> MiB, e.g. largest_measured, ceiling) and to what a C int holds twice; with the
    bound that lowered it and why."""
    answer = None if obs_mib is None or obs_mib <= 0 else round(obs_mib * MIB)
    bounds = {name: round(mib * MIB) for name, mib in caps_mib.items() if mib is not None}
    bounds["kernel_int"] = INT_MAX // 2
    out: dict[str, Any] = {"answer_bytes": answer, "planned_bytes": answer, "capped_by": None,
                           "why": None, "bounds_bytes": bounds}
    if answer is None:
        return out
    name, limit = min(bounds.items(), key=lambda kv: kv[1])
    if answer > limit:
        out.update(planned_bytes=limit, capped_by=name, why=CAP_REASONS.get(name, name))
    return out


# ---- against what a site has now ----------------------------------------------------------------
def _mem_triple(current: str | None, ceiling: int, *, lower: bool = False) -> str:
    """tcp_rmem / tcp_wmem with the max raised to `ceiling` (set to it exactly when `lower`:
    the operator asked), min and default kept below it."""
    try:
        lo, default, have = (int(x) for x in (current or "").split())
    except ValueError:
        lo, default, have = 4096, 131072, None
    top = ceiling if lower or have is None else max(ceiling, have)
    return f"{min(lo, top)} {min(default, top)} {top}"


def _mem_max(value: str | None) -> int | None:
    try:
        return int((value or "").split()[2])
    except (IndexError, ValueError):
        return None


def endpoint_line(ep: dict[str, Any]) -> str:
    flags = " ".join(f for f in ("signal", "subflow", "backup", "fullmesh") if ep.get(f))
    return f"{ep['address']} id {ep['id']} {flags}".strip()


def desired_state(site: SitePlan, current: dict[str, Any]) -> dict[str, Any]:
    """The complete target of one site, given its current state (`current`: as
    `probes.site.config.read_state` reports it): what the applier converges to."""
    sysctls = dict(site.sysctls)
    cur_sys = current.get("sysctls", {})
    if "net.mptcp.path_manager" not in cur_sys and "net.mptcp.pm_type" in cur_sys:
        sysctls.pop("net.mptcp.path_manager", None)  # before 6.15: the older name
        sysctls["net.mptcp.pm_type"] = "0"
    if site.buffer_max_bytes is not None:
        for key in ("net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem"):
            sysctls[key] = _mem_triple(cur_sys.get(key), site.buffer_max_bytes,
                                       lower=site.lower_ceilings)
    cur_lim = current.get("limits", {})
    limits = {k: max(v, int(cur_lim.get(k, 0))) for k, v in site.limits.items()}
    return {
        "endpoints": [
            {"id": e.id, "address": e.address, **{f: True for f in e.flags}}
            for e in site.endpoints
        ],
        "limits": limits,
        "sysctls": sysctls,
        "bpf_cc": site.bpf_cc,
        "host_minimums": dict(site.host_minimums),
    }


def changes(site: SitePlan, current: dict[str, Any]) -> list[dict[str, Any]]:
    """Each setting of the site's plan with the value it replaces; `action`: set (differs),
    none (already so), needs_host (a host-wide value too low, which a namespace cannot change)."""
    want = desired_state(site, current)
    out: list[dict[str, Any]] = []
    cur_eps = {e["id"]: e for e in current.get("endpoints", [])}
    want_ids = {e["id"] for e in want["endpoints"]}
    for ep in want["endpoints"]:
        before = cur_eps.get(ep["id"])
        b = endpoint_line(before) if before else None
        a = endpoint_line(ep)
        out.append({"kind": "endpoint", "key": f"id {ep['id']}", "before": b, "after": a,
                    "scope": "netns", "action": "none" if b == a else "set"})
    for eid, ep in sorted(cur_eps.items()):
        if eid not in want_ids:
            out.append({"kind": "endpoint", "key": f"id {eid}", "before": endpoint_line(ep),
                        "after": None, "scope": "netns", "action": "set"})
    cur_lim = current.get("limits", {})
    for k, v in want["limits"].items():
        b = cur_lim.get(k)
        out.append({"kind": "limit", "key": k, "before": b, "after": v, "scope": "netns",
                    "action": "none" if b is not None and int(b) == v else "set"})
    cur_sys = current.get("sysctls", {})
    for k, v in want["sysctls"].items():
        b = cur_sys.get(k)
        entry = {"kind": "sysctl", "key": k, "before": b, "after": v, "scope": "netns",
                 "action": "none" if _same(b, v) else "set"}
        if k in REGIMES:
            entry["regime"] = REGIMES[k]
            entry["planned"] = site.buffer_max_bytes
            if (_mem_max(v) or 0) > (site.buffer_max_bytes or 0):
                entry["kept"] = KEPT_HIGHER
        out.append(entry)
    for k, v in want["host_minimums"].items():
        b = cur_sys.get(k)
        ok = b is not None and int(b) >= v
        # only ever raised: it caps what any application of the host may ask with setsockopt
        out.append({"kind": "sysctl", "key": k, "before": b, "after": b if ok else v,
                    "minimum": v, "scope": "host", "action": "none" if ok else "needs_host",
                    "regime": REGIMES.get(k)})
    cc = want["sysctls"].get("net.ipv4.tcp_congestion_control")
    if cc:  # a namespace may default only to a CC of the host's allowed list
        key = "net.ipv4.tcp_allowed_congestion_control"
        allowed = (cur_sys.get(key) or "").split()
        ok = cc in allowed
        out.append({"kind": "sysctl", "key": key, "before": " ".join(allowed),
                    "after": " ".join(allowed if ok else [*allowed, cc]), "scope": "host",
                    "action": "none" if ok else "needs_host"})
    if site.bpf_cc:
        have = site.bpf_cc in current.get("available_ccs", [])
        out.append({"kind": "bpf_cc", "key": site.bpf_cc, "before": "available" if have
                    else "absent", "after": "available", "scope": "host",
                    "action": "none" if have else "set"})
    if site.socket_buffer_bytes is not None:
        out.append({"kind": "socket", "key": "SO_SNDBUF/SO_RCVBUF", "before": None,
                    "after": site.socket_buffer_bytes, "scope": "application",
                    "action": "advice", "regime": REGIME_LOCKED})
    return out


def _same(before: str | None, after: str) -> bool:
    return before is not None and before.split() == after.split()

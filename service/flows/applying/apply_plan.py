"""The apply plan of a topology: its newest answer, where each site is, what it has now, and
per site every change with the value it replaces (`GET /topologies/{id}/apply-plan`,
`mpcoa apply TOPOLOGY_ID --dry-run`).

Where a site is: a real site's worker, known by its capability report (its ISP addresses and,
since it reports them, its current settings), or else a running emulated testbed with both sites
(its namespaces, read directly). MPCOA_TESTBED names the testbed when both could be meant; with
neither naming it, a site both claim is refused rather than guessed (`places`).
"""

from __future__ import annotations

import platform
from dataclasses import dataclass
from typing import Any

from sqlalchemy.orm import Session

from models import Recommendation
from probes.base import ProbeError
from probes.bpf import cc as bpf_cc
from probes.site import config as siteconfig
from probes.testbed import lifecycle as tb

from ...errors import Conflict
from ...settings import get_settings
from ...store import applied, artifacts, inventory, measurements
from ..answers.snapshot import TopologySnapshot, snapshot_by_id
from ..campaign.probing import both_claim, find_testbed
from . import site_plan as algo_plan


@dataclass
class Place:
    """Where one site of the topology runs, and how its settings are reached."""

    site: str
    where: str  # "testbed NAME" | "site worker"
    namespace: str | None  # the testbed's namespace; None at a real site (its own host)
    addresses: dict[str, str]  # ISP label -> address
    current: dict[str, Any] | None  # `probes.site.config.read_state`; None when not reported


def places(session: Session, snap: TopologySnapshot) -> dict[str, Place]:
    """Where each site lives, decided without guessing: a site whose worker reported its
    addresses is that worker's, a site no worker reported is a running testbed's; a testbed
    named by MPCOA_TESTBED wins over the reports. A site both a worker's report and an unnamed
    running testbed claim is refused (409), naming both: applying to the wrong one would
    change another person's host or testbed."""
    local, remote = snap.spec.local.name, snap.spec.remote.name
    named = get_settings().testbed
    try:
        bed = tb.attach(find_testbed(local, remote, named))
    except ProbeError:
        bed = None
    reports = {name: artifacts.worker_report(session, site_name=name) for name in (local, remote)}
    if bed is not None and named is None:
        claimed = [name for name, report in reports.items() if report is not None]
        if claimed:
            raise Conflict(both_claim(claimed, bed.name))
    out: dict[str, Place] = {}
    for name in (local, remote):
        if bed is not None:
            ns = bed.ns(name)
            out[name] = Place(name, f"testbed {bed.name}", ns,
                              {lk.label: lk.address for lk in bed.site_links(name)},
                              siteconfig.read_state_for_plan(ns))
            continue
        report = reports[name]
        if report is None:
            raise Conflict(f"site {name!r}: no running testbed has it and its worker has not "
                           "reported its addresses (start `mpcoa worker --site "
                           f"{name} --isp LABEL=ADDRESS ...`)")
        _check_registered(session, name, report["endpoints"])
        out[name] = Place(name, "site worker", None, dict(report["endpoints"]),
                          report.get("config"))
    return out


def _check_registered(session: Session, name: str, endpoints: dict[str, str]) -> None:
    """An apply writes the worker's addresses as endpoints: where the site is registered with
    other addresses for its ISPs, one of the two is wrong, and it refuses."""
    wrong = [f"{label}: registered {address}, reported {endpoints.get(label)}"
             for label, address in inventory.registered_addresses(session, site=name).items()
             if endpoints.get(label) != address]
    if wrong:
        raise Conflict(f"site {name!r}: its worker reports other ISP addresses than the site "
                       f"is registered with ({'; '.join(wrong)}); correct the site (PUT "
                       "/sites/{id}) or the worker's --isp")


def answer_of(session: Session, topology_id: int) -> Recommendation:
    rec = applied.latest_answer(session, topology_id=topology_id)
    if rec is None:
        raise Conflict(f"topology {topology_id} has no answer yet: POST /recommendations "
                       "(or `mpcoa calibrate`) first")
    return rec


def measured(session: Session, rec: Recommendation) -> dict[str, Any]:
    """Whether probes measured the answer, and the largest buffer its campaign ran at."""
    largest = (measurements.largest_buffer(session, campaign_id=rec.campaign_id)
               if rec.campaign_id is not None else None)
    if rec.kind != "calibrated":
        why = (f"answer {rec.id} is {rec.kind}: no probe measured it (its CC is "
               f"{rec.occ or 'unknown'}, its buffer a rule of thumb)")
    elif largest is None:
        why = (f"answer {rec.id} has no measurements to show for it (its campaign is "
               + ("gone)" if rec.campaign_id is None else f"{rec.campaign_id}, no probe ok)"))
    else:
        why = None
    return {"measured": why is None, "why": why, "largest_buffer_mib": largest}


def refuse_unmeasured(plan: dict[str, Any], *, allow_unmeasured: bool) -> None:
    """An apply writes only what probes measured, unless it asked for the answer as it is."""
    check = plan["measured"]
    if check["measured"] or allow_unmeasured:
        return
    raise Conflict(f"{check['why']}; refusing to write it to the sites. Calibrate first "
                   f"(`mpcoa calibrate {plan['topology_id']}`, or wait for the campaign that "
                   "POST /recommendations queued), or apply it anyway: allow_unmeasured: true "
                   "(`mpcoa apply --allow-unmeasured`)")


def _builtin_ccs(current: dict[str, Any] | None) -> set[str]:
    """What the sender's kernel offers of its own: the available CCs less our BPF ports."""
    have = set((current or {}).get("available_ccs", []))
    try:
        mine = set(bpf_cc.ours())
    except ProbeError:
        mine = set()
    return have - mine


def build_plan(session: Session, topology_id: int, *,
               lower_ceilings: bool = False) -> dict[str, Any]:
    """The plan as the API and the CLI show it (and as an apply stores it). `lower_ceilings`:
    the operator asks that a site's higher autotuning ceiling be lowered to the planned one
    (by default an apply only ever raises it)."""
    snap = snapshot_by_id(session, topology_id)
    rec = answer_of(session, topology_id)
    where = places(session, snap)
    local, remote = where[snap.spec.local.name], where[snap.spec.remote.name]
    outputs = rec.outputs or {}
    check = measured(session, rec)
    caps = {"ceiling": get_settings().apply_buffer_ceiling_mib}
    if check["largest_buffer_mib"] is not None:
        caps["largest_measured"] = check["largest_buffer_mib"]
    try:
        plan = algo_plan.plan_sites(
            snap.spec, opm=rec.opm, occ=rec.occ, obs_mib=rec.obs_mib,
            subflows_used=list(outputs.get("subflows_used") or []),
            standby_subflows=list(outputs.get("standby_subflows") or []),
            local_addrs=local.addresses, remote_addrs=remote.addresses,
            builtin_ccs=_builtin_ccs(local.current), bpf_ccs=set(bpf_cc.SUPPORTED),
            caps_mib=caps,
            local_implicit=(local.current or {}).get("implicit_endpoints"),
            remote_implicit=(remote.current or {}).get("implicit_endpoints"),
            lower_ceilings=lower_ceilings, autotune_max_mib=outputs.get("autotune_max_mib"),
        )
    except ValueError as exc:
        raise Conflict(str(exc)) from exc
    sites = []
    for site_plan in plan.sites:
        place = where[site_plan.site]
        current = place.current or {}
        sites.append({
            "site": site_plan.site,
            "role": site_plan.role,
            "where": place.where,
            "namespace": place.namespace,
            "current_known": place.current is not None,
            "endpoints": [
                {"id": e.id, "label": e.label, "address": e.address, "flags": list(e.flags)}
                for e in site_plan.endpoints],
            "standby_endpoints": site_plan.standby_endpoints,
            "socket_buffer_bytes": site_plan.socket_buffer_bytes,
            "bpf_cc": site_plan.bpf_cc,
            "changes": algo_plan.changes(site_plan, current),
            "target": algo_plan.desired_state(site_plan, current),
        })
    promise = outputs.get("promise") or {}
    return {
        "topology_id": topology_id,
        "recommendation_id": rec.id,
        "answer": {"kind": rec.kind, "opm": rec.opm, "occ": rec.occ, "obs_mib": rec.obs_mib,
                   "otp_mbps": rec.otp_mbps, "delta": rec.delta,
                   "autotune_max_mib": outputs.get("autotune_max_mib"),
                   "autotune_otp_mbps": outputs.get("autotune_otp_mbps"),
                   "autotune_interval_mbps": outputs.get("autotune_interval_mbps"),
                   "promise_low_mbps": promise.get("low_mbps"),
                   "promise_high_mbps": promise.get("high_mbps")},
        "used": plan.used,
        "standbys": plan.standbys,
        "dropped": plan.dropped,
        "connect": plan.connect,
        "notes": plan.notes,
        "measured": check,
        "buffer": plan.buffer,
        "lower_ceilings": lower_ceilings,
        "scopes": {"kernel": platform.release(), "per_netns": list(algo_plan.PER_NETNS),
                   "host_wide": list(algo_plan.HOST_WIDE)},
        "sites": sites,
    }

"""Comparing a site's state (`probes.site.config.read_state`) with an apply's target."""

from __future__ import annotations


def _endpoints(entries: list[dict]) -> list[dict]:
    # the device is the kernel's choice unless the target names one: compared without it
    return [{k: v for k, v in e.items() if k != "dev"} for e in entries]


def holds(state: dict, target: dict) -> bool:
    """The site holds `target`: its endpoints, and every limit and sysctl the target sets."""
    return (_endpoints(state["endpoints"]) == _endpoints(target["endpoints"])
            and all(state["limits"][k] == v for k, v in target.get("limits", {}).items())
            and all(state["sysctls"][k] == v for k, v in target["sysctls"].items()))


def as_found(state: dict) -> dict:
    """`state` as the apply tests compare it with how they found the site: without the
    BPF congestion controls in its available list. That list is the host's, and the modules
    that register BPF controls host-wide (holding tests.support.host_lock exclusively) change
    it whenever they run; an apply inside a namespace registers none. Every other value --
    endpoints, limits, sysctls, the kernel's own controls -- is compared, so an apply test
    needs no lock beside them."""
    from probes.bpf.cc import SUPPORTED

    return {**state, "available_ccs": [c for c in state["available_ccs"] if c not in SUPPORTED]}


def site_state(ns: str) -> dict:
    """The site's state in namespace `ns` (`probes.site.config.read_state`), `as_found`."""
    from probes.site import config as sc

    return as_found(sc.read_state(ns))

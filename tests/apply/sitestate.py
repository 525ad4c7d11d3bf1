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

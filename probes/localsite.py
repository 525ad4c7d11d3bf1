"""This worker's own site: its name and its ISP labels mapped to local addresses (minimal
version; the sites helper's module with the same interface replaces it)."""

from __future__ import annotations

import ipaddress
import json
import re
from dataclasses import dataclass

from probes.netns import run_ns
from probes.vocabulary import LABEL_PATTERN, NAME_PATTERN

NAME_RE = re.compile(NAME_PATTERN)
LABEL_RE = re.compile(LABEL_PATTERN)


@dataclass(frozen=True)
class LocalSite:
    name: str
    isps: dict[str, str]  # ISP label -> local IP address, in the order given


def parse_isp_option(value: str) -> tuple[str, str]:
    """``LABEL=ADDR`` or ``LABEL=@IF`` -> (label, address or "@if")."""
    label, sep, target = value.partition("=")
    if not sep or not LABEL_RE.fullmatch(label) or not target:
        raise ValueError(f"--isp {value!r}: expected LABEL=ADDR or LABEL=@INTERFACE")
    if not target.startswith("@"):
        ipaddress.ip_address(target)
    return label, target


def _iface_addr(ifname: str, ns: str | None) -> str:
    cp = run_ns(ns, ["ip", "-j", "-4", "addr", "show", "dev", ifname], check=False)
    for link in json.loads(cp.stdout or "[]"):
        for a in link.get("addr_info", []):
            return a["local"]
    raise ValueError(f"interface {ifname!r} has no IPv4 address")


def resolve_local_site(name: str, isp_options: list[str], ns: str | None = None) -> LocalSite:
    if not NAME_RE.fullmatch(name):
        raise ValueError(f"site name {name!r} is not valid")
    isps: dict[str, str] = {}
    for opt in isp_options:
        label, target = parse_isp_option(opt)
        isps[label] = _iface_addr(target[1:], ns) if target.startswith("@") else target
    return LocalSite(name, isps)

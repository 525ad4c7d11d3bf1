"""The endpoint ids an apply plan gives a site's ISPs, around the kernel's implicit endpoints."""

from __future__ import annotations

import ipaddress
from typing import Any


def endpoint_ids(labels: list[str], addrs: dict[str, str],
                 implicit: list[dict[str, Any]]) -> dict[str, int]:
    """Each ISP's endpoint id: 1, 2, ... in order, never an id an implicit endpoint of another
    address holds; an ISP whose address has an implicit endpoint takes that one's id. The
    kernel refuses an endpoint beside an implicit one with its id or address, so the applier
    removes that implicit endpoint, and nothing can make it again at a rollback (the kernel
    makes them, for a peer's subflows): an id of its own keeps every other one as it was."""
    held = {int(e["id"]): _unmapped(str(e["address"])) for e in implicit}
    by_address = {address: eid for eid, address in held.items()}
    out = {lbl: by_address[_unmapped(addrs[lbl])] for lbl in labels
           if _unmapped(addrs[lbl]) in by_address}
    next_id = 1
    for lbl in labels:
        if lbl in out:
            continue
        while next_id in held or next_id in out.values():
            next_id += 1
        out[lbl] = next_id
        next_id += 1
    return {lbl: out[lbl] for lbl in labels}


def _unmapped(address: str) -> str:
    """An IPv4-mapped IPv6 address as its IPv4 address (as implicit endpoints may show it)."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address
    mapped = getattr(ip, "ipv4_mapped", None)
    return str(mapped) if mapped is not None else str(ip)

"""The request bodies' rules that pydantic's JSON Schema leaves out, written into the published
OpenAPI document so that it is as strict as the server: a request the document allows is not
refused with 422 for a rule it did not state.

- `rtts_ms`: a key is a subflow name (`LABEL-LABEL`) or the body is refused, not merely "keys
  of that form have numbers";
- an ISP's `address`: IPv4 or IPv6, none of the addresses no other site can reach (unspecified,
  multicast, IPv6 link-local, IPv4-mapped IPv6);
- free text (`description`): no control or bidirectional-formatting character;
- POST /recommendations: exactly one of `topology_id` and `topology`.

What JSON Schema cannot say is in the schema's description: `bs_min_mib` below `bs_max_mib`;
ISP labels, names and addresses unique within a site and of one address family; the two sites
of an inline topology named differently; `rtts_ms` naming subflows of the topology.
"""

from __future__ import annotations

from typing import Any

from probes.vocabulary import FORBIDDEN_TEXT, SUBFLOW_PATTERN

RTTS = {"TopologyIn", "InlineTopology", "TopologyPatch"}
# canonical spellings (what the kernel prints and clients generate); the server refuses these
# in any spelling
UNREACHABLE_V4 = r"^(0\.0\.0\.0|22[4-9]\..*|23[0-9]\..*)$"
UNREACHABLE_V6 = r"^(::|[fF][fF].*|[fF][eE][89aAbB].*|::[fF]{4}:.*)$"
# FORBIDDEN_TEXT's characters, escaped (ECMA-262 and Python spell them alike)
PLAIN_TEXT = "^[^" + "".join(
    f"\\u{ord(c):04x}" if c not in "-" else c for c in FORBIDDEN_TEXT.pattern.strip("[]")) + "]*$"


def _object_with_keys(schema: dict[str, Any]) -> dict[str, Any] | None:
    """The object schema of an `rtts_ms` (itself, or the non-null branch of an anyOf)."""
    for branch in [schema, *schema.get("anyOf", [])]:
        if "patternProperties" in branch:
            return branch
    return None


def tighten(schemas: dict[str, Any]) -> None:
    for name in RTTS:
        rtts = _object_with_keys(schemas[name]["properties"]["rtts_ms"])
        assert rtts is not None, name
        rtts["propertyNames"] = {**rtts.get("propertyNames", {}), "pattern": SUBFLOW_PATTERN}
        rtts["additionalProperties"] = False
    address = schemas["ISP"]["properties"]["address"]
    text = next(b for b in address["anyOf"] if b.get("type") == "string")
    text["anyOf"] = [{"format": "ipv4", "not": {"pattern": UNREACHABLE_V4}},
                     {"format": "ipv6", "not": {"pattern": UNREACHABLE_V6}}]
    text["description"] += (" (not unspecified, multicast, IPv6 link-local or IPv4-mapped: no "
                            "other site reaches it)")
    schemas["SiteIn"]["properties"]["description"]["pattern"] = PLAIN_TEXT
    for site in ("Site", "SiteIn"):
        schemas[site]["description"] = (
            schemas[site].get("description", "") + " Within a site, ISP labels, names and "
            "addresses are unique and the addresses of one family (IPv4 or IPv6), else 422.")
    schemas["InlineTopology"]["description"] += (
        " The two sites have different names, and `rtts_ms` names subflows of theirs (else "
        "422).")
    rec = schemas["RecommendationIn"]
    rec["oneOf"] = [{"required": ["topology_id"], "not": {"required": ["topology"]}},
                    {"required": ["topology"], "not": {"required": ["topology_id"]}}]
    for key in ("topology_id", "topology"):  # null is no choice: give the other one
        prop = rec["properties"][key]
        prop["anyOf"] = [b for b in prop["anyOf"] if b.get("type") != "null"]
    rec["description"] = (rec.get("description", "") + " Exactly one of `topology_id` and "
                          "`topology`; `bs_min_mib` below `bs_max_mib` when both are given "
                          "(else 422).")

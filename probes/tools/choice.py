"""Which probe tool runs a probe: what a host has, what each tool allows, and the choice.

A campaign asks for ``auto`` or an askable tool by name (its ``probe_tool``; `askable` lists
them). ``auto`` takes the first tool, in the registry's `preference` order, that both ends have
for what the probe measures: NetPerfMeter 2.x where both ends have it (one tool for bulk and
streams, measuring frames itself), otherwise iperf3 for bulk probes and the paced tool for
streams. A tool asked by name runs every probe it can measure, or none (what to install is
said); what it cannot measure goes to the tools after it in that order: iperf3 paces (``-b``)
but measures no frame, so asked for ``iperf3``, a stream's probes run on the paced tool.

A host's inventory (``inventory``) is what ``mpcoa worker --check`` prints and what a site's
capability report carries (``tools`` and ``allows``); ``choose`` decides from two of them.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator

from probes.base import CapabilityError
from probes.tools.protocol import AUTO, BULK, FRAMES, what_for
from probes.tools.registry import TOOLS

__all__ = ["BULK", "FRAMES", "AskedTool", "allows", "askable", "check_choice", "choose",
           "install_hint", "inventory", "measures", "notes", "without_inventory"]


def askable() -> tuple[str, ...]:
    """What a campaign may ask for: ``auto`` and the askable tools, in preference order."""
    return TOOLS.askable()


def check_choice(choice: Any) -> str:
    """`choice` when a campaign may ask for it; ValueError naming the choices otherwise."""
    if choice not in askable():
        raise ValueError(f"{choice!r} is not one of {', '.join(askable())}")
    return choice


#: a probe tool a campaign may ask for, validated against the registry where it is parsed (the
#: plan, the settings): the tables keep any name, so a registered tool needs no migration
AskedTool = Annotated[str, AfterValidator(check_choice)]


def allows(tools: dict[str, Any]) -> dict[str, list[str]]:
    """Per tool of an inventory's ``tools``, what it can measure on this host (empty: nothing,
    and the inventory's notes say why)."""
    return {tool.name: tool.allows(tools) for tool in TOOLS.values()}


def notes(tools: dict[str, Any]) -> list[str]:
    """Why a tool that is present allows nothing, in words."""
    return [note for tool in TOOLS.values() for note in tool.notes(tools)]


def inventory(**binaries: str) -> dict[str, Any]:
    """The probe tools found on this host, their versions and what each allows; `binaries`:
    tool name -> the binary the deployment gives (``netperfmeter=MPCOA_NETPERFMETER``)."""
    tools: dict[str, Any] = {}
    for tool in TOOLS.values():
        tools.update(tool.found(binaries.get(tool.name)))
    return {"tools": tools, "allows": allows(tools), "notes": notes(tools)}


def measures(tools: dict[str, Any]) -> set[str]:
    """What some tool of an inventory's ``tools`` can measure."""
    return {what for got in allows(tools).values() for what in got}


def install_hint(what: str) -> str:
    """What to install for `what` (BULK or FRAMES), every tool that measures it said."""
    return ", or ".join(t.install for t in TOOLS.values() if what in t.measures)


def choose(choice: str, kind: str, sides: list[dict[str, Any]]) -> str:
    """The tool that runs a probe of profile ``kind`` (bulk or paced) under the campaign's
    ``choice``, given both ends' ``tools``; CapabilityError naming what to install when no tool
    both ends have can run it."""
    if choice not in askable():
        raise CapabilityError(f"probe_tool: {choice!r} is not one of {', '.join(askable())}")
    offered = [allows(tools) for tools in sides]
    what = what_for(kind)

    def both(name: str) -> bool:
        return all(what in got.get(name, []) for got in offered)

    ranked = TOOLS.by_preference()
    if choice != AUTO:
        asked = TOOLS[choice]
        if what in asked.measures:
            if both(asked.name):
                return asked.name
            raise CapabilityError(f"probe_tool {asked.name}: not on both sites; {asked.install}")
        ranked = [t for t in ranked if t.preference > asked.preference]
    for tool in ranked:
        if what in tool.measures and both(tool.name):
            return tool.name
    if what == FRAMES:
        raise CapabilityError("a stream's probes need a frame-level tool on both sites and none "
                              f"is there: {install_hint(FRAMES)}")
    raise CapabilityError(f"no bulk probe tool on both sites: {install_hint(BULK)}")


def without_inventory(kind: str) -> str:
    """The tool of a probe between real sites that reported no tools: the first, in preference
    order, that measures it with a server per probe (a long-lived node is named in a report)."""
    what = what_for(kind)
    for tool in TOOLS.by_preference():
        if what in tool.measures and tool.node_key is None:
            return tool.name
    raise CapabilityError(f"no {what} probe tool runs without the sites' reports")

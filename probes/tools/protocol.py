"""What a probe tool is (`ProbeTool`), and the registry each tool's module fills (`register`).

A tool is described once, by its own module, and registered under its one name: the name a
campaign asks for (``probe_tool``), the key of a host's inventory and of what it allows, a
result's ``tool``. Everything that picks or runs a tool reads the registry
(`probes.tools.registry.TOOLS`): the choice (`probes.tools.choice`), the emulated testbed's
backends, a site's capability report, the worker's probes across real sites and the plan's
validation. None of them names a tool.

A tool says:
- what it measures (`measures`: ``BULK`` goodput for a bulk objective, a stream's ``FRAMES``),
  where it stands in ``auto``'s order (`preference`, lowest first) and whether a campaign may
  ask for it by name (`askable`; the paced tool runs only what the asked tool cannot);
- what it needs: its entries in a host's inventory (`found`), what it measures on a host with
  that inventory (`allows`, and `notes` saying why not) and what to do where it is missing
  (`install`);
- its backend on the testbed (`backend`, with the options a campaign's probes give it:
  `testbed_options`), which checks both hosts once (`probes.tools.capabilities.require_pair`);
- its halves across real hosts: the receiving site's (`passive_start`, or a long-lived node the
  site's worker starts and names in its report under `node_key`: `start_node`) and the sending
  site's (`active_measure`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any, ClassVar, Protocol

from probes.base import (
    TOOL_NAME_PATTERN as NAME_PATTERN,
)
from probes.base import (
    CapabilityError,
    MeasurementRequest,
    MeasurementResult,
    ProbeError,
)

#: what a probe can measure: bulk goodput, or a stream's frames (their one-way delays)
BULK, FRAMES = "bulk", "frames"
#: what a campaign asks for when it names no tool: the first that can, in `preference` order
AUTO = "auto"


def what_for(kind: str) -> str:
    """What a probe of profile ``kind`` (bulk or paced) measures."""
    return FRAMES if kind == "paced" else BULK


class Backend(Protocol):
    """A tool's backend bound to a host pair: runs one request, says what both hosts offer."""

    def measure(self, request: MeasurementRequest) -> MeasurementResult: ...

    def capabilities(self) -> dict[str, Any]: ...


class PassiveHalf(Protocol):
    """The receiving site's end of one two-sided probe, started: its port, its server's pid and
    what the receiver says when it is ready; then running until its one client is served."""

    port: int
    pid: int
    #: what the receiver reports once it listens (`ready`)
    report: dict[str, Any]

    def running(self) -> bool: ...

    def stop(self) -> None: ...

    def finish(self) -> dict[str, Any]:
        """What the receiver saw, once its client is done (`done`)."""
        ...


class Node(Protocol):
    """A long-lived passive side a site's worker runs for every probe coming to the site."""

    port: int
    pid: int | None

    def describe(self) -> dict[str, Any]: ...

    def stop(self) -> None: ...


class ProbeTool(Protocol):
    """One probe tool. A tool's module subclasses this (for the defaults below) and calls
    `register` with an instance."""

    name: ClassVar[str]
    measures: ClassVar[tuple[str, ...]]
    preference: ClassVar[int]
    askable: ClassVar[bool] = True
    #: what to do where the tool is missing, in words ("install ...")
    install: ClassVar[str]
    #: the capability report's key naming the site's long-lived node (None: a server per probe)
    node_key: ClassVar[str | None] = None

    # ---- what it needs ---------------------------------------------------------------------
    def found(self, binary: str | None = None) -> dict[str, str | None]:
        """Its entries in this host's inventory: name -> version (None: missing); `binary`: the
        path the deployment gives (None: the tool's own default)."""
        ...

    def allows(self, tools: Mapping[str, Any]) -> list[str]:
        """What it measures on a host whose inventory is `tools` (empty: nothing)."""
        return list(self.measures) if tools.get(self.name) else []

    def notes(self, tools: Mapping[str, Any]) -> list[str]:
        """Why it measures nothing although it is there, in words."""
        return []

    # ---- on the emulated testbed (both ends namespaces of this host) -----------------------
    def backend(self, pair: Any, **options: Any) -> Backend:
        """Its backend on `pair` (a `probes.tools.context.HostPair`)."""
        ...

    def testbed_options(self, binary: str | None = None) -> dict[str, Any]:
        """What a campaign's probes on the testbed give `backend` (`binary`: the deployment's)."""
        return {}

    # ---- across real hosts: each site runs its own end -------------------------------------
    def passive_start(self, request: MeasurementRequest, *, local_addrs: dict[str, str],
                      binary: str | None = None) -> PassiveHalf:
        """The receiving site's end of one probe (a tool with a `node_key` has none: the
        site's long-lived node serves every probe)."""
        raise ProbeError(f"{self.name}: its passive side is the receiving site's node")

    def start_node(self, local_addrs: dict[str, str]) -> Node:
        """Start the site's long-lived node (a tool with a `node_key`)."""
        raise ProbeError(f"{self.name}: no long-lived node")

    def active_measure(self, request: MeasurementRequest, *, sender_addrs: dict[str, str],
                       receiver_addrs: dict[str, str], port: int, binary: str | None = None,
                       wait_report: Callable[[], dict[str, Any]]) -> MeasurementResult:
        """The sending site's end against the receiver's `port` and addresses; `wait_report`
        blocks until the receiver has reported (a node's report comes back with the result
        and is not waited for)."""
        ...


class Registry(Mapping[str, ProbeTool]):
    """The tools by name, in the order they registered (the inventory's order)."""

    def __init__(self) -> None:
        self._tools: dict[str, ProbeTool] = {}

    def __getitem__(self, name: str) -> ProbeTool:
        try:
            return self._tools[name]
        except KeyError:
            raise CapabilityError(f"probe tool {name!r}: unknown (have: "
                                  f"{', '.join(self._tools)})") from None

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def get(self, name: str, default: Any = None) -> Any:
        return self._tools.get(name, default)

    def __iter__(self) -> Iterator[str]:
        return iter(self._tools)

    def __len__(self) -> int:
        return len(self._tools)

    def by_preference(self) -> list[ProbeTool]:
        return sorted(self._tools.values(), key=lambda t: t.preference)

    def askable(self) -> tuple[str, ...]:
        """What a campaign may ask for: ``auto`` and the askable tools' names."""
        return (AUTO, *(t.name for t in self.by_preference() if t.askable))


TOOLS = Registry()


def register(tool: ProbeTool) -> ProbeTool:
    """Add `tool` under its name; ValueError when the name is taken or malformed."""
    if not re.fullmatch(NAME_PATTERN, tool.name or "") or tool.name == AUTO:
        raise ValueError(f"probe tool name {tool.name!r}: not {NAME_PATTERN} (nor {AUTO!r})")
    if tool.name in TOOLS._tools:
        raise ValueError(f"probe tool {tool.name!r}: registered already")
    unknown = set(tool.measures) - {BULK, FRAMES}
    if unknown or not tool.measures:
        raise ValueError(f"probe tool {tool.name!r}: measures {sorted(unknown) or 'nothing'} "
                         f"(give {BULK!r} and/or {FRAMES!r})")
    TOOLS._tools[tool.name] = tool
    return tool


def unregister(name: str) -> None:
    """Remove a tool (a test's own); nothing when it is not there."""
    TOOLS._tools.pop(name, None)

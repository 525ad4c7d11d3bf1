"""Where a campaign's probes run: the bridge from a campaign step to a `probes` measurement.

The emulated testbed is found by the topology's site names: a running testbed whose two sites are
the topology's local and remote site; unless MPCOA_TESTBED names it, not for sites a real site's
worker reported (`both_claim`: refused rather than guessed). A real site's worker runs its own
end of each probe (`twosided.SiteProber`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from sqlalchemy import Engine

from probes.base import MeasurementRequest, MeasurementResult, ProbeError
from probes.testbed import lifecycle as tb
from probes.tools import choice as probe_tools
from probes.tools.registry import TOOLS

from ...db import session_scope
from ...settings import Settings
from ...store import artifacts
from .probe_tool import binaries

MIB = 2**20


class Prober(Protocol):
    """Runs measurements between the two sites of a topology."""

    def available_ccs(self) -> set[str]: ...

    def measure(self, request: MeasurementRequest) -> MeasurementResult: ...


@dataclass
class TestbedProber:
    """Measurements on a running emulated testbed, each side inside its site's namespace.

    Both sites are namespaces of this host: this host's tools are both ends' tools. The
    backend of each probe follows its request's `tool` (`probes.tools.choice.choose`);
    `binaries`: tool name -> the binary the deployment gives it (missing: the tool's default)."""

    testbed: str
    binaries: dict[str, str | None] = field(default_factory=dict)
    _tools: dict | None = None

    def _attach(self) -> tb.Testbed:
        return tb.attach(self.testbed)

    def available_ccs(self) -> set[str]:
        bed = self._attach()
        # Both sites run on this kernel; ask inside each site's namespace all the same.
        offered = [set(tb.available_congestion_controls(bed.ns(s.name))) for s in bed.spec.sites]
        return set.intersection(*offered)

    def tools(self) -> dict:
        if self._tools is None:
            given = {name: path for name, path in self.binaries.items() if path}
            self._tools = probe_tools.inventory(**given)["tools"]
        return self._tools

    def backend_for(self, request: MeasurementRequest) -> str:
        return probe_tools.choose(request.tool, request.profile.kind, [self.tools()] * 2)

    def measure(self, request: MeasurementRequest) -> MeasurementResult:
        name = self.backend_for(request)
        options = TOOLS[name].testbed_options(self.binaries.get(name))
        return self._attach().measure(request, backend=name, **options)


def find_testbed(local_site: str, remote_site: str, name: str | None = None) -> str:
    """The name of a healthy running testbed that has both sites (`name`'s, when given)."""
    for status in tb.status():
        if name is not None and status["name"] != name:
            continue
        if status["healthy"] and {local_site, remote_site} <= set(status["sites"]):
            return status["name"]
    which = "no running testbed" if name is None else f"the testbed {name!r} is not up or"
    raise ProbeError(
        f"{which} has the sites {local_site!r} and {remote_site!r}: "
        "start one with `mpcoa testbed up FILE`"
    )


def both_claim(sites: list[str], testbed: str) -> str:
    """Why a site both a worker's report and an unnamed running testbed claim is refused: the
    same rule for an apply (`flows.applying.apply_plan.places`) and a campaign's probes."""
    return (f"site(s) {', '.join(map(repr, sites))}: both a site worker's report (its ISP "
            f"addresses) and the running testbed {testbed!r} have them; refusing to guess "
            f"which is meant. Name the testbed (MPCOA_TESTBED={testbed}) to use it, or take it "
            "down (`mpcoa testbed down`) to use the site workers")


def workers_reported(engine: Engine | None, sites: tuple[str, ...]) -> list[str]:
    """The sites whose worker reported its ISP addresses (a real site's worker)."""
    with session_scope(engine) as s:
        return [name for name in sites if artifacts.worker_report(s, site_name=name)]


def buffer_bytes(bs_mib: float) -> int | None:
    """0 MiB stands for "no buffer set": the kernel's autotuning (the impact phase, baselines)."""
    return None if bs_mib <= 0 else round(bs_mib * MIB)


ProberFactory = Callable[[str, str], Prober]  # (local site, remote site) -> Prober


def default_prober_factory(settings: Settings, engine: Engine | None = None) -> ProberFactory:
    def make(local: str, remote: str) -> Prober:
        return LazyProber(local, remote, binaries(settings), settings.testbed, engine)

    return make


@dataclass
class LazyProber:
    """Finds the site pair's testbed when a probe is first needed, not when a task starts."""

    local: str
    remote: str
    binaries: dict[str, str | None] = field(default_factory=dict)
    testbed: str | None = None
    engine: Engine | None = None  # where the sites' worker reports are read
    _prober: TestbedProber | None = None

    def _get(self) -> TestbedProber:
        if self._prober is None:
            name = find_testbed(self.local, self.remote, self.testbed)
            if self.testbed is None:  # a testbed of the same site names as real sites' workers
                claimed = workers_reported(self.engine, (self.local, self.remote))
                if claimed:
                    raise ProbeError(both_claim(claimed, name))
            self._prober = TestbedProber(name, binaries=self.binaries)
        return self._prober

    def available_ccs(self) -> set[str]:
        return self._get().available_ccs()

    def measure(self, request) -> MeasurementResult:
        return self._get().measure(request)

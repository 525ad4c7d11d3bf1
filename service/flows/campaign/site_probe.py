"""One probe of a campaign, run by the worker that holds its step: on the emulated testbed this
worker runs both ends (its prober); at a real site it runs the sender's end, on the tool both
sites' reports allow (`probe_tool.for_probe`), against the receiving site's long-lived node or
through a session with the receiving site's worker (`twosided`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from probes.base import MeasurementRequest, MeasurementResult, ProbeError
from probes.site.local import LocalSite
from probes.tools.registry import TOOLS

from ...settings import Settings
from . import probe_tool, twosided
from .plan import ProbeStep
from .probing import Prober

log = logging.getLogger(__name__)


def refusal(own: LocalSite | None, site: str, what: str) -> str | None:
    """Why a real site's worker (`own`) must not run `what` for `site` (another site's task
    reached it: a misrouted queue, or two hosts started as one site), or None when it may."""
    if own is None or own.name == site:
        return None
    reason = f"refused {what} for site {site!r}: this worker is site {own.name!r}'s"
    log.error("%s", reason)
    return reason


def measure(*, campaign_id: int, step: ProbeStep, request: MeasurementRequest, lease: str,
            site: LocalSite | None, settings: Settings, prober: Callable[[], Prober],
            send_passive: Callable[[str, str], None]) -> MeasurementResult:
    """The probe's result. `site`: this worker's real site (None: the testbed's worker, which
    runs both ends with `prober()`); `send_passive(key, tool)`: hands the session's passive
    half to the receiving site's worker."""
    if site is None:
        return prober().measure(request)
    if (refused := refusal(site, request.sender, "a probe's sending side")) is not None:
        raise ProbeError(refused)
    if request.autotune_max_bytes is not None:  # the host's ceiling is every connection's
        raise ProbeError("an autotuning-ceiling probe runs on the emulated testbed only: a real "
                         "site's tcp_rmem/tcp_wmem maximum is every other connection's too")
    key = twosided.next_session_key(campaign_id, step)
    tool, receiver_report = probe_tool.for_probe(campaign_id, request)
    if tool.node_key is not None:
        return twosided.node_active_side(request=request, site=site, tool=tool,
                                         receiver_report=receiver_report or {}, key=key,
                                         settings=settings)
    return twosided.active_side(campaign_id=campaign_id, lease_id=lease, key=key,
                                request=request, site=site, settings=settings, tool=tool,
                                send_passive=lambda: send_passive(key, tool.name))


def serve(*, campaign_id: int, request: MeasurementRequest, lease: str, key: str,
          tool: str | None, site: LocalSite | None, settings: Settings) -> str:
    """The receiving site's passive half of one session (`tool`: the one the sender chose;
    None from a sender before tools were named: the choice made again), its final state."""
    if site is None:
        site = LocalSite(request.receiver, {})  # fails the session with a clear error below
    try:
        chosen = (probe_tool.for_probe(campaign_id, request)[0] if tool is None
                  else TOOLS[tool])
        return twosided.passive_side(campaign_id=campaign_id, lease_id=lease, key=key,
                                     request=request, site=site, settings=settings, tool=chosen)
    except ProbeError as exc:
        return twosided.fail_session(campaign_id=campaign_id, lease_id=lease, key=key,
                                     error=str(exc))

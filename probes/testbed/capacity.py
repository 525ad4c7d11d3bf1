"""A lasting capacity step on a running testbed: set one ISP's link rates now, until the testbed
goes down or the rates are set again (``mpcoa testbed capacity``).

The rates are the spec's units (kbit/s before ``rate_scale``) and are checked like a schedule's
steps; both directions' tbf are changed in place (``tc qdisc change`` keeps what is queued), the
queue limit resized for the new rate as the testbed sizes it. A link with a ``schedule`` is
refused: its schedule process would overwrite the step at its next boundary. What was set is kept
in the testbed's state folder (``capacity.json``) and shown by ``mpcoa testbed status``.
"""

from __future__ import annotations

import json
import math
import time
from typing import Any

from probes.base import ProbeError
from probes.netns import run
from probes.vocabulary import MAX_KBPS

FILE = "capacity.json"


def _rate(value: object, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ProbeError(f"{what}: {value!r} is not a number of kbit/s")
    if not 0 < value <= MAX_KBPS:
        raise ProbeError(f"{what}: {value:g} kbit/s is outside (0, {MAX_KBPS:g}]")
    return float(value)


def set_capacity(bed, site: str, isp: str, *, up_kbps: float, down_kbps: float) -> dict[str, Any]:
    """Set `site`.`isp`'s uplink and downlink rates on the running testbed `bed` now; what was
    set, with the time (epoch s) it took effect."""
    up, down = _rate(up_kbps, "up_kbps"), _rate(down_kbps, "down_kbps")
    link = next((lk for lk in bed.links if lk.site == site and lk.label == isp), None)
    if link is None:
        known = ", ".join(f"{lk.site}.{lk.label}" for lk in bed.links)
        raise ProbeError(f"testbed {bed.name} has no ISP {site}.{isp} (it has {known})")
    spec_isp = next(i for i in bed.spec.site(site).isps if i.label == isp)
    if spec_isp.schedule is not None:
        raise ProbeError(f"{site}.{isp} follows a capacity schedule: its schedule would undo a "
                         "step at its next boundary")
    scale = bed.spec.rate_scale
    shaped = ((bed.ns(site), link.site_dev, up * scale), (bed.core_ns, link.core_dev, down * scale))
    for ns, dev, rate in shaped:
        run(["tc", "-n", ns, "qdisc", "change", "dev", dev, "root", "tbf",
             "rate", f"{max(1, round(rate))}kbit", "burst", str(bed._burst_bytes(rate)),
             "limit", str(bed._queue_bytes(link, rate))])
    entry = {"site": site, "isp": isp, "up_kbps": up, "down_kbps": down, "at": time.time()}
    steps = [s for s in read(bed.state_dir) if (s["site"], s["isp"]) != (site, isp)]
    path = bed.state_dir / FILE
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps([*steps, entry]))
    tmp.replace(path)
    return entry


def read(state_dir) -> list[dict[str, Any]]:
    """The capacities set on a testbed since it came up ([] when none)."""
    try:
        data = json.loads((state_dir / FILE).read_text())
    except (OSError, ValueError):
        return []
    return data if isinstance(data, list) else []

"""The site this worker process runs at, when it was started as a real site's worker
(`mpcoa worker --site NAME --isp LABEL=ADDR ...`); None on the emulated testbed."""

from __future__ import annotations

from probes.site.local import LocalSite

_local: LocalSite | None = None


def set_local_site(site: LocalSite | None) -> None:
    global _local
    _local = site


def local_site() -> LocalSite | None:
    return _local

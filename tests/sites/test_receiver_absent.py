"""A two-sided probe whose receiver site has no worker (its passive task is sent, nobody takes
it): the attempt is `ReceiverAbsent`, so the step waits for the site instead of using up its
retries, until the step's attempts have waited `receiver_absent_timeout_s`; then it is an
ordinary failure. Attempts are numbered by the step's sessions so far, under any lease. On the
embedded default's SQLite, as the sender site's worker reaches its database."""

from __future__ import annotations

import pytest

from probes.base import MeasurementRequest, ProbeError, ReceiverAbsent
from probes.site.local import LocalSite
from probes.tools.registry import TOOLS
from service.algorithm.topology import TopologySpec
from service.db import session_scope
from service.flows.campaign import twosided
from service.flows.campaign.plan import ProbeStep
from service.settings import Settings, get_settings
from service.store import inventory, probesessions
from tests.builders import site
from tests.conftest import new_campaign

STEP = ProbeStep(phase="buffer", pm="FullMesh", cc="cubic", bs_mib=1.0, run=1)


@pytest.fixture
def campaign_id(database_url, monkeypatch) -> int:
    monkeypatch.setenv("MPCOA_DATABASE_URL", database_url)  # the workers' default engine
    get_settings.cache_clear()
    spec = TopologySpec.model_validate({"local": site("Snd", [("F", 10000)]),
                                        "remote": site("Rcv", [("U", 10000)])})
    with session_scope() as s:
        topology = inventory.ensure_topology(s, spec=spec)
        cid = new_campaign(s, topology.id, runs=1, duration_s=1).id
    yield cid
    monkeypatch.undo()
    get_settings.cache_clear()


def _attempt(campaign_id: int, settings: Settings, sent: list[str]) -> str:
    key = twosided.next_session_key(campaign_id, STEP)
    request = MeasurementRequest(sender="Snd", receiver="Rcv", cc="cubic", duration_s=1)
    twosided.active_side(campaign_id=campaign_id, lease_id=f"lease-{key}", key=key,
                         request=request, site=LocalSite("Snd", {"F": "192.0.2.1"}),
                         settings=settings, tool=TOOLS["iperf3"],
                         send_passive=lambda: sent.append(key))
    return key


def test_a_receiver_without_a_worker_is_waited_for_then_a_failure(campaign_id):
    settings = Settings(_env_file=None, passive_ready_timeout_s=0.3,
                        receiver_absent_timeout_s=0.5)
    sent: list[str] = []
    with pytest.raises(ReceiverAbsent, match=twosided.ABSENT):
        _attempt(campaign_id, settings, sent)
    # a second attempt, under a lease of its own, is numbered after the first
    with pytest.raises(ProbeError, match="receiver_absent_timeout_s") as failed:
        _attempt(campaign_id, settings, sent)
    assert not isinstance(failed.value, ReceiverAbsent)  # the step's wait is over
    prefix = twosided.step_prefix(STEP)
    assert sent == [f"{prefix}#0", f"{prefix}#1"]
    with session_scope() as s:
        rows = probesessions.step_sessions(s, campaign_id=campaign_id, step_prefix=prefix)
        # each attempt's session is failed, so a passive task taken late starts nothing
        assert sorted((r.step_key, r.state) for r in rows) == [
            (f"{prefix}#0", "failed"), (f"{prefix}#1", "failed")]
        assert all(twosided.ABSENT in r.error for r in rows)

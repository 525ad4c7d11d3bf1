"""A probe's length against the broker's redelivery: with a broker a probe lasts at most half
the visibility timeout (its task ends before Redis hands it to a second worker), refused with a
clear 4xx-style error when the campaign is planned; without a broker, the probes' own bound."""

from __future__ import annotations

import pytest

from service.errors import Invalid
from service.flows.campaign.plan import CampaignParameters, resolve
from service.settings import Settings


def test_a_probe_longer_than_the_broker_allows_is_refused():
    """With a broker, a probe lasts at most half its visibility timeout: a longer one is refused
    when the campaign is planned, not redelivered mid-probe to a second worker."""
    broker = Settings(_env_file=None, broker_url="redis://127.0.0.1:6379/0",
                      broker_visibility_timeout_s=600)
    assert broker.longest_probe_s == 300
    assert Settings(_env_file=None).longest_probe_s == 3600  # nothing redelivers
    links = [(1e4, 60.0)]
    with pytest.raises(Invalid, match="at most 300 s"):
        resolve(CampaignParameters(duration_s=301), broker, links)
    assert resolve(CampaignParameters(duration_s=300), broker, links).duration_s == 300

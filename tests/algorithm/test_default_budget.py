"""An adaptive campaign's default probe-second budget: what the paper's procedure (grid mode)
would probe on the same plan, each probe as long as the timing rule makes it."""

import pytest

from service.algorithm.probe_duration import probe_timing
from service.flows.campaign.plan import (
    CampaignParameters,
    planned_probes,
    resolve,
    selection_probes,
)
from service.settings import Settings

# SRL-HU as the shipped scenario runs it: 8 subflows, (kbit/s, RTT ms)
SRL_HU_LINKS = [(20_000, 300), (4_000, 260), (51.2, 320), (51.2, 290), (153.6, 320),
                (153.6, 290), (20_000, 280), (4_000, 270)]
GRID = [0.1, 0.4, 1.6, 6.4]


def _plan(links, **params):
    return resolve(CampaignParameters(ccs=["reno", "cubic", "bbr"], runs=2, duration_s=5,
                                      buffer_grid_mib=GRID, **params),
                   Settings(_env_file=None), links)


def test_adaptive_default_budget_is_what_grid_mode_would_probe_and_the_selection():
    plan = _plan(SRL_HU_LINKS)
    assert plan.mode == "adaptive"
    # impact 3 x 2 x 9, sweep 2 x 3 x 4 x 2; the selection: 8 alone and 7 additions, twice, and
    # a check of four subsets, twice, under each other CC
    probes = planned_probes(8, 3, 2, len(GRID), 2) + selection_probes(8, 3)
    assert probes == 54 + 48 + 30 + 16
    length = probe_timing(SRL_HU_LINKS, 5, buffer_bytes=round(6.4 * 2**20)).duration_s
    assert length > 5  # 300 ms paths: the rule lengthens the probes
    assert plan.probe_seconds_budget == pytest.approx(probes * length)


def test_without_rtts_the_plan_duration_prices_a_probe():
    plan = _plan([(bw, None) for bw, _ in SRL_HU_LINKS])
    probes = planned_probes(8, 3, 2, 4, 2) + selection_probes(8, 3)
    assert plan.probe_seconds_budget == pytest.approx(probes * 5)


def test_a_given_budget_and_grid_mode_keep_theirs():
    assert _plan(SRL_HU_LINKS, probe_seconds_budget=300).probe_seconds_budget == 300
    assert _plan(SRL_HU_LINKS, mode="grid").probe_seconds_budget is None

"""The objective of a question: validation, the resolved stream as a key, how a stream
campaign is planned and what its probes are asked to do."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from service.algorithm.objective import Objective, objective_of
from service.flows.campaign.executor import profile_of
from service.flows.campaign.plan import CampaignParameters, resolve
from service.settings import Settings

LINKS = [(10_000.0, 40.0), (5_000.0, 60.0)]


def test_a_stream_by_bitrate_or_by_frames_is_one_key():
    by_rate = Objective(kind="stream", bitrate_mbps=8, delay_budget_ms=150)
    by_frames = Objective(kind="stream", frame_rate_hz=25, frame_size_bytes=40_000,
                          delay_budget_ms=150)
    assert by_rate.key() == by_frames.key() == "stream:25Hz:40000B:budget=150:loss=0.01"
    assert by_rate.rate_mbps == pytest.approx(8.0)
    assert Objective(kind="stream", bitrate_mbps=8, frame_rate_hz=50).frame_bytes == 20_000
    assert Objective().key() == "bulk" and objective_of(None) == objective_of({}) == Objective()
    assert objective_of(by_rate.stored()) == by_rate
    assert by_rate.model_dump() == {"kind": "stream", "bitrate_mbps": 8.0,
                                    "delay_budget_ms": 150.0}


@pytest.mark.parametrize("bad", [
    {"kind": "stream"}, {"kind": "stream", "frame_rate_hz": 25},
    {"kind": "bulk", "delay_budget_ms": 10}, {"kind": "stream", "bitrate_mbps": -1},
    {"kind": "stream", "bitrate_mbps": 8, "frame_size_bytes": 100, "frame_rate_hz": 25},
    {"kind": "stream", "bitrate_mbps": 8, "max_loss": 1.0}, {"kind": "stream", "x": 1},
])
def test_bad_objectives_are_refused(bad):
    with pytest.raises(ValidationError):
        Objective.model_validate(bad)


def test_a_stream_campaign_runs_the_settings_mode_or_the_one_asked():
    settings = Settings(run_campaigns=False, _env_file=None)
    stream = Objective(kind="stream", bitrate_mbps=4)
    plan = resolve(CampaignParameters(objective=stream), settings, LINKS)
    assert plan.mode == settings.campaign_mode == "adaptive" and plan.objective == stream
    grid = resolve(CampaignParameters(objective=stream, mode="grid"), settings, LINKS)
    assert grid.mode == "grid"
    assert resolve(CampaignParameters(), settings, LINKS).objective == Objective()


def test_only_a_stream_campaigns_buffer_and_selection_probes_are_paced():
    stream = Objective(kind="stream", frame_rate_hz=30, frame_size_bytes=5000,
                       delay_budget_ms=100)
    paced = profile_of(stream, "buffer")
    assert (paced.kind, paced.frame_rate_hz, paced.frame_size_bytes, paced.delay_budget_ms) == (
        "paced", 30, 5000, 100)
    assert profile_of(stream, "impact").kind == "bulk"
    assert profile_of(stream, "selection").kind == "paced"  # subflows chosen by frame delay
    assert profile_of(Objective(), "buffer").kind == "bulk"

"""The buffer sweep goes on above its grid while the best arm still climbs at the largest
buffer (a grid that stops below the plateau reads T* off a slope and gives every OBS
too small), within `MAX_GRID_EXTENSIONS` points and the budget, and says so on the answer."""

from __future__ import annotations

import random

from service.algorithm.capacity import PAYLOAD_SHARE
from service.algorithm.objective import Objective
from service.algorithm.topology import TopologySpec
from service.flows.campaign.phases.fitting import MAX_GRID_EXTENSIONS
from service.settings import Settings
from service.state import state_of
from service.store import campaigns, inventory
from tests.conftest import new_campaign

from .conftest import HU, SRL
from .stepping import buffers_swept, drive


def _campaign(session, **params):
    spec = TopologySpec.model_validate({"local": {**SRL, "isps": SRL["isps"][:1]},
                                    "remote": {**HU, "isps": HU["isps"][:1]}})
    topology_id = inventory.ensure_topology(session, spec=spec).id
    return new_campaign(session, topology_id, ccs=["reno"], runs=1, duration_s=2,
                        buffer_grid_mib=[0.1, 0.2, 0.4], mode="grid", **params)


def _swept(session, campaign, goodput, settings) -> list[float]:
    """Answer every probe with `goodput(phase, bs)` (`stepping.drive`); the buffers swept."""
    steps = drive(session, campaign, lambda s: goodput(s.phase, s.bs_mib), settings, ccs={"reno"})
    return buffers_swept(steps)


def test_the_grid_grows_until_the_plateau(db_session):
    settings = Settings(run_campaigns=False, impact_max_runs=1, _env_file=None)
    c = _campaign(db_session)

    def goodput(phase, bs):  # a ramp to 9 Mbit/s at 0.8 MiB: flat above
        return 9.0 if phase == "impact" else 9.0 * min(1.0, bs / 0.8)

    swept = _swept(db_session, c, goodput, settings)
    # 0.4 -> 0.8 gains 100 %: one more point (x2); 0.8 -> 1.6 gains nothing: the sweep stops.
    assert sorted(swept) == [0.1, 0.2, 0.4, 0.8, 1.6]
    assert c.buffer_grid_mib == [0.1, 0.2, 0.4, 0.8, 1.6]
    assert state_of(c).budget.planned == 2 + 2 * 5  # TP_0 and TP_1, 2 PMs x 5 buffers
    assert "grid_extended:0.8,1.6" in campaigns.flags(c)
    assert not any(f.startswith("grid_below_plateau") for f in campaigns.flags(c))


def test_a_grid_that_cannot_reach_the_plateau_is_flagged(db_session):
    settings = Settings(run_campaigns=False, impact_max_runs=1, _env_file=None)
    c = _campaign(db_session)

    def goodput(phase, bs):  # grows without bound in the range we may probe
        return 9.0 if phase == "impact" else 10.0 * bs

    _swept(db_session, c, goodput, settings)
    assert len(c.buffer_grid_mib) == 3 + MAX_GRID_EXTENSIONS
    assert f"grid_below_plateau:{max(c.buffer_grid_mib):g}" in campaigns.flags(c)


def test_no_extension_past_the_budget(db_session):
    settings = Settings(run_campaigns=False, impact_max_runs=1, _env_file=None)
    # TP_0, TP_1 and the 2 x 3 sweep, 2 s each: nothing left for another buffer
    c = _campaign(db_session, probe_seconds_budget=16)

    def goodput(phase, bs):
        return 9.0 if phase == "impact" else 10.0 * bs

    _swept(db_session, c, goodput, settings)
    assert c.buffer_grid_mib == [0.1, 0.2, 0.4]
    assert "grid_below_plateau:0.4" in campaigns.flags(c)


def test_a_stream_sweep_neither_extends_the_grid_nor_adds_gate_rounds(db_session):
    """A stream's paced goodput is flat at its rate where carried: a goodput plateau or a
    goodput fit's gate tells nothing about frame delay, so neither may add probes."""
    settings = Settings(run_campaigns=False, impact_max_runs=1, _env_file=None)
    c = _campaign(db_session, objective=Objective.model_validate(
        {"kind": "stream", "bitrate_mbps": 2}))
    rng = random.Random(3)

    def goodput(phase, bs):  # still climbing at the top, and noisy: bulk would extend and repeat
        return 9.0 if phase == "impact" else 10.0 * bs * rng.uniform(0.3, 1.7)

    swept = _swept(db_session, c, goodput, settings)
    assert sorted(swept) == [0.1, 0.2, 0.4]
    assert c.buffer_grid_mib == [0.1, 0.2, 0.4]
    assert (c.runs, state_of(c).budget.extra_rounds) == (1, 0)
    assert state_of(c).budget.done == state_of(c).budget.planned == 2 + 2 * 3
    assert not any(f.startswith(("grid_extended", "grid_below_plateau"))
                   for f in campaigns.flags(c))


def test_an_adaptive_sweep_stops_growing_where_the_leader_reads_its_links_rate(db_session):
    """A larger buffer cannot carry more than the links do: once the leader at the top reads
    within delta/2 of its links' goodput, the grid stops growing, however steep the climb to
    that top was."""
    settings = Settings(run_campaigns=False, impact_max_runs=1, _env_file=None)
    c = _campaign(db_session)
    c.mode, c.runs = "adaptive", 2
    ceiling = 100.0 * PAYLOAD_SHARE  # U-C: 100 Mbit/s both ways

    def goodput(phase, bs):  # a ramp to the links' rate at 0.8 MiB
        return ceiling if phase == "impact" else ceiling * min(1.0, bs / 0.8)

    swept = _swept(db_session, c, goodput, settings)
    # 0.4 -> 0.8 doubles, and 0.8 reads the links' rate: no 1.6
    assert max(swept) == 0.8
    assert c.buffer_grid_mib == [0.1, 0.2, 0.4, 0.8]
    assert "grid_extended:0.8" in campaigns.flags(c)


def test_an_adaptive_grid_does_not_grow_once_its_answer_carries_the_links_rate(db_session):
    """harmful.yaml's shape: a 20 Mbit/s uplink beside a 1 Mbit/s one. PCDC on the fast one
    reads 0.95 of what both links carry from 0.1 MiB; FullMesh still climbs at the top, so the
    grid would grow for it, but no T* a larger buffer shows can be more than the links' rate,
    and the answer is within delta of that: the grid stays as planned."""
    settings = Settings(run_campaigns=False, impact_max_runs=1, _env_file=None)
    spec = TopologySpec.model_validate({
        "local": {"name": "HarmA", "isps": [
            {"name": "Fibre", "label": "F", "down_kbps": 20000, "up_kbps": 20000},
            {"name": "Sat", "label": "S", "down_kbps": 4000, "up_kbps": 1000}]},
        "remote": {"name": "HarmB", "isps": [
            {"name": "Uni", "label": "U", "down_kbps": 30000, "up_kbps": 30000}]}})
    topology_id = inventory.ensure_topology(db_session, spec=spec).id
    grid = [0.05, 0.1, 0.4, 1.6]
    c = new_campaign(db_session, topology_id, ccs=["reno"], runs=2, duration_s=2,
                     buffer_grid_mib=grid, mode="adaptive")
    links = 21.0 * PAYLOAD_SHARE

    def goodput(step) -> float:
        fast_alone = step.allowed_subflows == ("F-U",) or step.excluded_subflow == "S-U"
        if step.allowed_subflows == ("S-U",) or step.excluded_subflow == "F-U":
            return 0.9
        if step.phase != "buffer":
            return 0.951 * links if fast_alone else 0.7 * links
        if step.pm == "PCDC":
            return 0.951 * links * min(1.0, step.bs_mib / 0.1)
        return 0.96 * links * min(1.0, step.bs_mib / 1.5)  # FullMesh: still climbing at 1.6

    drive(db_session, c, goodput, settings, ccs={"reno"}, subflows=("F-U", "S-U"))
    assert c.buffer_grid_mib == grid
    assert not any(f.startswith("grid_extended") for f in campaigns.flags(c))
    note = state_of(c).sweep_decision
    assert (note.decision.opm, note.decision.obs_mib) == ("PCDC", 0.1)

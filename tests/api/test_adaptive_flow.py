"""An adaptive campaign through the real flow on the database: probes chosen from what
was stored, the answer read off measured buffers, progress right, mode validated at the API."""

from __future__ import annotations

import pytest

from service.algorithm.capacity import PAYLOAD_SHARE, LinkCapacity
from service.algorithm.topology import TopologySpec
from service.flows.answers.recommend import recommend
from service.flows.campaign.finish import finish_campaign
from service.flows.campaign.phases.adaptive_sweep import PROMISE_FLOOR
from service.settings import Settings
from service.state import state_of
from service.store import campaigns, inventory, recommendations
from tests.builders import post_topology
from tests.conftest import new_campaign

from .conftest import HU, SRL
from .stepping import drive

GRID = [0.05, 0.1, 0.2, 0.4, 0.8, 1.6]


def test_adaptive_campaign_settles_with_a_fraction_of_the_grid(db_session):
    settings = Settings(run_campaigns=False, impact_max_runs=1, _env_file=None)
    # two subflows: the selection keeps one (together they add nothing), so PCDC is an arm of
    # its own (on one subflow, or on every one, it would be FullMesh's probe)
    spec = TopologySpec.model_validate({"local": {**SRL, "isps": SRL["isps"][:1]},
                                    "remote": {**HU, "isps": HU["isps"][:2]}})
    topology_id = inventory.ensure_topology(db_session, spec=spec).id
    c = new_campaign(db_session, topology_id, ccs=["reno", "cubic"], runs=2, duration_s=2,
                     buffer_grid_mib=GRID, mode="adaptive")
    assert c.mode == "adaptive"
    knee = {("FullMesh", "cubic"): 0.4, ("PCDC", "cubic"): 0.2, ("FullMesh", "reno"): 0.8,
            ("PCDC", "reno"): 0.8}
    plateau = {"cubic": 10.0, "reno": 6.0}

    def goodput(step):
        if step.phase in ("impact", "selection"):
            return 10.0
        jitter = 0.05 if step.run % 2 else -0.05
        return plateau[step.cc] * min(1.0, step.bs_mib / knee[(step.pm, step.cc)]) + jitter

    buffer_probes = sum(s.phase == "buffer" for s in drive(db_session, c, goodput, settings))
    # 26 of the grid's 48 here: the top band (4 arms x 2 buffers x 2 runs) is most of it on a
    # 6-point grid; the saving grows with the grid (12 points x 9 runs: about a tenth)
    assert buffer_probes <= 0.6 * 2 * 2 * len(GRID) * 2
    note = state_of(c).sweep_decision
    assert note.stop == "settled"
    assert (note.decision.opm, note.decision.occ, note.decision.obs_mib) == ("PCDC", "cubic", 0.2)
    assert state_of(c).budget.planned == state_of(c).budget.done  # progress ends at 100 %
    rec_id = finish_campaign(db_session, campaign_id=c.id).recommendation_id
    rec = recommendations.get_recommendation(db_session, recommendation_id=rec_id)
    assert (rec.opm, rec.occ, rec.obs_mib) == ("PCDC", "cubic", 0.2)
    assert rec.otp_mbps == pytest.approx(10.0, abs=0.1)
    assert "adaptive:settled" in rec.quality_flags
    assert "adaptive:settled" in campaigns.flags(c)
    # The answer leads with its promise: where a fresh probe should land, what is settled.
    promise = rec.outputs["promise"]
    assert promise["low_mbps"] <= rec.otp_mbps <= promise["high_mbps"]
    # never narrower than the floor a fresh probe needs (`adaptive_sweep.PROMISE_FLOOR`)
    assert promise["high_mbps"] - rec.otp_mbps >= PROMISE_FLOOR * rec.otp_mbps - 1e-9
    assert promise["statement"].startswith("Expect ") and "settled" in promise["statement"]
    assert not any(f.startswith(("quality_gate_failed", "omega_unsettled"))
                   for f in rec.quality_flags)
    _the_stored_answer_is_the_decision(db_session, c, rec, settings)


def _the_stored_answer_is_the_decision(db_session, c, rec, settings) -> None:
    """The answer stored at finish is the sweep's decision, figures and promise as decided; the
    same question asked later gets that row back; another delta is solved (a what-if)."""
    note = state_of(c).sweep_decision
    assert rec.provenance["answer_from"] == "adaptive decision"
    assert "solve_reads" not in rec.provenance  # the measured means' solve reads the same
    assert (rec.opm, rec.occ, rec.obs_mib, rec.otp_mbps, rec.tp_max_mbps) == (
        note.decision.opm, note.decision.occ, note.decision.obs_mib, note.decision.otp_mbps,
        note.decision.t_star_mbps)
    assert rec.outputs["target_mbps"] == note.decision.target_mbps
    promise = rec.outputs["promise"]
    assert (promise["low_mbps"], promise["high_mbps"], promise["of"]) == (
        note.promise.low_mbps, note.promise.high_mbps, note.promise.of)
    assert (promise["statement"], promise["confidence"]) == (note.statement,
                                                             note.decision.confidence)
    asked = recommend(db_session, topology_id=c.topology_id, delta=c.delta, settings=settings,
                      reuse=True)
    assert asked.recommendation_id == rec.id
    what_if = recommend(db_session, topology_id=c.topology_id, delta=0.2, settings=settings)
    assert what_if.recommendation.provenance["answer_from"] == "solve"
    assert what_if.recommendation.obs_mib <= rec.obs_mib  # a looser delta never needs more


def test_mode_is_validated(client, auth):
    topo = post_topology(client, auth, SRL, HU)
    for bad in ("fast", "", 3, "ADAPTIVE; rm -rf /"):
        r = client.post("/campaigns", json={"topology_id": topo["id"], "mode": bad}, headers=auth)
        assert r.status_code == 422, (bad, r.text)
        assert "mode" in r.text
    r = client.post("/campaigns", json={"topology_id": topo["id"], "mode": "adaptive",
                                        "ccs": ["reno"], "runs": 1}, headers=auth)
    assert r.status_code in (201, 202), r.text
    assert client.get(f"/campaigns/{r.json()['id']}").json()["mode"] == "adaptive"


def test_the_promise_never_reaches_above_what_the_links_carry(db_session):
    """Every arm levels off just under its links' rate, as thin uplinks do (uit-haw.yaml: both
    uplinks read 0.845 Mbit/s, and the promise was 0.22-1.47): the promise's top is what the
    chosen configuration's links carry, however wide the spread."""
    settings = Settings(run_campaigns=False, impact_max_runs=1, _env_file=None)
    spec = TopologySpec.model_validate({"local": {**SRL, "isps": SRL["isps"][:1]},
                                        "remote": {**HU, "isps": HU["isps"][:2]}})
    rates = LinkCapacity.of(spec)
    topology_id = inventory.ensure_topology(db_session, spec=spec).id
    c = new_campaign(db_session, topology_id, ccs=["reno", "cubic"], runs=2, duration_s=2,
                     buffer_grid_mib=GRID, mode="adaptive")

    def ceiling(subflows) -> float:
        return rates.max_mbps(subflows or rates.ends) * PAYLOAD_SHARE

    def goodput(step):
        if step.phase in ("impact", "selection"):
            return 10.0
        jitter = 0.01 if step.run % 2 else -0.01  # runs 2 % apart
        return (0.985 + jitter) * ceiling(step.allowed_subflows) * min(1.0, step.bs_mib / 0.4)

    drive(db_session, c, goodput, settings)
    rec = recommendations.get_recommendation(
        db_session,
        recommendation_id=finish_campaign(db_session, campaign_id=c.id).recommendation_id)
    top = ceiling(rec.outputs["subflows_used"])
    promise = rec.outputs["promise"]
    assert promise is not None, (state_of(c).sweep_decision, rec.quality_flags)
    assert promise["low_mbps"] < rec.otp_mbps < top
    assert promise["high_mbps"] == pytest.approx(top)  # the spread alone reached past it

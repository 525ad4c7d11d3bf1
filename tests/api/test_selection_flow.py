"""The measured subflow selection in a default (adaptive) campaign, through the real flow on the
database: the subsets it probes, SP* where thin subflows share their harm and where every path
helps, and the sweep's PCDC arm running the selected subset."""

from __future__ import annotations

from models import NO_EXCLUSION
from service.algorithm.topology import TopologySpec
from service.flows.campaign.finish import finish_campaign
from service.flows.campaign.phases.fixed_buffer_check import mean, next_run, verdict
from service.settings import Settings
from service.state import state_of
from service.state.selected import selected_subsets, subset_of_key
from service.store import inventory, recommendations
from tests.conftest import new_campaign

from .conftest import HAW, HU, SRL, UIT
from .stepping import KernelOffers, drive

OFFERED = KernelOffers({"reno", "cubic"})
GRID = [0.05, 0.1, 0.2, 0.4, 0.8, 1.6]
THIN = ("P-", "T-")


def _carrying(step, all_subflows) -> frozenset[str]:
    if step.allowed_subflows is not None:
        return frozenset(step.allowed_subflows)
    return frozenset(all_subflows)


def _wobble(step) -> float:
    return 1.0 + (0.01 if step.run % 2 else -0.01)


def test_shared_harm_selects_a_fast_subflow_alone(db_session):
    """SRL-HU's case: any thin subflow drags the connection to 3 Mbit/s, so leaving any one of
    them out changes nothing (Ω keeps all eight), while a fast subflow alone gives 18.8."""
    settings = Settings(run_campaigns=False, _env_file=None)
    assert settings.campaign_mode == "adaptive"
    topology = inventory.ensure_topology(
        db_session, spec=TopologySpec.model_validate({"local": SRL, "remote": HU}))
    names = [sf.name for sf in topology.subflows]
    c = new_campaign(db_session, topology.id, ccs=["reno", "cubic"], runs=2, duration_s=2,
                     buffer_grid_mib=GRID)
    assert c.mode == "adaptive"

    def goodput(step) -> float:
        used = _carrying(step, names)
        if any(n.startswith(THIN) for n in used):
            return 3.0 * _wobble(step)
        bonus = 0.5 if {"U-C", "K-CU"} <= used else 0.0  # two disjoint fast paths add a bit
        return (18.8 + bonus) * _wobble(step) * (1.0 if step.cc == "cubic" else 0.9)

    steps = drive(db_session, c, goodput, settings)
    chosen = selected_subsets(c)
    assert set(chosen) == {"reno", "cubic"}
    for cc, subset in chosen.items():
        assert not any(n.startswith(THIN) for n in subset), (cc, subset)
    selection = [s for s in steps if s.phase == "selection"]
    assert selection, "the selection phase probed nothing"
    probed = {subset_of_key(s.excluded_subflow) for s in selection}
    assert {("U-C",), ("K-C",)} <= probed
    # the topology's rates rule the thin subflows out alone (0.256 and 0.768 Mbit/s uplinks,
    # under the 17 Mbit/s a fast one measured): never probed alone, and the reference's note
    # says so (the other CC checked the reference's decisions and shares its SP*)
    assert not any(len(p) == 1 and p[0].startswith(THIN) for p in probed)
    ref_note = state_of(c).selection.ccs[state_of(c).omega_ccs.ccs[0]]
    assert {n for n in names if n.startswith(THIN)} <= set(ref_note.not_alone)
    # Ω is measured under the reference CC (the best TP_0; a tie goes to the first CC named):
    # there it kept every subflow, and the answer says where the two disagree
    (reference,) = state_of(c).omega_ccs.ccs
    assert reference == "reno"
    impact = [s for s in steps if s.phase == "impact"]
    assert {s.cc for s in impact if s.excluded_subflow != NO_EXCLUSION} == {reference}
    assert {s.cc for s in impact if s.excluded_subflow == NO_EXCLUSION} == {"reno", "cubic"}
    note = state_of(c).selection.ccs[reference]
    assert note.omega.agree is False
    assert note.path[0].decision == "start"
    assert state_of(c).selection.ccs["cubic"].omega is None
    # the answer runs the selected subflows and says how they were chosen
    rec = recommendations.get_recommendation(
        db_session,
        recommendation_id=finish_campaign(db_session, campaign_id=c.id).recommendation_id)
    choice = rec.outputs["subset_choice"]
    # a fast subflow alone wins, under cubic (reno carries 0.9 of it): cubic took the
    # reference's selection, so the answer says so and compares nothing with Ω
    assert (rec.opm, rec.occ) == ("PCDC", "cubic")
    assert rec.occ != reference
    assert rec.outputs["subflows_used"] == chosen[rec.occ]
    assert choice["method"] == "measured selection"
    assert choice["shared_from"] == reference
    assert choice["omega_agrees"] is None and choice["omega_statement"] is None
    # the sweep's PCDC arm runs the selected subset, FullMesh every subflow
    for s in steps:
        if s.phase == "buffer" and s.pm == "PCDC":
            assert set(s.allowed_subflows) == set(chosen[s.cc])
        if s.phase == "buffer" and s.pm == "FullMesh":
            assert s.allowed_subflows is None


def test_every_path_useful_selects_them_all(db_session, client):
    """Two uplinks that add up: the selection keeps both, so PCDC runs what FullMesh runs."""
    settings = Settings(run_campaigns=False, _env_file=None)
    topology = inventory.ensure_topology(
        db_session, spec=TopologySpec.model_validate({"local": UIT, "remote": HAW}))
    names = [sf.name for sf in topology.subflows]
    c = new_campaign(db_session, topology.id, ccs=["cubic"], runs=2, duration_s=2,
                     buffer_grid_mib=GRID)
    rate = {"P-D": 0.50, "T-D": 0.38}

    def goodput(step) -> float:
        return sum(rate[n] for n in _carrying(step, names)) * _wobble(step)

    steps = drive(db_session, c, goodput, settings)
    assert sorted(selected_subsets(c)["cubic"]) == ["P-D", "T-D"]
    assert state_of(c).selection.ccs["cubic"].omega.agree is True
    # both together measured 0.88 Mbit/s, more than either uplink's rate (0.512, 0.384): the
    # rates decide it and no subset is probed
    assert not [s for s in steps if s.phase == "selection"]
    assert [p.decision for p in state_of(c).selection.ccs["cubic"].path] == ["all"]
    finish_campaign(db_session, campaign_id=c.id)
    db_session.commit()
    page = client.get(f"/dashboard/topologies/{topology.id}/impact")
    assert page.status_code == 200
    assert 'data-role="by-rates"' in page.text  # the page says why nothing was probed


def test_an_addition_that_pays_only_with_autotuned_buffers_falls_back(db_session):
    """SRL-HU's K-C + K-CU: 22.6 Mbit/s with autotuned buffers, 9 at a fixed one, where K-C
    alone keeps 18.8: SP* falls back to K-C after one probe of each at the grid's second-largest
    buffer (a loss that clear needs no second draw), and the sweep's PCDC arms run K-C alone.
    The CC that shares the reference's SP* shares its check."""
    settings = Settings(run_campaigns=False, _env_file=None)
    topology = inventory.ensure_topology(
        db_session, spec=TopologySpec.model_validate({"local": SRL, "remote": HU}))
    names = [sf.name for sf in topology.subflows]
    c = new_campaign(db_session, topology.id, ccs=["reno", "cubic"], runs=2, duration_s=2,
                     buffer_grid_mib=GRID)

    def goodput(step) -> float:
        used = _carrying(step, names)
        if any(n.startswith(THIN) for n in used):
            return 3.0 * _wobble(step)
        if used == {"K-C", "K-CU"}:
            return (22.6 if step.bs_mib == 0 else 9.0) * _wobble(step)
        alone = {"K-C": 19.4, "U-C": 18.8}.get(next(iter(used))) if len(used) == 1 else None
        return (alone or 14.0) * _wobble(step)

    steps = drive(db_session, c, goodput, settings)
    for cc in ("reno", "cubic"):
        entry = state_of(c).selection.ccs[cc]
        assert entry.subset == ("K-C",)
        check = entry.buffer_check
        assert check["kept"] == "start" and check["bs_mib"] == 0.8
        assert check["subset_mbps"] < check["start_mbps"]
        assert "K-CU" in entry.standby_subflows and not entry.settled
    checks = [s for s in steps if s.phase == "selection" and s.bs_mib == 0.8]
    assert len(checks) == 2  # SP* and its start, once each, under the reference only
    assert len(check["subset_runs"]) == len(check["start_runs"]) == 1
    for s in steps:
        if s.phase == "buffer" and s.pm == "PCDC":
            assert list(s.allowed_subflows) == ["K-C"]


def test_a_cc_whose_selection_measured_nothing_takes_the_references_subset(db_session):
    """A CC left with no usable selection and no Ω of its own (adaptive mode measures Ω under
    the reference CC only) sweeps its PCDC arm on the reference's SP*."""
    from service.flows.campaign.phases.base import Context
    from service.store import campaigns as campaign_store

    topology = inventory.ensure_topology(
        db_session, spec=TopologySpec.model_validate({"local": UIT, "remote": HAW}))
    c = new_campaign(db_session, topology.id, ccs=["reno", "cubic"], runs=2, duration_s=2,
                     buffer_grid_mib=GRID)
    c.active_ccs = ["reno", "cubic"]
    campaign_store.update_state(c, selection={"done": True, "ccs": {
        "reno": {"subset": ["P-D"], "usable": True},
        "cubic": {"subset": ["P-D", "T-D"], "usable": False},
    }})
    ctx = Context(db_session, c, Settings(run_campaigns=False, _env_file=None), OFFERED)
    assert ctx.subsets() == {"reno": ["P-D"], "cubic": ["P-D"]}


def test_one_low_draw_of_an_addition_at_the_fixed_buffer_does_not_drop_it():
    """thin-sender's F-B + L-B (a lossy 2 Mbit/s uplink beside the fibre): one check run each
    may read the pair under F-B alone's (1 + min_gain); a fall-back waits for a second run of
    each side and stands on the means."""
    gain = 0.035
    assert next_run([20.6], [18.8], gain) is None  # pays at once: one run each is enough
    assert next_run([19.0], [18.8], gain) == "subset"  # says fall back: run the pair again
    assert next_run([19.0, 20.7], [18.8], gain) == "start"  # and its start, to match
    assert next_run([19.0, 20.7], [18.8, 18.9], gain) is None
    assert verdict(mean([19.0, 20.7]), mean([18.8, 18.9]), gain)  # kept on the means
    assert next_run([9.0, 9.1], [18.8, 18.9], gain) is None
    assert not verdict(mean([9.0, 9.1]), mean([18.8, 18.9]), gain)  # SRL-HU's still falls back
    assert next_run([None], [18.8], gain) is None  # a failed check: SP* stands, no retry loop
    assert next_run([9.1], [18.8], gain) is None  # SRL-HU's K-C + K-CU: a clear loss at once
    assert next_run([17.0], [18.8], gain) == "subset"  # -10 %: a low draw as likely as a loss

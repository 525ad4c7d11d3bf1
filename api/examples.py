"""One example per body the API takes or sends, keyed by its schema's name in the OpenAPI
document: the SRL -> HU pair of the paper's Table 1 (two of SRL's ISPs), as the service answers
it (the figures are those of a grid campaign driven to its answer). `api.openapi` puts each on
the operations that send or take that schema; a list or a page of them is built from the item's.
tests/api/test_openapi_clients.py validates every one against its schema."""

from __future__ import annotations

from typing import Any

T0 = "2026-03-02T09:00:00Z"
T1 = "2026-03-02T09:41:07Z"
SUBFLOWS = ["U-C", "U-CU", "K-C", "K-CU"]


def _isp(id_: int, name: str, label: str, kbps: float, address: str | None) -> dict[str, Any]:
    return {"id": id_, "name": name, "label": label, "down_kbps": kbps, "up_kbps": kbps,
            "address": address}


SRL_OUT = {"id": 1, "name": "SRL", "description": "Simula Research Laboratory", "isps": [
    _isp(1, "Uninett", "U", 100000.0, "192.0.2.10"),
    _isp(2, "Kvantel", "K", 1000000.0, "198.51.100.10")], "created_at": T0, "updated_at": T0}
HU_OUT = {"id": 2, "name": "HU", "description": "", "isps": [
    _isp(3, "CERNET", "C", 100000.0, "203.0.113.20"),
    _isp(4, "CnUnicom", "CU", 20000.0, None)], "created_at": T0, "updated_at": T0}

TOPOLOGY_OUT = {
    "id": 1, "local_site": SRL_OUT, "remote_site": HU_OUT,
    "subflows": [{"name": f"{a}-{b}", "local_isp_id": ia, "remote_isp_id": ib,
                  "bandwidth_kbps": min(ka, kb), "rtt_ms": 310.0 if f"{a}-{b}" == "K-C" else None}
                 for a, ia, ka in (("U", 1, 100000.0), ("K", 2, 1000000.0))
                 for b, ib, kb in (("C", 3, 100000.0), ("CU", 4, 20000.0))],
    "homogeneous": False, "created_at": T0, "updated_at": T0,
}

EQ1 = {"available": True, "subflows": SUBFLOWS, "buffer_mib": 11.6, "fallback_mib": None,
       "obs_ratio": 0.43, "rtt_max_s": 0.31, "rto_max_s": 0.51, "bandwidth_sum_kbps": 240000.0,
       "rtt_source": "configured", "rto_source": "rfc6298", "reason": None,
       "missing_rtt_subflows": []}


def _arm(pm: str, cc: str, peak_tp: float, obs: float, tp_obs: float) -> dict[str, Any]:
    return {"pm": pm, "cc": cc, "peak_bs_mib": 8.0, "peak_tp_mbps": peak_tp, "obs_mib": obs,
            "tp_at_obs_mbps": tp_obs, "same_as_fullmesh": pm == "PCDC", "kind": "saturating",
            "model_reason": "saturating: AIC 18.3 lower than the quadratic's",
            "measured_obs_mib": 8.0, "measured_max_mbps": peak_tp}


RECOMMENDATION_OUT = {
    "id": 1, "kind": "calibrated", "provisional": False, "topology_id": 1, "campaign_id": 1,
    "delta": 0.07, "objective": {"kind": "bulk"}, "bs_min_mib": 0.5, "bs_max_mib": 32.0,
    "opm": "FullMesh", "occ": "cubic", "obs_mib": 5.03, "otp_mbps": 88.77,
    "autotune_max_mib": 16.0, "autotune_otp_mbps": 91.2, "autotune_interval_mbps": [84.1, 98.3],
    "promise": None, "subset_choice": None, "stream": None,
    "t_star": {"tp_mbps": 95.45, "bs_mib": 8.0, "pm": "FullMesh", "cc": "cubic"},
    "target_mbps": 88.77,
    "arms": [_arm("FullMesh", "cubic", 95.45, 5.03, 88.77),
             _arm("FullMesh", "reno", 90.45, 5.19, 88.77)],
    "subflows_used": SUBFLOWS, "standby_subflows": [], "notes": [], "poll_url": None,
    "traditional": EQ1,
    "provenance": {"answer_from": "solve", "campaign_id": 1, "data_age_s": 3600.0,
                   "fit_ids": [1, 2], "measurement_count": 42, "run_count": 2,
                   "warnings": []},
    "quality_flags": [], "created_at": T1,
}

CAMPAIGN_OUT = {
    "id": 1, "topology_id": 1, "state": "running", "reason": "POST /campaigns",
    "ccs": ["cubic", "reno"], "pms": ["PCDC", "FullMesh"], "buffer_grid_mib": [0.5, 2.0, 8.0],
    "runs": 2, "duration_s": 30.0, "delta": 0.07, "model_kind": "auto", "mode": "grid",
    "objective": {"kind": "bulk"}, "probe_tool": "auto", "probe_seconds_budget": None,
    "probes_total": 34, "probes_done": 12, "probe_seconds_used": 360.0, "progress": 0.35,
    "elapsed_s": 402.5, "remaining_s": 660.0,
    "notes": {"ccs": ["cubic", "reno"], "dropped_ccs": {}, "failed_probes": []},
    "executor": "inprocess", "error": None, "created_at": T0, "queued_at": T0,
    "started_at": T0, "finished_at": None,
}

MEASUREMENT_OUT = {
    "id": 17, "campaign_id": 1, "phase": "buffer", "pm": "FullMesh", "cc": "cubic",
    "bs_mib": 8.0, "run": 1, "excluded_subflow": None, "subflows": SUBFLOWS,
    "duration_s": 30.0, "interval_s": 1.0, "goodput_mbps": [93.1, 95.8, 96.2],
    "mean_goodput_mbps": 95.45, "subflow_bytes": {"U-C": 180355072, "K-C": 177209344},
    "rtt_ms": {"U-C": 301.2, "K-C": 309.8}, "rto_ms": {"U-C": 504.0, "K-C": 512.0},
    "observed_subflows": [], "effective_buffers": {"sender_sndbuf": 16777216},
    "quiet_check": None, "warmup_s": 2.0, "tool": "iperf3", "tool_version": "3.12",
    "status": "ok", "error": None, "started_at": T0, "finished_at": "2026-03-02T09:00:30Z",
}

FIT_OUT = {
    "id": 1, "campaign_id": 1, "pm": "FullMesh", "model_kind": "auto", "n": 12,
    "curves": [{"kind": "saturating", "cc": "cubic", "a": None, "b": None, "c": None,
                "plateau_mbps": 96.27, "knee_mib": 3.6, "sharpness": 3.42,
                "same_as_fullmesh": False}],
    "coefficients": [{"name": "cubic:plateau_mbps", "value": 96.27, "p_value": 2.9e-08},
                     {"name": "cubic:knee_mib", "value": 3.6, "p_value": 6.2e-06}],
    "curve_p_values": {"cubic": {"plateau_mbps": 2.9e-08, "knee_mib": 6.2e-06}},
    "r2": 0.998, "adj_r2": 0.997, "buffer_p_value": 5.7e-07, "gate_passed": True,
    "warnings": [],
    "arms": [{"pm": "FullMesh", "cc": "cubic", "model": "saturating",
              "reason": "AIC 18.3 lower than the quadratic's", "n": 6, "r2": 0.997,
              "buffer_p_value": 5.7e-07, "gate_passed": True, "aic_quadratic": 34.27,
              "aic_saturating": 15.99, "failures": []}],
    "created_at": T1,
}

PLAN = {"answer": {"opm": "FullMesh", "occ": "cubic", "obs_mib": 5.03},
        "used": SUBFLOWS, "standbys": []}

APPLIED_OUT = {
    "id": 1, "topology_id": 1, "recommendation_id": 1, "state": "applying",
    "sites": {"SRL": {"state": "applied"}, "HU": {"state": "applying"}},
    "confirmation": None, "events": [], "error": None, "action": "apply",
    "dispatched_at": T1, "deadline_at": "2026-03-02T09:46:07Z", "created_at": T1,
    "applied_at": None, "finished_at": None, "plan": PLAN,
}

CSV = ("measurement_id,campaign_id,phase,status,pm,cc,buffer_mib,run,subflows,"
       "mean_goodput_mbps,tool\n17,1,buffer,ok,FullMesh,cubic,8.0,1,U-C+U-CU+K-C+K-CU,95.45,"
       "iperf3\n")

EXAMPLES: dict[str, Any] = {
    "SiteOut": SRL_OUT,
    "TopologyOut": TOPOLOGY_OUT,
    "RecommendationOut": RECOMMENDATION_OUT,
    "CampaignOut": CAMPAIGN_OUT,
    "MeasurementOut": MEASUREMENT_OUT,
    "MeasurementDetail": {**MEASUREMENT_OUT, "raw_output": '{"start": {}, "intervals": []}'},
    "ArtifactOut": {"name": "iperf3.json", "size": 48213, "media_type": "application/json",
                    "url": "http://localhost:8000/measurements/17/artifacts/iperf3.json"},
    "SiteCapabilitiesOut": {"site_id": 1, "reported_at": T0, "report": {
        "mptcp": True, "ccs": ["cubic", "reno", "bbr"], "tools": {"iperf3": "3.12"}}},
    "ImpactTable": {"topology_id": 1, "campaign_id": 1, "subflows": SUBFLOWS, "rows": [
        {"cc": "cubic", "omegas": {"U-C": 0.31, "U-CU": -0.04, "K-C": 0.42, "K-CU": 0.02},
         "intervals": {"U-CU": {"low": -0.09, "high": 0.01, "settled": False, "runs": 3}}}]},
    "SubsetTable": {"topology_id": 1, "campaign_id": 1, "subflows": SUBFLOWS, "rows": [
        {"cc": "cubic", "subset": ["U-C", "K-C"], "standby": ["K-CU", "U-CU"],
         "same_as_fullmesh": False}]},
    "FitTable": {"topology_id": 1, "campaign_id": 1, "fits": [FIT_OUT]},
    "ScheduleOut": {"topology_id": 1, "cron": "0 3 * * 1", "enabled": True,
                    "parameters": {"runs": 3, "delta": 0.07}, "last_run_at": None,
                    "last_campaign_id": None, "next_run_at": "2026-03-09T03:00:00Z"},
    "HistoryEntry": {"campaign_id": 1, "reason": "schedule 0 3 * * 1", "finished_at": T1,
                     "recommendation_id": 1, "opm": "FullMesh", "occ": "cubic",
                     "obs_mib": 5.03, "otp_mbps": 88.77, "started_at": T0, "noticed_at": None,
                     "reapply": None},
    "EventOut": {"id": 1, "topology_id": 1, "campaign_id": 2, "previous_campaign_id": 1,
                 "kind": "occ_changed", "subject": "occ", "before": "reno", "after": "cubic",
                 "change_pct": None, "created_at": T1},
    "ApplyPlanOut": {"topology_id": 1, "recommendation_id": 1, "answer": PLAN["answer"],
                     "used": SUBFLOWS, "standbys": [], "dropped": [],
                     "connect": {"SRL": "203.0.113.20"}, "notes": [],
                     "measured": {"measured": True, "largest_buffer_mib": 8.0},
                     "buffer": {"answer_mib": 5.03, "planned_mib": 5.03, "bound": None},
                     "scopes": {"net.ipv4.tcp_congestion_control": "namespace"},
                     "sites": [{"site": "SRL", "sysctls": {
                         "net.ipv4.tcp_congestion_control": {"from": "reno", "to": "cubic"}}}]},
    "ApplyIn": {"confirm": True, "seconds": 10, "watch": True, "hold_s": 5,
                "allow_unmeasured": False, "auto_reapply": False},
    "AppliedOut": APPLIED_OUT,
    "Health": {"status": "ok", "database": "sqlite", "executor": "inprocess",
               "reads_need_token": False},
    "Problem": {"type": "docs/api.md#conflict", "title": "Conflict", "status": 409,
                "detail": "a site named 'SRL' exists", "loc": ["body", "name"]},
}

PROVISIONAL = {
    **RECOMMENDATION_OUT, "id": 2, "kind": "provisional", "provisional": True, "campaign_id": 2,
    "bs_max_mib": 30.0, "opm": "PCDC", "occ": None, "obs_mib": 5.8, "otp_mbps": None,
    "t_star": None, "target_mbps": None, "arms": [], "poll_url": "/campaigns/2",
    "notes": ["provisional: no calibrated data yet; PCDC because the topology is heterogeneous "
              "(paper, Section 5.3)"],
    "provenance": {"campaign_id": 2, "campaign_state": "queued", "source": "provisional",
                   "rule": "homogeneous -> FullMesh, heterogeneous -> PCDC; buffer 50 % of "
                   "Eq. 1"},
    "quality_flags": ["provisional"],
}

# where one operation's response is not its schema's usual example: (operationId, status)
OPERATION_EXAMPLES: dict[tuple[str, str], Any] = {
    ("createRecommendation", "202"): PROVISIONAL,
    ("createCampaign", "202"): {**CAMPAIGN_OUT, "state": "queued", "probes_done": 0,
                                "probe_seconds_used": 0.0, "progress": 0.0, "elapsed_s": None,
                                "remaining_s": 1020.0, "started_at": None},
}

# what a non-JSON success response looks like, by media type
MEDIA_EXAMPLES: dict[str, str] = {"text/csv": CSV}

"""The confirmation of an apply: a plain MPTCP application's goodput on the sites' own
endpoints and sysctls against (1 - delta) x the answer's OTP (`probes.site.mptcpapp`); a miss, or a
confirmation that cannot run, puts the sites back to the previous apply (`siteapply.revert`)
and flags the answer. A revert that raises settles the row from the journals
(`apply_outbox.fail_now`): never left applying."""

from __future__ import annotations

import logging
from typing import Any

from probes.site import apply as siteapply
from probes.site import mptcpapp
from probes.tools.ports import choose_port_triple

from ...db import session_scope
from ...settings import get_settings
from ...store import applied
from . import apply_outbox

log = logging.getLogger(__name__)

CONFIRM_SECONDS = 10.0
CONFIRM_WARMUP_S = 3.0


def confirm_lasts_s(plan: dict[str, Any]) -> float:
    """How long a confirmation may run before another runner may take it over (its runner
    died): the transfer, its warm-up and a margin for a busy machine."""
    return float(plan.get("confirm", {}).get("seconds", CONFIRM_SECONDS)) + CONFIRM_WARMUP_S + 60


def confirm(apply_id: int) -> dict[str, Any]:
    """The plain MPTCP application's goodput against (1 - delta) x OTP; a miss reverts the
    sites to the previous apply (as before any, if none was in force)."""
    with session_scope() as s:
        row = applied.get_apply(s, apply_id=apply_id)
        plan = row.plan
    want = plan.get("confirm", {})
    answer = plan["answer"]
    if not want.get("wanted", True) or not answer.get("otp_mbps"):
        figures = {"skipped": "not asked" if not want.get("wanted", True) else "no OTP"}
        with session_scope() as s:
            applied.finish(s, applied.get_apply(s, apply_id=apply_id), "applied",
                           confirmation=figures)
        return figures
    sender, receiver = plan["sites"][0], plan["sites"][1]
    try:
        measured = mptcpapp.confirm(
            sender_ns=sender["namespace"], receiver_ns=receiver["namespace"],
            source=plan["connect"]["source"], destination=plan["connect"]["destination"],
            port=choose_port_triple([sender["namespace"], receiver["namespace"]]),
            seconds=float(want.get("seconds", CONFIRM_SECONDS)),
            warmup_s=CONFIRM_WARMUP_S)
        figures = judge(measured, answer)
    except Exception as exc:  # no figures: an answer nobody confirmed is not left in force
        log.exception("apply %s: the confirmation could not run", apply_id)
        figures = {"passed": False, "error": f"the confirmation could not run: {exc}"}
    with session_scope() as s:
        row = applied.lock_apply(s, apply_id=apply_id)
        if figures["passed"]:
            # settled meanwhile (its deadline passed on a busy host): the settler reverted
            # what it found, so its word stands, not this late pass
            if row.state == "applying":
                applied.finish(s, row, "applied", confirmation=figures)
            return figures
    try:
        for entry in plan["sites"]:  # back to the previous apply, if one was in force
            siteapply.revert(ns=entry["namespace"], label=f"apply {apply_id}")
    except Exception as exc:
        log.exception("apply %s: the revert after the missed confirmation", apply_id)
        with session_scope() as s:  # the settler reads the miss from here
            applied.get_apply(s, apply_id=apply_id).confirmation = figures
        apply_outbox.fail_now(apply_id, f"the revert after a missed confirmation failed: "
                              f"{exc}", get_settings())
        return figures
    with session_scope() as s:
        row = applied.get_apply(s, apply_id=apply_id)
        applied.finish(s, row, "unconfirmed", confirmation=figures,
                       error=figures.get("error"))
        if "goodput_mbps" not in figures:
            return figures
        flag = (f"apply_unconfirmed:measured={figures['goodput_mbps']:.3f},"
                f"needed={figures['threshold_mbps']:.3f}")
        if row.recommendation_id is not None:
            from ...store import recommendations

            rec = recommendations.get_recommendation(s, recommendation_id=row.recommendation_id)
            rec.quality_flags = [*(rec.quality_flags or []), flag]
    return figures


def judge(measured: dict[str, Any], answer: dict[str, Any]) -> dict[str, Any]:
    """A confirmation's figures: the in-kernel goodput beside the userspace-PM probes' OTP."""
    otp, delta = float(answer["otp_mbps"]), float(answer["delta"])
    lo, hi = answer.get("promise_low_mbps"), answer.get("promise_high_mbps")
    got = float(measured["goodput_mbps"])
    threshold = (1 - delta) * otp
    return {
        "goodput_mbps": got,
        "otp_mbps": otp,
        "threshold_mbps": threshold,
        "passed": got >= threshold and not measured.get("fallback"),
        "promise": [lo, hi],
        "inside_promise": None if lo is None else lo <= got <= (hi if hi is not None else got),
        # the in-kernel endpoints against the userspace-PM probes the answer came from
        "kernel_over_userspace": got / otp if otp else None,
        "cc": measured.get("cc"),
        "subflows": measured.get("peak_subflows"),
        "fallback": measured.get("fallback"),
        "seconds": measured.get("seconds"),
        "warmup_s": measured.get("warmup_s"),
    }

"""How big a campaign bundle may be: every cap derived from what the product itself can produce
(docs/formats.md, "Limits"). A bundle is input from outside like a request body: a reader
refuses anything a campaign could not contain before it costs memory or reaches a table.
"""

from __future__ import annotations

import math

from probes.base import MAX_ARTIFACT_BYTES, MAX_ARTIFACTS
from probes.vocabulary import MAX_ISPS_PER_SITE, MAX_KBPS

from ...algorithm import adaptive
from ...algorithm.probe_duration import MAX_DURATION_S

# --- a campaign's plan (flows/campaign/plan.CampaignParameters and the settings' bounds) ----------
MAX_SUBFLOWS = MAX_ISPS_PER_SITE**2  # Eq. 3: every pair of the two sites' ISPs
MAX_CCS = 16  # CampaignParameters.ccs
MAX_OFFERED_CCS = 64  # what a kernel lists as available: far more than any kernel ships
MAX_PMS = 2  # PCDC and FullMesh
MAX_GRID = 400 + 64  # CampaignParameters.buffer_grid_mib, plus a plateau extension's steps
MAX_PLAN_RUNS = 100  # CampaignParameters.runs
MAX_IMPACT_RUNS = 50 + 50  # Settings.impact_max_runs, plus runs added while an Omega is unsettled
#: A run index: the plan's runs, or an adaptive arm's repeats (T* and near-line runs).
MAX_RUN_INDEX = max(MAX_PLAN_RUNS, MAX_IMPACT_RUNS, adaptive.T_STAR_MAX_RUNS,
                    adaptive.NEAR_LINE_MAX_RUNS) * 10
#: Probes of one campaign: the full sweep (PMs x CCs x grid x runs) and the impact phase (each CC
#: with every subflow excluded in turn, and none) at the plan's largest figures; a measured
#: selection and warm checks stay well inside that sum.
MAX_MEASUREMENTS = (MAX_PMS * MAX_CCS * MAX_GRID * MAX_PLAN_RUNS
                    + MAX_CCS * (MAX_SUBFLOWS + 1) * MAX_IMPACT_RUNS)

# --- one probe (probes/base.py) -------------------------------------------------------------------
MAX_PROBE_S = 2 * MAX_DURATION_S  # a probe's length, warm-up and tool overrun included
MIN_INTERVAL_S = 0.1  # the finest reporting interval a probe tool is run with
#: A TP(t) series: a probe's length at the finest interval.
MAX_SERIES = math.ceil(MAX_PROBE_S / MIN_INTERVAL_S)
MAX_MBPS = MAX_KBPS / 1000 * MAX_ISPS_PER_SITE  # every link of a site at the largest rate
MAX_BYTES = 2**62  # a byte count (Parquet's int64, with room for a sum over subflows)
MAX_RTT_MS = 600_000.0  # the API's bound on an RTT (api/schemas.RttMs)
#: two hosts' monotonic clocks (time since each one's boot) differ by at most ~a century
MAX_CLOCK_OFFSET_MS = 100 * 365.25 * 86400 * 1000.0
MAX_RAW_OUTPUT = MAX_ARTIFACT_BYTES  # a probe's raw summary is held to a raw output's size
MAX_TEXT = 64 * 1024  # an error message, a warning

# --- the archive ----------------------------------------------------------------------------------
MAX_ARTIFACTS_PER_MEASUREMENT = MAX_ARTIFACTS
MAX_ARTIFACT_MEMBER_BYTES = MAX_ARTIFACT_BYTES
#: bundle.json: at most this many bytes, and at most DOCUMENT_RATIO times the file it came in
#: (an exported document compresses about 20 times on its own, 10 times against the whole file;
#: one that packs a hundred times smaller is a bomb, refused before it is parsed: parsing costs
#: about five times the text in memory).
MAX_DOCUMENT_BYTES = 256 * 1024**2
DOCUMENT_RATIO = 100
MAX_TABLE_BYTES = 256 * 1024**2  # measurements.csv / .parquet (not read on import)
MAX_TOTAL_BYTES = 2 * 1024**3  # what a reader holds in memory at most
#: Free-form JSON (notes, provenance, a capability report): nesting at most this deep.
MAX_JSON_DEPTH = 24

"""`mpcoa apply` refuses an answer no probe measured and says how to go on; `--allow-unmeasured`
gets past that check (these real sites then apply on their own hosts only: nothing changes
here). `--dry-run` says what is unmeasured and what bound lowered the buffer."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

from probes.site.config import read_state
from probes.site.local import LocalSite, capability_report
from service.algorithm.topology import TopologySpec
from tests.builders import site

pytestmark = pytest.mark.slow  # starts server processes or subprocesses (docs/testing.md)

BIN = Path(sys.executable).parent
LOCAL, REMOTE = f"A{secrets.token_hex(3)}", f"B{secrets.token_hex(3)}"


def _database(tmp_path) -> tuple[int, dict[str, str]]:
    from service.db import make_engine, session_scope, upgrade
    from service.store import artifacts, recommendations
    from service.store.inventory import ensure_topology

    url = f"sqlite:///{tmp_path / 'mpcoa.sqlite3'}"
    upgrade(url)
    engine = make_engine(url)
    with session_scope(engine) as s:
        tid = ensure_topology(s, spec=TopologySpec.model_validate(
            {"local": site(LOCAL, [("U", 8000), ("K", 8000)]),
             "remote": site(REMOTE, [("C", 8000)])})).id
        for name, isps in ((LOCAL, {"U": "192.0.2.1", "K": "192.0.2.2"}),
                           (REMOTE, {"C": "198.51.100.1"})):
            report = capability_report(LocalSite(name, isps))
            report["config"] = read_state(None)
            artifacts.save_capabilities(s, site_name=name, report=report)
        recommendations.add_recommendation(
            s, topology_id=tid, kind="provisional", delta=0.07, bs_min_mib=0.5,
            bs_max_mib=30.0, inputs={}, opm="FullMesh", occ=None, obs_mib=1e6, otp_mbps=None,
            tp_max_mbps=None, traditional={}, provenance={}, outputs={})
    engine.dispose()
    env = {k: v for k, v in os.environ.items() if not k.startswith("MPCOA_")}
    env.update({"MPCOA_DATABASE_URL": url, "MPCOA_DATA_DIR": str(tmp_path),
                "MPCOA_TESTBED": f"none{secrets.token_hex(3)}"})  # no testbed has these sites
    return tid, env


def _mpcoa(env, *args):
    return subprocess.run([str(BIN / "mpcoa"), *args], env=env, capture_output=True, text=True,
                          timeout=120, check=False)


def test_the_cli_refuses_an_unmeasured_answer_unless_asked(tmp_path):
    tid, env = _database(tmp_path)
    dry = _mpcoa(env, "apply", str(tid), "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "not measured: answer" in dry.stdout and "is provisional" in dry.stdout
    # no campaign measured it: only the ceiling bounds the buffer
    assert f"buffer: {128 * 2**20} bytes instead of the answer's" in dry.stdout
    assert "MPCOA_APPLY_BUFFER_CEILING_MIB" in dry.stdout

    refused = _mpcoa(env, "apply", str(tid), "--no-confirm", "--no-watch")
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "no probe measured it" in refused.stderr and "--allow-unmeasured" in refused.stderr
    assert "Traceback" not in refused.stderr

    asked = _mpcoa(env, "apply", str(tid), "--no-confirm", "--no-watch", "--allow-unmeasured")
    assert asked.returncode == 2 and "real hosts" in asked.stderr, asked.stderr

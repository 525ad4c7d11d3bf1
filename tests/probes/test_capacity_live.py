"""`mpcoa testbed capacity`: a lasting capacity step on a running testbed, both directions' tbf
changed now and shown by `mpcoa testbed status`; bad input is a clear error and changes
nothing; a link that follows a schedule is refused (its schedule would undo the step)."""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

from probes.testbed.spec import parse_spec
from tests.builders import site
from tests.support import running_testbed

pytestmark = pytest.mark.netns
MPCOA = str(Path(sys.executable).parent / "mpcoa")


def _mpcoa(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([MPCOA, "testbed", *args], capture_output=True, text=True,
                          timeout=60, check=False)


def _rate(ns: str, dev: str) -> str:
    out = subprocess.run(["tc", "-n", ns, "-j", "qdisc", "show", "dev", dev],
                         capture_output=True, text=True, check=True).stdout
    (tbf,) = [q for q in json.loads(out) if q["kind"] == "tbf"]
    return tbf["options"]["rate"]


def test_a_capacity_step_lasts_and_bad_input_changes_nothing():
    spec = parse_spec({"name": f"cap{secrets.token_hex(3)}", "sites": [
        site("A", [("U", 8000)]),
        {"name": "B", "isps": [{"name": "C", "label": "C", "down_kbps": 20000,
                                "up_kbps": 20000,
                                "schedule": {"period_s": 60, "steps": [[0, 20000, 20000]]}}]}]})
    with running_testbed(spec) as bed:
        up_ns, up_dev = bed.ns("A"), "isp-U"
        down_ns, down_dev = bed.core_ns, "s0-U"
        assert _rate(up_ns, up_dev) == 1_000_000  # 8 Mbit/s, in bytes/s
        out = _mpcoa("capacity", bed.name, "A", "U", "--up", "2000", "--down", "4000", "--json")
        assert out.returncode == 0, out.stderr
        assert json.loads(out.stdout)["up_kbps"] == 2000
        assert (_rate(up_ns, up_dev), _rate(down_ns, down_dev)) == (250_000, 500_000)
        status = _mpcoa("status")
        assert "capacity A.U set: up 2000 down 4000 kbit/s" in status.stdout, status.stdout

        for args, said in [
            (("A", "X", "--up", "1000", "--down", "1000"), "has no ISP A.X"),
            (("A", "U", "--up", "0", "--down", "1000"), "outside (0,"),
            (("A", "U", "--up", "nan", "--down", "1000"), "not a number"),
            (("B", "C", "--up", "1000", "--down", "1000"), "follows a capacity schedule"),
        ]:
            bad = _mpcoa("capacity", bed.name, *args)
            assert bad.returncode == 2 and said in bad.stderr, (args, bad.stderr)
            assert "Traceback" not in bad.stderr
        assert (_rate(up_ns, up_dev), _rate(down_ns, down_dev)) == (250_000, 500_000)
        gone = _mpcoa("capacity", "nosuchbed", "A", "U", "--up", "1", "--down", "1")
        assert gone.returncode == 2 and "is not up" in gone.stderr

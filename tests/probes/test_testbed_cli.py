"""`mpcoa testbed up FILE | down NAME | status` as a user runs them: the installed command."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.probes.conftest import assert_nothing_left, small_spec, unique_name

pytestmark = pytest.mark.slow  # starts server processes or subprocesses (docs/testing.md)

MPCOA = str(Path(sys.executable).parent / "mpcoa")


def mpcoa(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([MPCOA, "testbed", *args], capture_output=True, text=True, timeout=120,
                          check=False)


def test_bad_topology_file_is_refused_naming_the_field(tmp_path):
    data = small_spec("x").model_dump(mode="json")
    data["sites"][0]["isps"][1]["up_kbps"] = -1
    data["paths"] = {"U-D": {"loss_pct": 100}}
    p = tmp_path / "bad.yaml"
    p.write_text(yaml.safe_dump(data))
    out = mpcoa("up", str(p))
    assert out.returncode == 2
    assert "sites.0.isps.1.up_kbps" in out.stderr and "paths.U-D.loss_pct" in out.stderr
    out = mpcoa("down", "bad;name")
    assert out.returncode == 2 and "name" in out.stderr


@pytest.mark.netns
def test_up_status_down(tmp_path):
    name = unique_name("cli")
    p = tmp_path / "tb.json"
    p.write_text(json.dumps(small_spec(name).model_dump(mode="json")))
    try:
        out = mpcoa("up", str(p))
        assert out.returncode == 0, out.stderr
        assert f"mpcoa-{name}-site-A" in out.stdout and "path U-D: 10 ms" in out.stdout
        again = mpcoa("up", str(p))  # idempotent
        assert again.returncode == 0, again.stderr
        st = json.loads(mpcoa("status", "--json").stdout)
        mine = [s for s in st if s["name"] == name]
        assert len(mine) == 1 and mine[0]["healthy"]
        assert {(q["isp"], q["direction"]) for q in mine[0]["queues"] if q["site"] == "A"} == {
            ("U", "up"), ("U", "down"), ("T", "up"), ("T", "down")}
        text = mpcoa("status").stdout
        assert "queue A.T up 6000 kbit/s: 16 packets = 32.3 ms (isp)" in text, text
        assert "queue A.U up 12000 kbit/s: 19.8 packets = 20 ms (default)" in text, text
        pid = mine[0]["delayline_pid"]
    finally:
        out = mpcoa("down", name)
    assert out.returncode == 0 and "down" in out.stdout
    assert_nothing_left(name, pid)

"""The journal's host-wide step, for real: a namespace stands for the host (the applier runs
inside it with no namespace of its own and `--allow-host`), and a BPF congestion control's
registration is the host's: this module holds the host's congestion controls alone
(tests.support.host_lock, exclusive) and leaves them as it found them. (`net.core.*mem_max` and
the allowed list are read-only outside the host's own namespace, and the host's own values are
not a test's to change: their carry-over is the same code as the namespace values' in
test_journal_sequences.)

Apply A (registers OLIA, changes the default CC), apply A again (OLIA is there: no step for it
now), roll back: OLIA unregistered, every value from before the first apply. And an applier
killed right after registering OLIA, before it recorded the registration: the recovery still
unregisters it (the journal held the intent).
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from probes.bpf import cc as bpf_cc
from probes.netns import list_netns
from probes.site import apply as siteapply
from probes.site import config as sc
from probes.testbed import lifecycle as tbmod
from probes.testbed.spec import parse_spec
from tests.support import host_lock, wait_for

pytestmark = pytest.mark.netns

ROOT_DIR = Path(__file__).resolve().parents[2]
#: BPF controls this module may register; it takes the first that nobody has registered, so a
#: registration some other user left on the host does not stop the test (it is not ours to undo)
CANDIDATES = ("olia", "balia", "wvegas", "hybla", "scalable")
CC = CANDIDATES[0]  # the one taken, set by the module fixture below


def _unregistered_candidate() -> str:
    free = [c for c in CANDIDATES if c not in bpf_cc.available()]
    if not free:
        pytest.fail(f"every one of {CANDIDATES} is registered already: this test must register "
                    "one itself")
    return free[0]


@pytest.fixture(scope="module", autouse=True)
def _congestion_controls_alone():
    global CC
    with host_lock("congestion-controls", exclusive=True):
        CC = _unregistered_candidate()
        yield
        left = bpf_cc.ours().get(CC, [])
        if left:  # never leave a host-wide registration behind, whatever failed
            bpf_cc.unload([CC], map_ids=left)
        assert not left, f"{CC} was left registered: {left}"


@pytest.fixture(scope="module")
def host_ns():
    name = f"jh{secrets.token_hex(3)}"
    spec = parse_spec({"name": name, "defaults": {"delay_ms": 1}, "sites": [
        {"name": "A", "isps": [{"name": "ispU", "label": "U", "down_kbps": 8000,
                                "up_kbps": 8000}]},
        {"name": "B", "isps": [{"name": "ispC", "label": "C", "down_kbps": 8000,
                                "up_kbps": 8000}]}]})
    try:
        yield tbmod.up(spec).ns("A")
    finally:
        tbmod.down(name)
        assert not [n for n in list_netns() if n.startswith(f"mpcoa-{name}-")]


def _applier(ns: str, root: Path, *args: str, **popen) -> subprocess.Popen:
    """`python -m probes.site.apply ARGS` inside `ns` as if it were the host."""
    env = {**os.environ, "PYTHONPATH": str(ROOT_DIR)}
    return subprocess.Popen(
        ["ip", "netns", "exec", ns, sys.executable, "-m", "probes.site.apply", *args,
         "--root", str(root)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, start_new_session=True, **popen)


def _run(ns: str, root: Path, *args: str) -> dict:
    proc = _applier(ns, root, *args)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, out + err
    return json.loads(out)


def _target(ns: str, tmp_path: Path) -> Path:
    now = sc.read_state(ns)
    default = now["sysctls"]["net.ipv4.tcp_congestion_control"]
    target = {"endpoints": now["endpoints"], "bpf_cc": CC,
              "sysctls": {"net.ipv4.tcp_congestion_control":
                          "reno" if default != "reno" else "bbr"}}
    path = tmp_path / "target.json"
    path.write_text(json.dumps(target))
    return path


def _host_view(ns: str) -> dict:
    """The site as the applier inside `ns` sees its host: its own values, the host's lists."""
    state = sc.read_state(ns)
    return {**state, "registered": sorted(bpf_cc.ours())}


def test_apply_twice_then_roll_back_restores_the_host(host_ns, tmp_path):
    before = _host_view(host_ns)
    assert CC not in before["available_ccs"]
    target = _target(host_ns, tmp_path)
    root = tmp_path / "state"
    first = _run(host_ns, root, "apply", "--allow-host", "--target", str(target),
                 "--label", "apply 1")
    assert first["steps"][0]["kind"] == "bpf_cc"
    applied = _host_view(host_ns)
    assert CC in applied["available_ccs"] and CC in applied["registered"]

    # again: OLIA is registered: no step for it now
    again = _run(host_ns, root, "apply", "--allow-host", "--target", str(target),
                 "--label", "apply 2")
    kinds = {f"{s['kind']}:{s['key']}" for s in again["steps"]}
    assert f"bpf_cc:{CC}" not in kinds
    # ...yet the journal still holds it, from the first apply
    assert f"bpf_cc:{CC}" in {f"{o['kind']}:{o['key']}" for o in again["originals"]}

    # a rollback naming the first apply is not this journal's: nothing changes
    stale = _run(host_ns, root, "rollback", "--label", "apply 1")
    assert stale["outcome"] == "not_this_apply"
    assert _host_view(host_ns) == applied

    back = _run(host_ns, root, "rollback", "--label", "apply 2")
    assert back["outcome"] == "rolled_back"
    assert _host_view(host_ns) == before  # OLIA unregistered, the default CC back


def test_a_registration_is_undone_after_a_crash_before_it_was_recorded(host_ns, tmp_path):
    before = _host_view(host_ns)
    target = _target(host_ns, tmp_path)
    root = tmp_path / "state"
    proc = _applier(host_ns, root, "apply", "--allow-host", "--target", str(target),
                    "--label", "apply 1", "--hold-after-register")
    held = siteapply.state_dir(None, root) / "held"
    try:
        wait_for(lambda: held.exists() or proc.poll() is not None, 300,
                 "the applier to register and hold")
        assert proc.poll() is None, proc.communicate()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    journal = siteapply.read_journal(siteapply.state_dir(None, root))
    assert journal["phase"] == "applying"
    assert journal["bpf"][CC]["map_ids"] is None  # the ids were never recorded...
    assert CC in bpf_cc.ours()  # ...but it is registered

    out = _run(host_ns, root, "recover")
    assert out["outcome"] == "rolled_back"
    assert _host_view(host_ns) == before

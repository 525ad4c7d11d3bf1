"""The journal is exact: every sequence of applies, re-applies, failed applies and rollbacks on a
real site namespace, each followed by a rollback, ends with the site as it was before the first
apply, value by value; a failed apply leaves the previous apply in force, journaled; a rollback
that names another apply changes nothing.

A and B set different keys (A: limits, tcp_wmem, two endpoints; B: neither, tcp_rmem and one
endpoint), so a rollback after A then B must restore values only A's journal held. F passes
validation and fails at its endpoints step (a device the namespace lacks) after it changed a
sysctl and the limits, so its undo is real.
"""

from __future__ import annotations

import itertools
import secrets

import pytest

from probes.base import ProbeError
from probes.site import apply as siteapply
from probes.site import config as sc
from probes.testbed.spec import parse_spec
from tests.apply.sitestate import holds, site_state
from tests.support import running_testbed

pytestmark = pytest.mark.netns


OPS = ("A", "B", "F", "R")
#: every sequence of this length (each ends with a rollback too): 4^3 = 64 sequences
LENGTH = 3


@pytest.fixture(scope="module")
def site():
    name = f"jr{secrets.token_hex(3)}"
    spec = parse_spec({"name": name, "defaults": {"delay_ms": 1}, "sites": [
        {"name": "A", "isps": [{"name": "ispU", "label": "U", "down_kbps": 8000,
                                "up_kbps": 8000},
                               {"name": "ispK", "label": "K", "down_kbps": 4000,
                                "up_kbps": 4000}]},
        {"name": "B", "isps": [{"name": "ispC", "label": "C", "down_kbps": 8000,
                                "up_kbps": 8000}]}]})
    with running_testbed(spec) as bed:
        yield bed.ns("A"), {lk.label: lk.address for lk in bed.site_links("A")}


def _targets(addrs: dict[str, str]) -> dict[str, dict]:
    return {
        "A": {"endpoints": [{"id": 1, "address": addrs["U"], "subflow": True, "fullmesh": True},
                            {"id": 2, "address": addrs["K"], "subflow": True, "backup": True}],
              "limits": {"subflows": 4, "add_addr_accepted": 4},
              "sysctls": {"net.ipv4.tcp_congestion_control": "reno",
                          "net.ipv4.tcp_wmem": "4096 32768 3145728"}},
        "B": {"endpoints": [{"id": 7, "address": addrs["K"], "signal": True}],
              "sysctls": {"net.ipv4.tcp_congestion_control": "bbr",
                          "net.ipv4.tcp_rmem": "4096 65536 2621440"}},
        "F": {"endpoints": [{"id": 9, "address": addrs["U"], "dev": "mpcoanodev0",
                             "subflow": True}],
              "limits": {"subflows": 6},
              "sysctls": {"net.ipv4.tcp_wmem": "4096 8192 1048576"}},
    }


def _run(ns: str, root, targets: dict, seq: tuple[str, ...]) -> None:
    """Run `seq`, checking the site and its journal after each step against what it must be;
    then roll back and compare with the site before, value by value."""
    before = site_state(ns)
    in_force: str | None = None  # the label of the apply in force, per the model
    n = 0
    for op in seq:
        was = site_state(ns)
        if op in ("A", "B"):
            n += 1
            journal = siteapply.apply(targets[op], ns=ns, root=root, label=f"apply {n}")
            assert journal["phase"] == "applied", (seq, journal)
            assert holds(site_state(ns), targets[op]), (seq, op)
            in_force = f"apply {n}"
        elif op == "F":
            n += 1
            with pytest.raises(ProbeError, match="mpcoanodev0"):
                siteapply.apply(targets["F"], ns=ns, root=root, label=f"apply {n}")
            # the previous apply still in force, exactly, with its own journal
            assert site_state(ns) == was, (seq, "a failed apply changed the site")
            journal = siteapply.read_journal(siteapply.state_dir(ns, root))
            if in_force is not None:
                assert (journal["label"], journal["phase"]) == (in_force, "applied"), seq
            else:
                assert journal["phase"] == "rolled_back", seq
            assert journal["failed"]["label"] == f"apply {n}", seq
        else:
            # a rollback naming another apply is refused and changes nothing
            stale = siteapply.rollback(ns=ns, root=root, label="apply 0")
            assert stale["outcome"] in ("not_this_apply", "nothing_in_force",
                                        "nothing_applied"), (seq, stale["outcome"])
            assert site_state(ns) == was, (seq, "a stale rollback changed the site")
            out = siteapply.rollback(ns=ns, root=root, label=in_force or f"apply {n}")
            assert out["outcome"] == ("rolled_back" if in_force else "already_rolled_back"
                                      if n else "nothing_applied"), (seq, out["outcome"])
            assert site_state(ns) == before, (seq, "rolled back")
            in_force = None
    siteapply.rollback(ns=ns, root=root)
    assert site_state(ns) == before, (seq, "the final rollback")
    again = siteapply.rollback(ns=ns, root=root)  # repeated: nothing left to do
    assert again["outcome"] in ("already_rolled_back", "nothing_applied"), seq
    assert site_state(ns) == before, seq


def test_every_sequence_rolls_back_to_the_site_before_the_first_apply(site, tmp_path):
    ns, addrs = site
    targets = _targets(addrs)
    before = site_state(ns)
    assert not holds(before, targets["A"]) and not holds(before, targets["B"])
    sequences = list(itertools.product(OPS, repeat=LENGTH))
    for i, seq in enumerate(sequences):
        _run(ns, tmp_path / f"state{i}", targets, seq)
    assert len(sequences) == 4 ** LENGTH
    assert site_state(ns) == before


def test_apply_twice_then_roll_back_restores_what_the_second_did_not_change(site, tmp_path):
    """Apply A, apply A again (nothing left to change), roll back: the values from before
    the first apply, including those the second apply no longer journaled as changes."""
    ns, addrs = site
    target = _targets(addrs)["A"]
    before = site_state(ns)
    root = tmp_path / "state"
    siteapply.apply(target, ns=ns, root=root, label="apply 1")
    again = siteapply.apply(target, ns=ns, root=root, label="apply 2")
    assert all(st["before"] == st["after"] for st in again["steps"]
               if st["kind"] != "endpoints")  # nothing left to change...
    assert siteapply.rollback(ns=ns, root=root, label="apply 2")["outcome"] == "rolled_back"
    assert site_state(ns) == before  # ...and yet the first apply's values are restored
    assert siteapply.rollback(ns=ns, root=root, label="apply 2")["outcome"] == \
        "already_rolled_back"


def test_the_undo_works_on_a_full_state_filesystem(site, tmp_path):
    """The state directory on a tmpfs of 512 KiB in a private mount namespace (nobody else
    sees it; it goes with the process): apply, fill the tmpfs to the last byte, apply again
    and roll back. Both are journaled in the slots the first apply allocated."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    ns, addrs = site
    before = site_state(ns)
    targets = tmp_path / "targets.json"
    targets.write_text(json.dumps(_targets(addrs)))
    mountpoint = tmp_path / "state"
    mountpoint.mkdir()
    root_dir = Path(__file__).resolve().parents[2]
    child = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", sys.executable,
         str(Path(__file__).with_name("full_state_dir.py")), str(mountpoint), ns, str(targets)],
        env={**os.environ, "PYTHONPATH": str(root_dir)}, capture_output=True, text=True,
        timeout=120, check=False)
    assert child.returncode == 0, child.stdout + child.stderr
    out = json.loads(child.stdout.splitlines()[-1])
    assert out["full"] and out["filled"] > 0, out
    assert out["second"] == "applied" and out["holds_b"], out
    assert out["outcome"] == "rolled_back" and out["journal"] == "rolled_back", out
    assert out["restored"], out
    assert site_state(ns) == before
    assert not os.listdir(mountpoint)  # the tmpfs was the child's alone


def test_a_journal_left_by_the_previous_version_is_still_rolled_back(site, tmp_path):
    """An upgrade with an apply in force: its journal.json (one file, the steps' `before` the
    values to restore) is read, rolled back, and replaced by the slots."""
    import json

    ns, _ = site
    before = site_state(ns)
    key = "net.ipv4.tcp_wmem"
    was, now = before["sysctls"][key], "4096 20480 2097152"
    sc.set_sysctl(ns, key, now)
    directory = siteapply.state_dir(ns, tmp_path / "state")
    directory.mkdir(parents=True)
    (directory / "journal.json").write_text(json.dumps({
        "version": 1, "namespace": ns, "label": "apply 7", "phase": "applied",
        "steps": [{"kind": "sysctl", "key": key, "before": was, "after": now, "done": True}],
        "skipped": [], "bpf_map_ids": {}}))
    out = siteapply.rollback(ns=ns, root=tmp_path / "state", label="apply 7")
    assert out["outcome"] == "rolled_back"
    assert site_state(ns) == before
    assert not (directory / "journal.json").exists()
    assert siteapply.read_journal(directory)["phase"] == "rolled_back"

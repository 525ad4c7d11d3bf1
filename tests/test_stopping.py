"""Stopping is clean: SIGINT (Ctrl-C, sent to the process group as a terminal does) and SIGTERM
(`kill`, sent to the process alone) to a real `mpcoa demo`, in several phases, leave no network
namespace, no iperf3 and no child process behind.

The demo runs the smallest shipped scenario (UiT -> HAW: 3 namespaces, 2 subflows) with one run
of 2 s probes (the shortest that keeps an interval after the warm-up). Phases: the testbed being
built, the campaign running (a probe stored), and the answer printed while the API serves.
Before the signal the test records every process of the demo's tree and every process inside
the testbed's namespaces; after the exit none may be alive.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from probes.netns import list_netns, netns_pids, pid_alive
from probes.testbed.spec import load_spec, scenario_path
from tests.processes import kill_group, tail_logs
from tests.support import free_port, parent_in_stat, wait_for

# The demo's campaign uses every congestion control the kernel offers at that moment: like every
# netns test it runs in the one live group, never beside a test that registers BPF controls.
pytestmark = pytest.mark.netns

BIN = Path(sys.executable).parent
SCENARIO = "uit-haw"
TESTBED = load_spec(scenario_path(SCENARIO)).name


def _namespaces() -> list[str]:
    return [n for n in list_netns() if n.startswith(f"mpcoa-{TESTBED}-")]


def _tree(root: int) -> set[int]:
    """`root` and its descendants, from /proc."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = parent_in_stat(stat)
        children.setdefault(ppid, []).append(int(entry.name))
    found, todo = set(), [root]
    while todo:
        pid = todo.pop()
        found.add(pid)
        todo.extend(children.get(pid, []))
    return found


def _iperf3(pids: set[int]) -> set[int]:
    out = set()
    for pid in pids:
        try:
            name = Path(f"/proc/{pid}/comm").read_text().strip()
        except OSError:
            continue
        if name == "iperf3":
            out.add(pid)
    return out


class Demo:
    """`mpcoa demo` in a session of its own, its output in a log file."""

    def __init__(self, tmp: Path) -> None:
        assert not _namespaces(), f"a testbed {TESTBED} is up already: {_namespaces()}"
        self.tmp = tmp
        self.port = free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith("MPCOA_")}
        env["COLUMNS"] = "160"
        self.log = tmp / "demo.log"
        with open(self.log, "w") as log:
            self.proc = subprocess.Popen(
                [str(BIN / "mpcoa"), "demo", "--scenario", SCENARIO, "--runs", "1",
                 "--duration", "2", "--port", str(self.port), "--data-dir", str(tmp / "data")],
                env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    def output(self) -> str:
        return tail_logs(self.tmp, "demo.log", 4000)

    def running(self) -> bool:
        assert self.proc.poll() is None, f"the demo ended early:\n{self.output()}"
        return True

    def wait_phase(self, phase: str) -> None:
        if phase == "testbed":  # the namespaces exist: the build is under way or just done
            wait_for(lambda: self.running() and len(_namespaces()) == 3, 120,
                     "the demo's three namespaces", interval=0.05)
        elif phase == "campaign":  # a probe has been stored, more are to come
            base = f"http://127.0.0.1:{self.port}"

            def probed() -> bool:
                self.running()
                try:
                    items = httpx.get(f"{base}/campaigns", timeout=5).json()["items"]
                except (httpx.HTTPError, ValueError, KeyError):
                    return False
                return bool(items) and items[0]["state"] == "running" and (
                    0 < items[0]["probes_done"] < items[0]["probes_total"])

            wait_for(probed, 180, "the demo's campaign to store a probe", interval=0.3)
        elif phase == "serving":  # the answer is printed and the API serves
            wait_for(lambda: self.running() and "serving the API" in self.log.read_text(),
                     480, "the demo's answer", interval=1.0)
        else:
            raise AssertionError(phase)

    def stop(self, sig: int) -> int:
        """Send `sig` (SIGINT to the group, as a terminal's Ctrl-C; SIGTERM to the process, as
        `kill`) and return the exit status; everything it ran must be gone."""
        before = _tree(self.proc.pid)
        for ns in _namespaces():
            before |= set(netns_pids(ns))
        if sig == signal.SIGINT:
            os.killpg(self.proc.pid, sig)
        else:
            self.proc.send_signal(sig)
        try:
            code = self.proc.wait(timeout=90)
        except subprocess.TimeoutExpired:
            kill_group(self.proc)
            raise AssertionError(f"the demo did not stop in 90 s:\n{self.output()}") from None
        left = {p for p in before if p != self.proc.pid and pid_alive(p)}
        assert not left, (f"left running: {sorted(left)} (iperf3: {sorted(_iperf3(left))})\n"
                          f"{self.output()}")
        assert not _namespaces(), (_namespaces(), self.output())
        return code

    def kill(self) -> None:
        if self.proc.poll() is None:
            kill_group(self.proc)


@pytest.mark.parametrize(
    ("sig", "phase"),
    [  # each signal in two phases; one full campaign in all (the serving phase's)
        (signal.SIGINT, "testbed"),
        (signal.SIGTERM, "campaign"),
        (signal.SIGINT, "campaign"),
        (signal.SIGTERM, "serving"),
    ],
    ids=lambda v: v.name if isinstance(v, signal.Signals) else v,
)
def test_a_stop_signal_tears_the_demo_down(tmp_path, sig, phase):
    demo = Demo(tmp_path)
    try:
        demo.wait_phase(phase)
        code = demo.stop(sig)
    finally:
        demo.kill()
        if _namespaces():  # never leave the testbed to the next test
            subprocess.run([str(BIN / "mpcoa"), "testbed", "down", TESTBED], check=False,
                           capture_output=True, timeout=120)
    out = demo.output()
    assert f"testbed {TESTBED} removed" in out, out
    # Ctrl-C ends the demo as before (status 0); SIGTERM as a shell expects (128 + 15).
    assert code == (0 if sig == signal.SIGINT else 128 + signal.SIGTERM), (code, out)

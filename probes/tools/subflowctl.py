"""Subflow control for every backend: which subflows a probe may use, where its connection
starts, and the userspace path manager that establishes the excluded ones as backup.

The in-kernel path manager marks a whole local *address* as backup; PCDC and the impact phase
need one (local ISP, remote ISP) subflow excluded, hence ``probes/tools/upm.py`` in the sender's
namespace, switched to ``net.mptcp.path_manager = userspace`` for the run. Probes with every
subflow in use run on it too, so that no two probes differ in their path manager.
"""

from __future__ import annotations

import ipaddress
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from probes.base import CapabilityError, MeasurementRequest, ProbeError
from probes.netns import kill_pid, sysctl_set
from probes.tools.context import HostPair


@dataclass(frozen=True)
class SubflowPlan:
    """``bind_addr``: local address the connection starts from (None = the kernel's choice);
    ``server_addr``: receiver address it connects to; ``leave_active``: excluded subflows
    deliberately created *without* the backup flag (a real fault, for tests of the check)."""

    all: list[str]
    allowed: list[str]
    excluded: list[str]
    bind_addr: str | None
    server_addr: str
    leave_active: list[str] = field(default_factory=list)
    #: the userspace path manager creates the subflows (else the in-kernel fullmesh one)
    controlled: bool = True


def plan_subflows(pair: HostPair, request: MeasurementRequest,
                  leave_active: tuple[str, ...] = ()) -> SubflowPlan:
    all_sf = pair.all_subflows()
    _one_family(pair)
    allowed = list(request.allowed_subflows or all_sf)
    unknown = [s for s in allowed if s not in all_sf]
    if unknown:
        raise ProbeError(f"allowed_subflows: unknown subflow(s) {unknown} (have {all_sf})")
    excluded = [s for s in all_sf if s not in allowed]
    bad = [s for s in leave_active if s not in excluded]
    if bad:
        raise ProbeError(f"leave_active: {bad} are not excluded subflows ({excluded})")
    if not excluded and not pair.userspace_pm:  # a host we may not switch: the kernel's PM
        return SubflowPlan(all_sf, allowed, [], None, next(iter(pair.receiver_addrs.values())),
                           controlled=False)
    # Every probe that can, runs on the userspace PM, all subflows or not: TP_0 and each TP_i,
    # the FullMesh and the PCDC arms then differ in their subflow sets only, never in the PM.
    if not pair.userspace_pm:
        raise CapabilityError("subflow control needs the userspace path manager on the "
                              "sender (not permitted for this host pair)")
    lo, re_ = allowed[0].split("-")  # the connection starts on an allowed subflow
    return SubflowPlan(all_sf, allowed, excluded, pair.sender_addrs[lo],
                       pair.receiver_addrs[re_], list(leave_active))


def _one_family(pair: HostPair) -> None:
    """A subflow joins two addresses of one family: sites of different families cannot probe
    each other (said before any tool starts, not as a probe that carried nothing)."""
    def fams(addrs: dict[str, str]) -> set[int]:
        return {ipaddress.ip_address(a).version for a in addrs.values()}

    s, r = fams(pair.sender_addrs), fams(pair.receiver_addrs)
    if len(s | r) <= 1:
        return
    raise CapabilityError(
        f"address families: the sender's ISP addresses are {_names(s)}, the receiver's "
        f"{_names(r)}: MPTCP subflows join addresses of one family; give both sites' workers "
        "IPv4 addresses, or both IPv6 ones (--isp)")


def _names(versions: set[int]) -> str:
    return " and ".join(f"IPv{v}" for v in sorted(versions)) or "none"


def set_path_manager(ns: str | None, kind: str) -> None:
    """``kernel`` or ``userspace`` for new connections in ``ns`` (path_manager, or pm_type)."""
    # the key exists in every namespace of a kernel that has it: read here, not by a process
    if os.path.exists("/proc/sys/net/mptcp/path_manager"):
        sysctl_set(ns, {"net.mptcp.path_manager": kind})
    else:
        sysctl_set(ns, {"net.mptcp.pm_type": 1 if kind == "userspace" else 0})


class SubflowControl:
    """Userspace path manager in the sender's namespace for one run (context manager).

    Creates every subflow of the plan on the connection to ``dport`` (the *data* port: P for
    iperf3, P-1 for NetPerfMeter's MPTCP flows); excluded ones with the backup flag.
    """

    def __init__(self, pair: HostPair, plan: SubflowPlan, dport: int) -> None:
        self.pair, self.plan, self.dport = pair, plan, dport
        self.proc: subprocess.Popen[bytes] | None = None
        # made on entering, so a control built and never run (config() alone, or a probe that
        # failed before its run) leaves no folder behind
        self.dir: Path | None = None
        self.log: IO[bytes] | None = None
        self._userspace = False  # the sender's path manager is set to userspace
        self.events: list[dict[str, Any]] = []

    def config(self) -> dict[str, Any]:
        ids = {lbl: i + 1 for i, lbl in enumerate(self.pair.sender_addrs)}
        subflows = []
        for s in self.plan.all:
            lo, re_ = s.split("-")
            backup = s in self.plan.excluded and s not in self.plan.leave_active
            subflows.append({"local": self.pair.sender_addrs[lo], "local_id": ids[lo],
                             "remote": self.pair.receiver_addrs[re_], "backup": backup})
        ready = None if self.dir is None else str(self.dir / "ready")
        return {"dport": self.dport, "ready_file": ready, "subflows": subflows}

    def __enter__(self) -> SubflowControl:
        self.dir = Path(tempfile.mkdtemp(prefix="mpcoa-upm-", dir=self.pair.workdir))
        try:
            (self.dir / "upm.json").write_text(json.dumps(self.config()))
            env = dict(os.environ)
            env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
            self.log = open(self.dir / "events.jsonl", "wb")  # closed on exit
            self.proc = subprocess.Popen(  # noqa: S603 - fixed argv
                self.pair.sender([sys.executable, "-m", "probes.tools.upm",
                                  str(self.dir / "upm.json")]),
                stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.STDOUT, env=env,
            )
            # while the helper starts (its events come under either path manager, and no
            # connection is made before both are done)
            set_path_manager(self.pair.sender_ns, "userspace")
            self._userspace = True
            deadline = time.monotonic() + 10
            while not (self.dir / "ready").exists():
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    said = (self.dir / "events.jsonl").read_text(errors="replace")[-400:]
                    raise ProbeError(f"userspace path manager helper did not start: {said}")
                time.sleep(0.005)
        except BaseException:
            self.__exit__(None, None, None)  # whatever was started stops, the folder goes
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None and self.proc.poll() is None:
            kill_pid(self.proc.pid)
        if self.proc is not None:
            self.proc.wait()
        if self.log is not None:
            self.log.close()
        if self._userspace:
            set_path_manager(self.pair.sender_ns, "kernel")
            self._userspace = False
        if self.dir is None:
            return
        events = self.dir / "events.jsonl"
        self.events = []
        for ln in (events.read_text(errors="replace") if events.exists() else "").splitlines():
            try:
                self.events.append(json.loads(ln))
            except ValueError:
                self.events.append({"text": ln})
        shutil.rmtree(self.dir, ignore_errors=True)  # its events are read: a probe leaves none

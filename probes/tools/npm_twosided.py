"""NetPerfMeter two-sided, with a long-lived passive node.

NetPerfMeter's passive side is a server that serves any number of measurements: each real
site's worker runs one (`PassiveNode`), supervised and started again should it end, and names
its ports in the site's capability report. The sender's worker runs the active side per probe
(`active_measure`) against the receiving site's node, under its own subflow control; the
passive side's results come back to the active side over the control connection (its
``run-passive.*`` files), so one side writes every file the result is read from.

Ports (2.x): the node started with ``P`` takes MPTCP data on P-1 and control on P+1.
"""

from __future__ import annotations

import logging
import subprocess
import threading
from typing import Any

from probes.base import MeasurementRequest, MeasurementResult, ProbeError
from probes.netns import in_ns
from probes.tools.context import HostPair, mptcp_settings
from probes.tools.hygiene import abort_connections
from probes.tools.netperfmeter import (
    NetPerfMeterBackend,
    build_commands,
    data_port,
    done_when_logged,
    finish_result,
    is_legacy,
    run_folder,
)
from probes.tools.ports import choose_port_triple
from probes.tools.runner import RunOutput, Server, ToolRun, wait_listening
from probes.tools.subflowctl import plan_subflows
from probes.tools.twosided import die_with_parent, drive_sender, prepare_receiver

log = logging.getLogger(__name__)
#: a node that ended is started again after this long (one that keeps dying is not spun)
RESTART_DELAY_S = 1.0


def node_version(binary: str) -> str:
    """The binary's version, refused unless 2.x (1.9's MPTCP is the out-of-tree kernels')."""
    version = NetPerfMeterBackend(HostPair(None, None, {}, {}), binary=binary).version()
    if is_legacy(version):
        raise ProbeError(f"netperfmeter {version}: a passive node needs NetPerfMeter 2.x")
    return version


class PassiveNode:
    """One long-lived ``netperfmeter P --control-over-tcp`` on this host (or namespace `ns`),
    started again whenever it ends, until `stop`."""

    def __init__(self, binary: str, local_addrs: dict[str, str], ns: str | None = None,
                 port: int | None = None) -> None:
        self.binary, self.ns, self.local_addrs = binary, ns, dict(local_addrs)
        self.version = node_version(binary)
        self.port = port or choose_port_triple([ns])
        self.restarts = 0
        self._server: Server | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def argv(self) -> list[str]:
        return [self.binary, str(self.port), "--control-over-tcp", "--nodisplay"]

    def _start_once(self) -> None:
        proc = subprocess.Popen(  # noqa: S603 - argv from a checked binary and a port number
            die_with_parent(in_ns(self.ns, self.argv)), stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        server = Server(proc, self.ns, "netperfmeter")
        try:
            wait_listening(self.ns, self.port + 1, proc, "netperfmeter")
        except BaseException:
            server.kill()
            raise
        self._server = server

    def start(self) -> PassiveNode:
        """Start the node and its supervisor; ProbeError when it does not come up."""
        prepare_receiver(self.ns, len(self.local_addrs))
        self._start_once()
        self._thread = threading.Thread(target=self._supervise, name="netperfmeter-passive",
                                        daemon=True)
        self._thread.start()
        return self

    def _supervise(self) -> None:
        while not self._stop.wait(0.5):
            server = self._server
            if server is not None and server.proc.poll() is None:
                continue
            log.warning("netperfmeter passive node on port %s ended (status %s): starting "
                        "it again", self.port, None if server is None else server.proc.poll())
            if self._stop.wait(RESTART_DELAY_S):
                return
            try:
                self._start_once()
                self.restarts += 1
            except Exception as exc:  # the port taken meanwhile, ...: try again next round
                self._server = None
                log.warning("netperfmeter passive node: restart failed (%s)", exc)

    @property
    def pid(self) -> int | None:
        return None if self._server is None else self._server.pid

    def running(self) -> bool:
        return self._server is not None and self._server.proc.poll() is None

    def describe(self) -> dict[str, Any]:
        """What a capability report says of the node: the active side connects to `port`."""
        return {"port": self.port, "data_port": data_port(self.port, self.version),
                "control_port": self.port + 1, "version": self.version}

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
        if self._server is not None:
            self._server.kill()
        abort_connections(self.ns, [self.port - 1, self.port, self.port + 1])


def active_measure(request: MeasurementRequest, *, sender_addrs: dict[str, str],
                   receiver_addrs: dict[str, str], port: int, binary: str,
                   ns: str | None = None, receiver_ns: str | None = None) -> MeasurementResult:
    """The sender's half: the active side against the receiving site's node on `port`, under
    subflow control (userspace PM on this host's own stack); this side's connections aborted
    afterwards. `receiver_ns`: the receiver's namespace where it is one of this host's (a test
    of both sites on one machine); its own settings are then read too."""
    version = node_version(binary)
    pair = HostPair(ns, receiver_ns, dict(sender_addrs), dict(receiver_addrs),
                    userspace_pm=True)
    plan = plan_subflows(pair, request)
    with run_folder() as outdir:
        _, active = build_commands(request, version=version, address=plan.server_addr, port=port,
                                   outdir=outdir, binary=binary, local=plan.bind_addr,
                                   compress=True)
        cmd = ToolRun(tool="netperfmeter", server_argv=[], client_argv=active,
                      data_port=data_port(port, version), listen_port=port + 1,
                      ports=[port - 1, port, port + 1], client_timeout_s=request.duration_s + 60,
                      client_cwd=outdir, **done_when_logged(version, outdir, request))
        out = RunOutput(settings={"sender": mptcp_settings(ns)})
        if receiver_ns is not None:
            out.settings["receiver"] = mptcp_settings(receiver_ns)
        drive_sender(pair, plan, cmd, out, ns)
        return finish_result(request, pair, plan, out, cmd, outdir, version, floor_ms=None,
                             extra_raw={"two_sided": True, "passive_node_port": port})

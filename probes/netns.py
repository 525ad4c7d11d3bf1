"""Running commands, inside network namespaces or not, without any shell.

Every command is an argument list; every value in it comes from validated input (identifiers,
numbers, addresses made by the testbed itself).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Sequence

from probes.base import ProbeError

NETNS_DIR = "/run/netns"


class CommandError(ProbeError):
    def __init__(self, argv: Sequence[str], returncode: int, stderr: str) -> None:
        self.argv = list(argv)
        self.returncode = returncode
        self.stderr = stderr
        super().__init__(f"command failed ({returncode}): {' '.join(argv)}: {stderr.strip()}")


def run(
    argv: Sequence[str],
    *,
    check: bool = True,
    timeout: float = 30.0,
    input_text: str | None = None,
) -> subprocess.CompletedProcess[str]:
    try:
        cp = subprocess.run(  # noqa: S603 - argv list from validated values, no shell
            list(argv),
            capture_output=True,
            text=True,
            timeout=timeout,
            input=input_text,
            check=False,
        )
    except FileNotFoundError as exc:
        raise ProbeError(f"{argv[0]}: not installed ({exc.strerror})") from None
    if check and cp.returncode != 0:
        raise CommandError(argv, cp.returncode, cp.stderr)
    return cp


def run_many(commands: Sequence[Sequence[str]], timeout: float = 30.0
             ) -> list[subprocess.CompletedProcess[str]]:
    """Several commands at once, their results in order (check=False: each caller reads the
    return codes). For reads only: a probe's checks read a dozen tables through as many
    processes, and one after another they took about a tenth of a second of every probe."""
    procs: list[subprocess.Popen[str]] = []
    try:
        for argv in commands:
            try:
                procs.append(subprocess.Popen(  # noqa: S603 - argv lists from validated values
                    list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE, text=True))
            except FileNotFoundError as exc:
                raise ProbeError(f"{argv[0]}: not installed ({exc.strerror})") from None
        deadline = time.monotonic() + timeout
        out = []
        for argv, proc in zip(commands, procs, strict=True):
            try:
                stdout, stderr = proc.communicate(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                raise ProbeError(f"{' '.join(argv)}: no answer after {timeout:g} s") from None
            out.append(subprocess.CompletedProcess(list(argv), proc.returncode, stdout, stderr))
        return out
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def in_ns(ns: str | None, argv: Sequence[str]) -> list[str]:
    """argv to run ``argv`` inside namespace ``ns`` (or as is for None)."""
    if ns is None:
        return list(argv)
    return ["ip", "netns", "exec", ns, *argv]


def run_ns(ns: str | None, argv: Sequence[str], **kw) -> subprocess.CompletedProcess[str]:
    return run(in_ns(ns, argv), **kw)


def ip(ns: str | None, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    base = ["ip"] if ns is None else ["ip", "-n", ns]
    return run([*base, *args], check=check)


def ip_batch(ns: str | None, commands: list[list[str]], options: Sequence[str] = ()) -> None:
    """Many ``ip`` commands in one process (``ip -batch -``); arguments must not contain spaces.
    `options` precede ``-batch`` (``-6``: the family of rules and routes without an address)."""
    if not commands:
        return
    for c in commands:
        for a in c:
            if not a or any(ch.isspace() for ch in a) or a.startswith("#"):
                raise ProbeError(f"ip batch: refusing argument {a!r}")
    base = ["ip"] if ns is None else ["ip", "-n", ns]
    text = "\n".join(" ".join(c) for c in commands) + "\n"
    run([*base, *options, "-batch", "-"], input_text=text)


def sysctl(ns: str | None, **values: str | int) -> None:
    args = [f"{k.replace('__', '.')}={v}" for k, v in values.items()]
    run_ns(ns, ["sysctl", "-q", "-w", *args])


def sysctl_set(ns: str | None, pairs: dict[str, str | int]) -> None:
    run_ns(ns, ["sysctl", "-q", "-w", *[f"{k}={v}" for k, v in pairs.items()]])


def sysctl_get(ns: str | None, key: str) -> str | None:
    cp = run_ns(ns, ["sysctl", "-n", key], check=False)
    return cp.stdout.strip() if cp.returncode == 0 else None


def sysctl_get_many(ns: str | None, keys: Sequence[str]) -> dict[str, str | None]:
    """Several keys in one `sysctl` call (None where the kernel lacks one): a probe records a
    dozen, and one process per key cost a tenth of a second of every probe."""
    return sysctl_values(run_ns(ns, sysctl_argv(keys), check=False).stdout, keys)


def sysctl_argv(keys: Sequence[str]) -> list[str]:
    return ["sysctl", "-e", *keys]


def sysctl_values(text: str, keys: Sequence[str]) -> dict[str, str | None]:
    """The keys' values from the output of `sysctl_argv(keys)` (None: the kernel lacks it)."""
    found = dict(line.split(" = ", 1) for line in text.splitlines() if " = " in line)
    return {k: (found[k].strip() if k in found else None) for k in keys}


def list_netns() -> list[str]:
    try:
        return sorted(os.listdir(NETNS_DIR))
    except FileNotFoundError:
        return []


def netns_exists(ns: str) -> bool:
    return os.path.exists(os.path.join(NETNS_DIR, ns))


def netns_pids(ns: str) -> list[int]:
    cp = run(["ip", "netns", "pids", ns], check=False)
    return [int(x) for x in cp.stdout.split() if x.isdigit()]


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a zombie counts as gone
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def pid_cmdline(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return [x.decode(errors="replace") for x in f.read().split(b"\0") if x]
    except OSError:
        return []


def kill_pid(pid: int, timeout: float = 3.0) -> None:
    """SIGTERM, then SIGKILL after ``timeout``; only ever called for processes we started."""
    for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 2.0)):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
                if done == pid:
                    return
            except ChildProcessError:
                pass
            if not pid_alive(pid):
                return
            time.sleep(0.005)

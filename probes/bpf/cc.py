"""Congestion controls this kernel lacks, as BPF struct_ops ``tcp_congestion_ops``.

The paper's set is {Cubic, OLIA, Hybla, Reno, Scalable, Vegas}; a kernel with only reno/cubic/bbr
built in gets ``scalable``, ``hybla`` and ``vegas`` from the BPF C ports in ``probes/bpf/src/``
(GPL-2.0, ported from the kernel's ``net/ipv4/tcp_*.c``). They are compiled with clang
(``-target bpf``) against a ``vmlinux.h`` generated from the running kernel's BTF, and registered
with ``bpftool struct_ops register`` (from a copy of the cached object checked against the
SHA-256 recorded when it was built: ``probes.bpf.cache``); they then appear in
``tcp_available_congestion_control`` and can be chosen per socket (``TCP_CONGESTION``,
``iperf3 -C``).

Coupled MPTCP controls (``lia``, ``olia``, ``balia``, ``wvegas``, and seed 002's ``ewtcp`` and
``cs218``; ``COUPLED``) are written from RFC 6356, the papers' equations and seed 002's text
(``probes/bpf/src/mpcoa_mptcp_cc.h``): each subflow finds its MPTCP connection through BTF
(``mptcp_subflow_context->conn``) and shares per-connection state in a BPF hash map
``mpcoa_c_<cc>`` keyed by it; entries go when subflows are released, the map with the programs
when the control is unregistered. On a plain TCP socket they are Reno (wVegas:
Vegas). ``probes/bpf/coupling.py`` measures RFC 6356's goals on the testbed.

Registrations are HOST-WIDE (every network namespace sees them). Our struct_ops maps are named
``mpcoa_<cc>``; ``unload`` only ever removes maps with that name.

Every command is an argument list (no shell); names are checked against ``CC_PATTERN``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from probes import environment
from probes.base import CC_PATTERN, CapabilityError, ProbeError
from probes.bpf import cache as bpf_cache

SOURCE_DIR = Path(__file__).resolve().parent / "src"
HEADER = SOURCE_DIR / "mpcoa_tcp_ca.h"
#: the congestion controls we can build, in the paper's order
SUPPORTED: tuple[str, ...] = ("hybla", "scalable", "vegas", "lia", "olia", "balia", "wvegas",
                               "ewtcp", "cs218")
#: the coupled MPTCP controls among them (shared per-connection state in a BPF hash map)
COUPLED: tuple[str, ...] = ("lia", "olia", "balia", "wvegas", "ewtcp", "cs218")
#: clang flags (v3: the coupled controls claim subflow slots with BPF atomics)
CFLAGS: tuple[str, ...] = ("-O2", "-g", "-target", "bpf", "-mcpu=v3", "-Wall", "-Werror")
MAP_PREFIX = "mpcoa_"
BTF_VMLINUX = Path("/sys/kernel/btf/vmlinux")
AVAILABLE_SYSCTL = Path("/proc/sys/net/ipv4/tcp_available_congestion_control")
LIBBPF_HEADER = Path("/usr/include/bpf/bpf_helpers.h")
DEFAULT_SYSTEM_CACHE = Path("/var/lib/mpcoa/bpf_cc")

log = logging.getLogger(__name__)
_REGISTERED_RE = re.compile(r"Registered\s+tcp_congestion_ops\s+(\S+)\s+id\s+(\d+)")


class BpfCcError(ProbeError):
    """Building, registering or unregistering a BPF congestion control failed."""


# --------------------------------------------------------------------------- helpers


def check_name(name: str) -> str:
    """A congestion-control name we can build (one of ``SUPPORTED``)."""
    if not isinstance(name, str) or not re.fullmatch(CC_PATTERN, name):
        raise BpfCcError(f"congestion control {name!r}: not a valid name ({CC_PATTERN})")
    if name not in SUPPORTED:
        raise BpfCcError(f"congestion control {name!r}: no BPF port here "
                         f"(have: {', '.join(SUPPORTED)})")
    return name


def _names(names: list[str] | tuple[str, ...] | None) -> list[str]:
    if not names:
        return list(SUPPORTED)
    out: list[str] = []
    for n in names:
        check_name(n)
        if n not in out:
            out.append(n)
    return out


def map_name(name: str) -> str:
    """Name of our struct_ops map for ``name`` (<= 15 chars, the kernel's object-name limit)."""
    return f"{MAP_PREFIX}{check_name(name)}"


def _tool(binary: str, package: str) -> str:
    path = shutil.which(binary) or next(
        (str(p) for p in (Path("/usr/sbin") / binary, Path("/sbin") / binary) if p.exists()),
        None)
    if path is None:
        raise CapabilityError(f"tool {binary!r}: not installed (Debian package {package})")
    return path


def _run(argv: list[str], timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(  # noqa: S603 - argv list from validated names, no shell
            argv, capture_output=True, text=True, timeout=timeout, check=False)
    except FileNotFoundError as exc:
        raise CapabilityError(f"tool {argv[0]!r}: not installed ({exc.strerror})") from None
    except subprocess.TimeoutExpired:
        raise BpfCcError(f"{' '.join(argv)}: timed out after {timeout:g} s") from None


def _tail(text: str, lines: int = 12) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def _require_btf() -> None:
    if not BTF_VMLINUX.exists():
        raise CapabilityError(f"kernel BTF: {BTF_VMLINUX} missing (kernel built without "
                              "CONFIG_DEBUG_INFO_BTF): BPF congestion controls cannot be built")


def cache_dir() -> Path:
    """Where compiled objects live: $MPCOA_BPF_CC_CACHE, /var/lib/mpcoa/bpf_cc (root), or
    $XDG_CACHE_HOME/mpcoa/bpf_cc."""
    env = environment.get("bpf_cc_cache")
    if env:
        return Path(env)
    if os.geteuid() == 0:
        return DEFAULT_SYSTEM_CACHE
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "mpcoa" / "bpf_cc"


def _atomic_write(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


# --------------------------------------------------------------------------- kernel state


def available() -> list[str]:
    """The kernel's congestion controls (host-wide; namespaces see the same list)."""
    try:
        return AVAILABLE_SYSCTL.read_text().split()
    except OSError as exc:
        raise CapabilityError(f"{AVAILABLE_SYSCTL}: unreadable ({exc.strerror})") from None


def registered() -> list[dict[str, Any]]:
    """All struct_ops maps registered on this host (``bpftool -j struct_ops show``)."""
    bpftool = _tool("bpftool", "bpftool")
    cp = _run([bpftool, "-j", "struct_ops", "show"])
    if cp.returncode != 0:
        raise BpfCcError(f"bpftool struct_ops show failed ({cp.returncode}): {_tail(cp.stderr)}")
    text = cp.stdout.strip()
    if not text:
        return []
    return [r for r in _json_objects(text) if isinstance(r, dict)]


def _json_objects(text: str) -> list[Any]:
    """bpftool -j output: one JSON value, or (struct_ops dump) objects joined by commas."""
    text = text.strip()
    if not text:
        return []
    for candidate in (text, f"[{text}]"):
        try:
            v = json.loads(candidate)
        except json.JSONDecodeError:
            continue
        return v if isinstance(v, list) else [v]
    raise BpfCcError(f"bpftool: output is not JSON: {text[:200]!r}")


def map_state(map_id: int) -> str | None:
    """A struct_ops map's state: "inuse" (registered), "tobefree" (unregistered, kept alive
    until the last socket using it closes), "ready", or None when the map is gone."""
    bpftool = _tool("bpftool", "bpftool")
    cp = _run([bpftool, "-j", "struct_ops", "dump", "id", str(int(map_id))])
    if cp.returncode != 0:
        return None
    for obj in _json_objects(cp.stdout):
        for key, val in obj.items() if isinstance(obj, dict) else ():
            if key.startswith("bpf_struct_ops_") and isinstance(val, dict):
                st = str(val.get("common", {}).get("state", ""))
                return st.removeprefix("BPF_STRUCT_OPS_STATE_").lower() or None
    return None


def ours(*, retiring: bool = False) -> dict[str, list[int]]:
    """Our registered congestion controls: cc name -> ids of the struct_ops maps named
    ``mpcoa_<cc>`` that are registered (state "inuse"); ``retiring=True`` lists instead those
    already unregistered but still held by open sockets (state "tobefree")."""
    want = "tobefree" if retiring else "inuse"
    out: dict[str, list[int]] = {}
    for r in registered():
        if r.get("kernel_struct_ops") != "tcp_congestion_ops":
            continue
        mname = str(r.get("name", ""))
        for cc in SUPPORTED:
            if mname == map_name(cc) and map_state(int(r["id"])) == want:
                out.setdefault(cc, []).append(int(r["id"]))
    return out


# --------------------------------------------------------------------------- build


def _vmlinux_header(out_dir: Path) -> Path:
    """vmlinux.h for the running kernel, regenerated when the kernel's BTF changes."""
    _require_btf()
    bpftool = _tool("bpftool", "bpftool")
    btf_hash = hashlib.sha256(BTF_VMLINUX.read_bytes()).hexdigest()[:16]
    inc = out_dir / f"include-{btf_hash}"
    header = inc / "vmlinux.h"
    if header.exists():
        return header
    inc.mkdir(parents=True, exist_ok=True)
    cp = _run([bpftool, "btf", "dump", "file", str(BTF_VMLINUX), "format", "c"])
    if cp.returncode != 0 or "struct tcp_congestion_ops" not in cp.stdout:
        raise BpfCcError(f"bpftool btf dump of {BTF_VMLINUX} failed ({cp.returncode}): "
                         f"{_tail(cp.stderr)}")
    _atomic_write(header, cp.stdout.encode())
    return header


def build(names: list[str] | tuple[str, ...] | None = None,
          out_dir: Path | str | None = None) -> dict[str, Path]:
    """Compile the BPF objects for ``names`` (default: all); returns name -> object path.

    Objects are cached in ``out_dir`` (default ``cache_dir()``, ours and writable by nobody
    else) under a name that hashes the source, our header, the kernel's BTF and the compiler
    version, so they are rebuilt exactly when one of those changes; each with the SHA-256 it had
    when built (``probes.bpf.cache``): one that changed since is rebuilt."""
    todo = _names(names)
    clang = _tool("clang", "clang")
    if not LIBBPF_HEADER.exists():
        raise CapabilityError(f"libbpf headers: {LIBBPF_HEADER} missing (Debian package "
                              "libbpf-dev)")
    out = Path(out_dir) if out_dir is not None else cache_dir()
    try:
        out.mkdir(mode=0o700, parents=True, exist_ok=True)
        bpf_cache.check_private(out)
    except OSError as exc:
        raise BpfCcError(f"cache directory {out}: {exc.strerror}") from None
    except bpf_cache.CacheError as exc:
        raise BpfCcError(str(exc)) from None
    header = _vmlinux_header(out)
    ver = _run([clang, "--version"]).stdout.splitlines()[:1]
    built: dict[str, Path] = {}
    for name in todo:
        src = SOURCE_DIR / f"bpf_{name}.c"
        if not src.exists():
            raise BpfCcError(f"congestion control {name!r}: source {src} missing")
        h = hashlib.sha256()
        headers = [p.read_bytes() for p in sorted(SOURCE_DIR.glob("*.h"))]
        for part in (src.read_bytes(), HEADER.read_bytes(), *headers, header.parent.name.encode(),
                     "\n".join(ver).encode(), " ".join(CFLAGS).encode()):
            h.update(part)
            h.update(b"\0")
        obj = out / f"bpf_{name}-{h.hexdigest()[:16]}.o"
        recorded = bpf_cache.digest_path(obj).exists()
        if not bpf_cache.is_intact(obj):
            if obj.exists() and recorded:
                log.warning("cached BPF object %s changed since it was built: rebuilding", obj)
            # built aside and renamed over: a concurrent loader reads the old or the new file
            tmp = out / f".{obj.name}.{os.getpid()}.tmp"
            argv = [clang, *CFLAGS,
                    "-I", str(header.parent), "-I", str(SOURCE_DIR),
                    "-c", str(src), "-o", str(tmp)]
            cp = _run(argv, timeout=180)
            if cp.returncode != 0:
                tmp.unlink(missing_ok=True)
                raise BpfCcError(f"clang failed for {src.name} ({cp.returncode}):\n"
                                 f"{_tail(cp.stderr, 20)}")
            os.replace(tmp, obj)
            bpf_cache.record(obj)
        built[name] = obj
    return built


# --------------------------------------------------------------------------- load / unload


def load(names: list[str] | tuple[str, ...] | None = None,
         out_dir: Path | str | None = None) -> dict[str, int]:
    """Make ``names`` (default: all) available host-wide; idempotent.

    A congestion control the kernel already lists (built in, or registered earlier by us or
    anyone else) is left alone. Returns cc name -> struct_ops map id of what THIS call
    registered, so a caller can later unload exactly that (``unload(map_ids=...)``)."""
    todo = [n for n in _names(names) if n not in available()]
    if not todo:
        return {}
    bpftool = _tool("bpftool", "bpftool")
    objs = build(todo, out_dir)
    loaded: dict[str, int] = {}
    try:
        _register(bpftool, todo, objs, loaded)
    except BaseException:
        if loaded:  # leave nothing half-done behind: these registrations are host-wide
            unload(list(loaded), map_ids=loaded)
        raise
    return loaded


def _register(bpftool: str, todo: list[str], objs: dict[str, Path],
              loaded: dict[str, int]) -> None:
    for name in todo:
        if name in available():  # registered meanwhile by someone else
            continue
        before = set(ours().get(name, []))
        try:
            with bpf_cache.private_copy(objs[name]) as checked:
                cp = _run([bpftool, "struct_ops", "register", str(checked)])
        except bpf_cache.CacheError as exc:
            raise BpfCcError(f"{exc}: not registered (`mpcoa testbed cc load` rebuilds it)"
                             ) from None
        text = cp.stdout + cp.stderr
        ids = [int(i) for m, i in _REGISTERED_RE.findall(text) if m == map_name(name)]
        if cp.returncode != 0 or not ids:
            new = set(ours().get(name, [])) - before
            if name in available() and not new:  # lost a race against another loader
                continue
            raise BpfCcError(f"bpftool struct_ops register {objs[name].name} failed "
                             f"({cp.returncode}): {_tail(text, 25)}")
        loaded[name] = ids[0]
        if name not in available():
            raise BpfCcError(f"congestion control {name!r}: registered (map id {ids[0]}) but "
                             f"not in {AVAILABLE_SYSCTL}")


def unload(names: list[str] | tuple[str, ...] | None = None, *,
           map_ids: list[int] | tuple[int, ...] | dict[str, int] | None = None) -> list[str]:
    """Unregister OUR struct_ops maps (named ``mpcoa_<cc>``) for ``names`` (default: all).

    ``map_ids`` (e.g. what ``load`` returned) narrows this to exactly those registrations.
    A congestion control registered by anything else is never touched. Returns the names
    unregistered."""
    todo = _names(names)
    keep_only = None
    if map_ids is not None:
        keep_only = {int(i) for i in (map_ids.values() if isinstance(map_ids, dict) else map_ids)}
    bpftool = _tool("bpftool", "bpftool")
    done: list[str] = []
    for name, ids in ours().items():
        if name not in todo:
            continue
        for map_id in ids:
            if keep_only is not None and map_id not in keep_only:
                continue
            cp = _run([bpftool, "struct_ops", "unregister", "id", str(map_id)])
            if cp.returncode != 0:
                still = set(ours().get(name, []))
                if map_id in still:
                    raise BpfCcError(f"bpftool struct_ops unregister id {map_id} "
                                     f"({map_name(name)}) failed ({cp.returncode}): "
                                     f"{_tail(cp.stdout + cp.stderr)}")
                continue  # already gone (someone else unloaded it meanwhile)
            if name not in done:
                done.append(name)
    return done


def status() -> list[dict[str, Any]]:
    """Per supported congestion control: available in the kernel? registered by us (map ids)?"""
    avail = set(available())
    try:
        mine, retiring = ours(), ours(retiring=True)
        err = None
    except (CapabilityError, BpfCcError) as exc:
        mine, retiring, err = {}, {}, str(exc)
    rows = []
    for name in SUPPORTED:
        ids = mine.get(name, [])
        rows.append({
            "name": name,
            "available": name in avail,
            "ours": bool(ids),
            "map_ids": ids,
            "retiring_map_ids": retiring.get(name, []),
            "source": str(SOURCE_DIR / f"bpf_{name}.c"),
            **({"error": err} if err else {}),
        })
    return rows

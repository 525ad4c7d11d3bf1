"""The cache of compiled BPF objects: an object is registered host-wide in the kernel, so what
is registered must be exactly what was compiled here.

Each object's SHA-256 is recorded beside it (``<object>.sha256``) when it is built; the bytes
are hashed again before use and registered from a private copy of the very bytes that were
checked (so a file swapped between the check and ``bpftool`` is not what gets registered). The
cache directory must be ours and writable by nobody else.
"""

from __future__ import annotations

import hashlib
import os
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


class CacheError(Exception):
    """The cache or one of its objects is not what this host built."""


def digest_path(obj: Path) -> Path:
    return obj.with_name(obj.name + ".sha256")


def check_private(directory: Path) -> None:
    """The cache belongs to this user and nobody else can write into it."""
    st = directory.stat()
    if st.st_uid != os.geteuid() or st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise CacheError(f"cache directory {directory}: must be owned by uid {os.geteuid()} and "
                         f"writable by nobody else (owner {st.st_uid}, mode "
                         f"{stat.S_IMODE(st.st_mode):o})")


def record(obj: Path) -> str:
    """Record the object's SHA-256 as built (written aside, renamed)."""
    value = hashlib.sha256(obj.read_bytes()).hexdigest()
    tmp = digest_path(obj).with_name(f".{obj.name}.sha256.{os.getpid()}.tmp")
    tmp.write_text(value + "\n")
    os.replace(tmp, digest_path(obj))
    return value


def verified_bytes(obj: Path) -> bytes:
    """The object's bytes, when they are the ones recorded at build time."""
    try:
        data = obj.read_bytes()
        recorded = digest_path(obj).read_text().strip()
    except FileNotFoundError as exc:
        raise CacheError(f"cached object {obj.name}: {exc.filename} missing") from None
    actual = hashlib.sha256(data).hexdigest()
    if actual != recorded:
        raise CacheError(f"cached object {obj.name}: its SHA-256 {actual[:16]}... is not the "
                         f"{recorded[:16]}... recorded when it was built")
    return data


def is_intact(obj: Path) -> bool:
    try:
        verified_bytes(obj)
    except CacheError:
        return False
    return True


@contextmanager
def private_copy(obj: Path) -> Iterator[Path]:
    """A copy of the checked bytes in a directory only this process's user can read or write,
    removed afterwards: the path to hand to the loader."""
    data = verified_bytes(obj)
    with tempfile.TemporaryDirectory(prefix="mpcoa-bpf-") as tmp:  # mode 0700
        path = Path(tmp) / obj.name
        path.write_bytes(data)
        yield path

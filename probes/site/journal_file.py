"""A small JSON record kept in two preallocated slot files, overwritten in place.

An undo must still be recordable when the filesystem under the state directory is full (`/run`
is a small tmpfs). Replacing a file by a new one needs free blocks; overwriting blocks a file
already owns does not. So the record lives in two slots (`journal.0`, `journal.1`) allocated
once, before anything changes: every update overwrites the slot *not* holding the newest valid
record, whole and checksummed, then fsyncs it. A crash mid-write leaves that slot invalid and
the other one (the previous record) valid: a reader takes the valid slot with the higher
sequence number.

`reserve(need)` grows both slots (ENOSPC then, before any change, is an ordinary refusal);
`write` never allocates.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
from pathlib import Path
from typing import Any

MAGIC = b"MPCOAJ2"
HEADER_BYTES = 96  # MAGIC seq length sha256-hex, space separated, padded
MIN_SLOT_BYTES = 64 * 1024
SLOTS = ("journal.0", "journal.1")


class JournalSpaceError(OSError):
    """The slots cannot hold a record (too big for what was reserved, or no room to reserve)."""


def _parse(blob: bytes) -> tuple[int, dict[str, Any]] | None:
    head = blob[:HEADER_BYTES].rstrip(b"\0 \n").split()
    if len(head) != 4 or head[0] != MAGIC:
        return None
    try:
        seq, length = int(head[1]), int(head[2])
    except ValueError:
        return None
    body = blob[HEADER_BYTES:HEADER_BYTES + length]
    if len(body) != length or hashlib.sha256(body).hexdigest().encode() != head[3]:
        return None  # torn or never written
    try:
        return seq, json.loads(body)
    except ValueError:
        return None


def _slots(directory: Path) -> list[tuple[int, int, dict[str, Any]]]:
    """(sequence, slot index, record) of every valid slot."""
    found = []
    for i, name in enumerate(SLOTS):
        try:
            parsed = _parse((directory / name).read_bytes())
        except OSError:
            continue
        if parsed is not None:
            found.append((parsed[0], i, parsed[1]))
    return found


def read(directory: Path) -> dict[str, Any] | None:
    """The newest valid record, or None."""
    found = _slots(directory)
    return max(found, key=lambda f: f[0])[2] if found else None


def capacity(directory: Path) -> int:
    """The largest record body both slots can hold now (0 when they do not exist)."""
    sizes = []
    for name in SLOTS:
        try:
            sizes.append((directory / name).stat().st_size)
        except OSError:
            return 0
    return max(0, min(sizes) - HEADER_BYTES)


def reserve(directory: Path, need: int) -> None:
    """Both slots hold at least `need` bytes of record, allocated now (rounded up to 4 KiB,
    at least MIN_SLOT_BYTES). Raises JournalSpaceError when the filesystem has no room."""
    size = max(MIN_SLOT_BYTES, -(-(need + HEADER_BYTES) // 4096) * 4096)
    directory.mkdir(parents=True, exist_ok=True)
    for name in SLOTS:
        fd = os.open(directory / name, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            if os.fstat(fd).st_size >= size:
                continue
            try:
                os.posix_fallocate(fd, 0, size)
            except OSError as exc:
                if exc.errno == errno.ENOSPC:
                    raise JournalSpaceError(
                        errno.ENOSPC, f"no room for the journal ({size} bytes per slot)",
                        str(directory / name)) from None
                if exc.errno not in (errno.EOPNOTSUPP, errno.EINVAL):
                    raise
                _fill_zeros(fd, size)
            os.fsync(fd)
        finally:
            os.close(fd)
    _fsync_dir(directory)


def _fill_zeros(fd: int, size: int) -> None:
    """Allocate by writing (a filesystem without fallocate)."""
    have = os.fstat(fd).st_size
    chunk = b"\0" * 65536
    while have < size:
        have += os.pwrite(fd, chunk[:min(len(chunk), size - have)], have)


def write(directory: Path, record: dict[str, Any]) -> None:
    """Overwrite the older slot with `record`; allocates nothing (see `reserve`)."""
    body = json.dumps(record, separators=(",", ":")).encode()
    if len(body) > capacity(directory):
        raise JournalSpaceError(errno.ENOSPC, f"journal record of {len(body)} bytes exceeds "
                                f"the {capacity(directory)} reserved", str(directory))
    found = _slots(directory)
    newest = max(found, key=lambda f: f[0]) if found else (0, 1, None)
    seq, slot = newest[0] + 1, 1 - newest[1]
    head = b" ".join([MAGIC, str(seq).encode(), str(len(body)).encode(),
                      hashlib.sha256(body).hexdigest().encode()])
    fd = os.open(directory / SLOTS[slot], os.O_WRONLY)
    try:
        os.pwrite(fd, head.ljust(HEADER_BYTES, b" ") + body, 0)
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)

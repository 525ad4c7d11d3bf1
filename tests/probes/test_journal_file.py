"""The applier's journal record: two preallocated slots overwritten in place, the newest valid
one read; a torn write falls back on the record before it; nothing is allocated by a write."""

from __future__ import annotations

import errno
import os

import pytest

from probes.site import journal_file as jf


def test_the_newest_valid_record_wins_and_a_torn_one_falls_back(tmp_path):
    assert jf.read(tmp_path) is None and jf.capacity(tmp_path) == 0
    jf.reserve(tmp_path, 1000)
    sizes = {name: (tmp_path / name).stat().st_size for name in jf.SLOTS}
    for n in range(1, 5):
        jf.write(tmp_path, {"n": n})
        assert jf.read(tmp_path) == {"n": n}
    # no write grew a slot: every update is an overwrite of blocks allocated up front
    assert {name: (tmp_path / name).stat().st_size for name in jf.SLOTS} == sizes
    # the slot holding record 4 is torn mid-write: record 3 is read
    newest = max(jf.SLOTS, key=lambda name: (tmp_path / name).read_bytes()[:40])
    fd = os.open(tmp_path / newest, os.O_WRONLY)
    try:
        os.pwrite(fd, b"\0" * 8, jf.HEADER_BYTES)
    finally:
        os.close(fd)
    assert jf.read(tmp_path) == {"n": 3}
    jf.write(tmp_path, {"n": 5})  # overwrites the torn slot, not record 3's
    assert jf.read(tmp_path) == {"n": 5}


def test_a_record_larger_than_reserved_is_refused_not_allocated(tmp_path):
    jf.reserve(tmp_path, 100)
    with pytest.raises(jf.JournalSpaceError) as exc:
        jf.write(tmp_path, {"blob": "x" * (jf.capacity(tmp_path) + 1)})
    assert exc.value.errno == errno.ENOSPC
    assert jf.read(tmp_path) is None

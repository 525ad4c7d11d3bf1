"""The BPF object cache: an object's bytes are registered only when they are the ones built."""

from __future__ import annotations

import pytest

from probes.bpf import cache as bpf_cache


def test_a_recorded_object_reads_back_and_a_changed_one_is_refused(tmp_path):
    obj = tmp_path / "bpf_vegas-0123.o"
    obj.write_bytes(b"\x7fELF built here")
    bpf_cache.record(obj)
    assert bpf_cache.verified_bytes(obj) == b"\x7fELF built here"
    with bpf_cache.private_copy(obj) as copy:
        assert copy.read_bytes() == obj.read_bytes() and copy.parent != tmp_path
        assert copy.parent.stat().st_mode & 0o077 == 0
    assert not copy.exists()
    obj.write_bytes(b"\x7fELF swapped in")  # same name, other content
    assert not bpf_cache.is_intact(obj)
    with (pytest.raises(bpf_cache.CacheError, match=r"not the .* recorded when it was built"),
          bpf_cache.private_copy(obj)):
        pass


def test_an_object_without_a_record_is_not_trusted(tmp_path):
    obj = tmp_path / "bpf_hybla-0123.o"
    obj.write_bytes(b"\x7fELF from somewhere")
    with pytest.raises(bpf_cache.CacheError, match="missing"):
        bpf_cache.verified_bytes(obj)
    assert not bpf_cache.is_intact(tmp_path / "absent.o")


def test_a_cache_others_can_write_is_refused(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    bpf_cache.check_private(cache)
    cache.chmod(0o777)
    with pytest.raises(bpf_cache.CacheError, match="writable by nobody else"):
        bpf_cache.check_private(cache)

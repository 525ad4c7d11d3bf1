"""The campaign bundle's container: one gzip-compressed tar file (docs/formats.md).

    bundle.json                 the document: version, metadata, every row (FORMAT, VERSION)
    measurements.csv            one row per probe (flows.takeaways.measurement_table), for a
                                spreadsheet
    measurements.parquet        the same, typed, for pandas / pyarrow
    artifacts/<m>/<name>        the raw outputs of the measurement at index <m> of bundle.json

Reading never extracts anything to disk: members are read into memory, regular files only, each
name checked against the layout above and against what bundle.json lists, no name twice, each
member's size checked from its header against what a campaign can hold (`bundle_limits`) before
it is read; the JSON refuses NaN and Infinity and is read into its version's schema
(`bundle_schema`). A bad file is an `Invalid` naming what is wrong, never a traceback.
"""

from __future__ import annotations

import io
import json
import re
import tarfile
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, BinaryIO

from pydantic import BaseModel

from probes.base import ARTIFACT_NAME_PATTERN

from ...errors import Invalid
from . import bundle_limits as limits
from . import bundle_schema as schema

FORMAT = schema.FORMAT
VERSION = 2  # the version this mpcoa writes (it reads 1 too: `bundle_schema.SCHEMAS`)
DOCUMENT = "bundle.json"
TABLES = ("measurements.csv", "measurements.parquet")
MAX_TOTAL_BYTES = limits.MAX_TOTAL_BYTES
_ARTIFACT = re.compile(r"artifacts/(\d{1,9})/(" + ARTIFACT_NAME_PATTERN.strip("^$") + ")")


@dataclass
class Bundle:
    document: dict[str, Any]
    artifacts: dict[int, dict[str, bytes]] = field(default_factory=dict)  # index -> name -> data
    tables: dict[str, bytes] = field(default_factory=dict)
    checked: BaseModel | None = None  # the document read into its version's schema (on read)


def write(bundle: Bundle) -> bytes:
    """The bundle as .tar.gz bytes (members in a fixed order, mtime 0: the same rows give the
    same file apart from gzip's header)."""
    buf = io.BytesIO()
    write_to(buf, bundle.document, bundle.tables,
             ((index, name, data) for index in sorted(bundle.artifacts)
              for name, data in sorted(bundle.artifacts[index].items())))
    return buf.getvalue()


def write_to(fileobj: BinaryIO, document: dict[str, Any], tables: dict[str, bytes],
             artifacts: Iterable[tuple[int, str, bytes]]) -> None:
    """Write the bundle into `fileobj` as `write` does, the artifacts taken one at a time from
    `artifacts` ((index, name, content), in order): only one raw output is held at once."""
    with tarfile.open(fileobj=fileobj, mode="w:gz", format=tarfile.PAX_FORMAT) as tar:
        _add(tar, DOCUMENT, json.dumps(document, indent=1, allow_nan=False).encode())
        for name in TABLES:
            if name in tables:
                _add(tar, name, tables[name])
        for index, name, data in artifacts:
            _add(tar, f"artifacts/{index}/{name}", data)


def _add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = 0o644
    tar.addfile(info, io.BytesIO(data))


class _Header(tarfile.TarInfo):
    """A member's header, whose extended headers (long names, pax records) tarfile reads whole
    before a reader sees the member: at most MAX_EXTENDED_HEADER bytes."""

    def _proc_member(self, tar):
        if self.type in _EXTENDED and self.size > MAX_EXTENDED_HEADER:
            raise tarfile.HeaderError(f"an extended header of {self.size} bytes")
        return super()._proc_member(tar)


_EXTENDED = (tarfile.XHDTYPE, tarfile.XGLTYPE, tarfile.SOLARIS_XHDTYPE,
             tarfile.GNUTYPE_LONGNAME, tarfile.GNUTYPE_LONGLINK)
MAX_EXTENDED_HEADER = 64 * 1024  # a pax record of a name of at most 200 characters is tiny


def read(data: bytes) -> Bundle:
    """A bundle from .tar.gz bytes; Invalid when it is not one this version can read.

    bundle.json comes first (as `write` puts it): the members after it are the ones it lists,
    each checked by its header's size before it is read, so a bomb costs no memory."""
    bundle = Bundle(document={})
    total = 0
    expected: set[str] = set()
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz", tarinfo=_Header) as tar:
            for n, member in enumerate(tar):
                name = member.name[:200]
                if not member.isfile():
                    raise Invalid(f"{name!r}: not a regular file", ("bundle",))
                if not _known(member.name):
                    raise Invalid(f"{name!r}: not a member of a campaign bundle", ("bundle",))
                if n == 0 and member.name != DOCUMENT:
                    raise Invalid(f"{name!r}: the first member must be {DOCUMENT}", ("bundle",))
                if n > 0 and member.name not in expected:
                    raise Invalid(f"{name!r}: a second copy, or a raw output {DOCUMENT} does "
                                  "not list", ("bundle",))
                expected.discard(member.name)
                cap = _cap(member.name, len(data))
                if member.size > cap:
                    raise Invalid(f"{name!r}: {member.size} bytes unpacked, over {cap}",
                                  ("bundle",))
                total += member.size
                if total > MAX_TOTAL_BYTES:
                    raise Invalid(f"larger than {MAX_TOTAL_BYTES} bytes unpacked", ("bundle",))
                _place(bundle, member.name, tar.extractfile(member).read())  # member.size bytes
                if n == 0:
                    expected = {*TABLES, *_listed(bundle.checked)}
    except (tarfile.TarError, OSError, EOFError, zlib.error) as exc:
        raise Invalid(f"not a readable gzip-compressed tar file ({str(exc)[:200]})",
                      ("bundle",)) from None
    if not bundle.document:
        raise Invalid(f"no {DOCUMENT}", ("bundle",))
    missing = sorted(expected - set(TABLES))
    if missing:
        raise Invalid(f"{missing[0]!r}: listed in {DOCUMENT}, not in the archive"
                      + (f" ({len(missing) - 1} more)" if len(missing) > 1 else ""), ("bundle",))
    return bundle


def _known(name: str) -> bool:
    return name == DOCUMENT or name in TABLES or _ARTIFACT.fullmatch(name) is not None


def _listed(checked) -> set[str]:
    """The raw outputs the document lists, as archive paths."""
    return {f"artifacts/{k}/{a.name}" for k, m in enumerate(checked.measurements)
            for a in m.artifacts}


def _cap(name: str, packed: int) -> int:
    """The most a member may unpack to (bundle_limits): the document also at most
    DOCUMENT_RATIO times the file it came in."""
    if name == DOCUMENT:
        return min(limits.MAX_DOCUMENT_BYTES, limits.DOCUMENT_RATIO * packed)
    if name in TABLES:
        return limits.MAX_TABLE_BYTES
    return limits.MAX_ARTIFACT_MEMBER_BYTES


def _place(bundle: Bundle, name: str, content: bytes) -> None:
    if name == DOCUMENT:
        bundle.document = parse_document(content)
        bundle.checked = schema.validate_document(bundle.document)
    elif name in TABLES:
        bundle.tables[name] = content
    elif m := _ARTIFACT.fullmatch(name):
        bundle.artifacts.setdefault(int(m.group(1)), {})[m.group(2)] = content


def parse_document(content: bytes) -> dict[str, Any]:
    """bundle.json as plain JSON values, its format and version checked before anything else
    is read (`bundle_schema.validate_document` checks the rest)."""
    return schema.check_version(schema.parse_json(content, DOCUMENT))

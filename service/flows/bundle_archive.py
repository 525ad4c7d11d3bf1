"""The campaign bundle's container: one gzip-compressed tar file (docs/formats.md).

    bundle.json                 the document: version, metadata, every row (FORMAT, VERSION)
    measurements.csv            one row per probe (flows.measurement_table), for a spreadsheet
    measurements.parquet        the same, typed, for pandas / pyarrow
    artifacts/<m>/<name>        the raw outputs of the measurement at index <m> of bundle.json

Reading never extracts anything to disk: members are read into memory, regular files only, each
name checked against the layout above, with caps on their number and size; the JSON refuses
NaN and Infinity. A bad file is an `Invalid` naming what is wrong, never a traceback.
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

from probes.base import ARTIFACT_NAME_PATTERN

from ..errors import Invalid

FORMAT = "mpcoa-campaign-bundle"
VERSION = 1
DOCUMENT = "bundle.json"
TABLES = ("measurements.csv", "measurements.parquet")
MAX_MEMBERS = 100_000
MAX_TOTAL_BYTES = 2 * 1024**3  # what a reader holds in memory at most
_ARTIFACT = re.compile(r"artifacts/(\d{1,9})/(" + ARTIFACT_NAME_PATTERN.strip("^$") + ")")


@dataclass
class Bundle:
    document: dict[str, Any]
    artifacts: dict[int, dict[str, bytes]] = field(default_factory=dict)  # index -> name -> data
    tables: dict[str, bytes] = field(default_factory=dict)


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


def read(data: bytes) -> Bundle:
    """A bundle from .tar.gz bytes; Invalid when it is not one this version can read."""
    bundle = Bundle(document={})
    total = 0
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
            for n, member in enumerate(tar):
                if n >= MAX_MEMBERS:
                    raise Invalid(f"more than {MAX_MEMBERS} members", ("bundle",))
                if not member.isfile():
                    raise Invalid(f"{member.name!r}: not a regular file", ("bundle",))
                total += member.size
                if total > MAX_TOTAL_BYTES:
                    raise Invalid(f"larger than {MAX_TOTAL_BYTES} bytes unpacked", ("bundle",))
                _place(bundle, member.name, tar.extractfile(member).read())
    except (tarfile.TarError, OSError, EOFError, zlib.error) as exc:
        raise Invalid(f"not a readable gzip-compressed tar file ({exc})", ("bundle",)) from None
    if not bundle.document:
        raise Invalid(f"no {DOCUMENT}", ("bundle",))
    return bundle


def _place(bundle: Bundle, name: str, content: bytes) -> None:
    if name == DOCUMENT:
        bundle.document = parse_document(content)
    elif name in TABLES:
        bundle.tables[name] = content
    elif m := _ARTIFACT.fullmatch(name):
        bundle.artifacts.setdefault(int(m.group(1)), {})[m.group(2)] = content
    else:
        raise Invalid(f"{name!r}: not a member of a campaign bundle", ("bundle",))


def _no_constant(name: str):
    raise ValueError(f"{name} is not a finite number")


def parse_document(content: bytes) -> dict[str, Any]:
    """bundle.json, checked for its format and version before anything else is read."""
    try:
        doc = json.loads(content.decode("utf-8"), parse_constant=_no_constant)
    except (UnicodeDecodeError, ValueError) as exc:
        raise Invalid(f"{DOCUMENT} is not JSON: {exc}", ("bundle",)) from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise Invalid(f"{DOCUMENT}: format must be {FORMAT!r}", ("format",))
    if doc.get("version") != VERSION:
        raise Invalid(f"version {doc.get('version')!r}: this mpcoa reads version {VERSION}",
                      ("version",))
    return doc

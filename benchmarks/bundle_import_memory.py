"""What importing a hostile bundle costs in memory: a real bundle, and the same bundle with one
measurement's goodput series padded with zeros until the file is about 58 kB (gzip packs the
zeros a thousand to one, so the document unpacks to megabytes).

    .venv/bin/python benchmarks/bundle_import_memory.py [--bundle FILE] [--target-kb 58]

Without --bundle, a real one is made first: the SRL-HU campaign of the API tests recorded through
the service's own pipeline into a SQLite file, and exported. Each import runs as `mpcoa import`
does (one transaction, into a fresh SQLite file); the figure is tracemalloc's peak during it,
and the outcome (imported, or the one-line reason it was refused).
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import tarfile
import tempfile
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from service.db import make_engine, session_scope, upgrade
from service.errors import ServiceError


def real_bundle(folder: Path) -> bytes:
    from service.flows.takeaways.bundle_export import export_bundle
    from tests.api.test_bundle import finished_campaign

    url = f"sqlite:///{folder / 'source.sqlite3'}"
    upgrade(url)
    engine = make_engine(url)
    with session_scope(engine) as s:
        campaign = finished_campaign(s)
        data = export_bundle(s, campaign_id=campaign.id)
    engine.dispose()
    return data


def members(data: bytes) -> list[tuple[str, bytes]]:
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        return [(m.name, tar.extractfile(m).read()) for m in tar if m.isfile()]


def packed(items: list[tuple[str, bytes]]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, content in items:
            info = tarfile.TarInfo(name)
            info.size = len(content)
            tar.addfile(info, io.BytesIO(content))
    return buf.getvalue()


def padded(data: bytes, fits) -> bytes:
    """The bundle with measurement 0's series padded with the most zeros for which
    `fits(file_bytes, document_bytes)` holds."""
    items = members(data)
    doc = json.loads(dict(items)["bundle.json"])
    rest = [(n, c) for n, c in items if n != "bundle.json"]

    def make(zeros: int) -> tuple[bytes, int]:
        doc["measurements"][0]["goodput_mbps"] = [0] * zeros
        text = json.dumps(doc).encode()
        return packed([("bundle.json", text), *rest]), len(text)

    lo, hi = 0, 1000
    def ok(zeros: int) -> bool:
        out, text = make(zeros)
        return fits(len(out), text)

    while ok(hi) and hi < 10**9:
        lo, hi = hi, hi * 2
    for _ in range(12):
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if ok(mid) else (lo, mid)
    return make(lo)[0]


def measure(data: bytes, folder: Path, name: str) -> dict:
    from service.flows.takeaways.bundle_import import import_bundle

    url = f"sqlite:///{folder / (name + '.sqlite3')}"
    upgrade(url)
    engine = make_engine(url)
    tracemalloc.start()
    started = time.perf_counter()
    try:
        with session_scope(engine) as s:
            import_bundle(s, data)
        outcome = "imported"
    except ServiceError as exc:
        outcome = f"refused: {'.'.join(map(str, exc.loc))}: {exc.message}"[:160]
    elapsed = time.perf_counter() - started
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    engine.dispose()
    return {"bundle": name.replace("-", " "), "file_bytes": len(data),
            "unpacked_document_bytes": len(dict(members(data))["bundle.json"]),
            "peak_mib": round(peak / 2**20, 1), "seconds": round(elapsed, 2), "outcome": outcome}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bundle", type=Path, help="a bundle written by `mpcoa export`")
    parser.add_argument("--target-kb", type=float, default=58.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        data = args.bundle.read_bytes() if args.bundle else real_bundle(folder)
        cases = [("real", data),
                 (f"padded to {args.target_kb:g} kB",
                  padded(data, lambda size, _doc: size <= args.target_kb * 1024))]
        try:  # the largest padding a reader with a cap on unpacking per packed byte lets in
            from service.flows.takeaways.bundle_limits import DOCUMENT_RATIO
            cases.append(("padded to the ratio cap",
                          padded(data, lambda size, doc: doc <= DOCUMENT_RATIO * size)))
        except ImportError:
            pass
        measure(data, folder, "warm-up")  # modules a first import loads are not its cost
        for name, content in cases:
            print(json.dumps(measure(content, folder, name.replace(" ", "-"))), flush=True)

if __name__ == "__main__":
    main()

"""Malformed campaign bundles made from a real one: a seeded generator for the import fuzz test.

Each case is (kind, label, bytes, expect): expect "refused" (the file must be refused), "accepted"
(it must be imported) or "either" (a value changed somewhere: refused or imported, the checks
after an import decide). The kinds cover what a hostile or broken file can do: wrong types, out
of range numbers, NaN/Infinity, huge strings, deep nesting, bombs and over-size members, missing,
duplicate and foreign members, wrong versions, unstorable strings, bad timestamps, rows that
contradict each other, and tampered answers.
"""

from __future__ import annotations

import copy
import gzip
import io
import json
import random
import tarfile
from collections.abc import Iterator
from typing import Any

ODD_VALUES: list[Any] = ["x", {}, [], None, True, False, 0, -1, 1.5, [1, 2], {"a": 1}, "", "1",
                         ["x", {}]]
BIG_NUMBERS: list[Any] = [-1, -1e308, 1e308, 2**31, 2**63, -(2**63) - 1, 10**40, 1e-320,
                          -0.0, 1e12, 1e9, -1e-9, 2**53 + 1]
NON_FINITE = [float("nan"), float("inf"), float("-inf")]
BAD_VERSIONS: list[Any] = [0, 1, 3, "1", 1.0, True, None, -1, 10**30, [1], {"v": 1}]
BAD_TIMES: list[Any] = ["yesterday", "2026-01-01T00:00:00", "0001-01-01T00:00:00+14:00",
                        "9999-12-31T23:59:59-14:00", 12345, "", "2026-13-45T00:00:00+00:00"]


def tar(members: list[tuple[str, bytes]], kinds: dict[str, bytes] | None = None) -> bytes:
    """A .tar.gz of (name, data) in order; `kinds` makes a name a directory/symlink/fifo."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", compresslevel=1) as out:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            if kinds and name in kinds:
                info.type, info.size = kinds[name], 0
                if info.type == tarfile.SYMTYPE:
                    info.linkname = "/etc/passwd"
                out.addfile(info)
                continue
            out.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def claimed_size(name: str, size: int) -> bytes:
    """A member whose header claims `size` bytes but whose data is cut short: a reader that
    believes the header before reading is the only one that does not try to hold it."""
    info = tarfile.TarInfo(name)
    info.size = size
    return gzip.compress(info.tobuf(format=tarfile.PAX_FORMAT) + b"\0" * 4096)


class Mutator:
    def __init__(self, doc: dict, artifacts: dict[str, bytes], seed: int) -> None:
        self.doc = doc
        self.artifacts = artifacts  # archive path -> bytes
        self.rng = random.Random(seed)
        self.leaves = list(_leaves(doc))

    # --- building ------------------------------------------------------------------------------
    def bundle(self, doc: Any, *, nan: bool = False, extra: list | None = None,
               artifacts: dict[str, bytes] | None = None) -> bytes:
        text = json.dumps(doc, allow_nan=nan).encode()
        members = [("bundle.json", text), *sorted((artifacts if artifacts is not None
                                                   else self.artifacts).items())]
        return tar(members + (extra or []))

    def changed(self, path: tuple, value: Any) -> dict:
        """The document with one value replaced (only the containers on its path copied)."""
        doc = top = copy.copy(self.doc)
        for p in path[:-1]:
            doc[p] = copy.copy(doc[p])
            doc = doc[p]
        if path:
            doc[path[-1]] = value
        return top

    def leaf(self, typed_only: bool = True) -> tuple:
        while True:
            path, _value = self.rng.choice(self.leaves)
            if not typed_only or not _free_form(path):
                return path

    def numeric_leaf(self) -> tuple:
        while True:
            path, value = self.rng.choice(self.leaves)
            if isinstance(value, int | float) and not isinstance(value, bool) \
                    and not _free_form(path):
                return path

    def string_leaf(self, typed_only: bool = False) -> tuple:
        while True:
            path, value = self.rng.choice(self.leaves)
            if isinstance(value, str) and not (typed_only and _free_form(path)):
                return path

    # --- the cases -----------------------------------------------------------------------------
    def cases(self, per_kind: int) -> Iterator[tuple[str, str, bytes, str]]:
        rng = self.rng
        for k in range(per_kind):
            path = self.leaf(typed_only=k % 8 != 0)
            value = rng.choice(ODD_VALUES)
            yield "wrong_type", f"{_p(path)}={value!r}", self.bundle(
                self.changed(path, value)), "either"
            path = self.numeric_leaf()
            value = rng.choice(BIG_NUMBERS)
            yield "out_of_range", f"{_p(path)}={value!r}", self.bundle(
                self.changed(path, value)), "either"
            path = self.numeric_leaf() if k % 3 else self.leaf(typed_only=False)
            value = rng.choice(NON_FINITE)
            yield "non_finite", f"{_p(path)}={value!r}", self.bundle(
                self.changed(path, value), nan=True), "refused"
            path = self.string_leaf(typed_only=k % 4 != 0)
            n = rng.choice([300, 70_000, 1_000_000, 9 << 20])
            text = "A" * n if k % 2 else "".join(rng.choice("abcdefghij") for _ in range(n // 50))
            yield "huge_string", f"{_p(path)}=<{len(text)} chars>", self.bundle(
                self.changed(path, text)), "either"
            path = self.leaf(typed_only=False)
            depth = rng.choice([30, 200, 990, 5000, 100_000])
            text = json.dumps(self.changed(path, "@@")).replace(
                '"@@"', "[" * depth + "1" + "]" * depth)
            yield "deep_nesting", f"{_p(path)} {depth} deep", tar(
                [("bundle.json", text.encode()), *sorted(self.artifacts.items())]), "refused"
            yield from self._structural(k)
            yield from self._versions(k)
            path = self.string_leaf()
            bad = rng.choice(["\x00", "\ud800", "a\udfffb"])
            yield "unstorable_string", f"{_p(path)} holds {bad!r}", self.bundle(
                self.changed(path, bad)), "refused"
            path = rng.choice([p for p, _ in self.leaves if p[-1] in (
                "started_at", "finished_at", "created_at")])
            value = rng.choice(BAD_TIMES)
            yield "bad_timestamp", f"{_p(path)}={value!r}", self.bundle(
                self.changed(path, value)), "refused"
            yield from self._contradictions(k)
            if k % 3 == 0:
                yield from self._tampered(k // 3)

    def _structural(self, k: int) -> Iterator[tuple[str, str, bytes, str]]:
        doc = json.dumps(self.doc).encode()
        arts = sorted(self.artifacts.items())
        first = arts[0][0]

        def zeros() -> bytes:
            return json.dumps(self.changed(("measurements", k % 10, "goodput_mbps"),
                                           [0.0] * 3_000_000)).encode()

        cases = [  # (kind, label, how to make it): only the one picked is made
            ("bomb_member", "bundle.json with 3e6 zeros",
             lambda: tar([("bundle.json", zeros()), *arts])),
            ("bomb_member", "a raw output of 9 MiB of zeros",
             lambda: tar([("bundle.json", doc), (first, b"\0" * (9 << 20))])),
            ("bomb_member", "a header claiming 3 GiB",
             lambda: claimed_size("bundle.json", 3 << 30)),
            ("bomb_member", "a raw output claiming 3 GiB",
             lambda: _after_document(doc, first, 3 << 30)),
            ("bomb_member", "a pax header of 50 MiB", lambda: _pax_bomb(50 << 20)),
            ("bomb_member", "10000 unlisted members",
             lambda: tar([("bundle.json", doc), *arts,
                          *((f"artifacts/{n}/x.json", b"") for n in range(10_000))])),
            ("missing_member", "no bundle.json", lambda: tar(arts)),
            ("missing_member", "an empty archive", lambda: tar([])),
            ("missing_member", "a listed raw output left out",
             lambda: tar([("bundle.json", doc)])),
            ("missing_member", "bundle.json last", lambda: tar([*arts, ("bundle.json", doc)])),
            ("duplicate_member", "bundle.json twice",
             lambda: tar([("bundle.json", doc), ("bundle.json", doc), *arts])),
            ("duplicate_member", "a raw output twice",
             lambda: tar([("bundle.json", doc), *arts, *arts])),
            ("duplicate_member", "the CSV twice",
             lambda: tar([("bundle.json", doc), *arts, ("measurements.csv", b"a\n"),
                          ("measurements.csv", b"b\n")])),
            ("foreign_member", "../escape",
             lambda: tar([("bundle.json", doc), ("../escape", b"x")])),
            ("foreign_member", "/etc/cron.d/x",
             lambda: tar([("bundle.json", doc), ("/etc/cron.d/x", b"x")])),
            ("foreign_member", "a symlink",
             lambda: tar([("bundle.json", doc), *arts, ("artifacts/0/link.json", b"")],
                         {"artifacts/0/link.json": tarfile.SYMTYPE})),
            ("foreign_member", "a directory",
             lambda: tar([("artifacts", b""), ("bundle.json", doc)],
                         {"artifacts": tarfile.DIRTYPE})),
            ("corrupt", "cut short", lambda: self.bundle(self.doc)[: 2000 + 97 * k]),
            ("corrupt", "a flipped byte", lambda: _flip(self.bundle(self.doc), 100 + 211 * k)),
            ("corrupt", "not gzip", lambda: b"PK\x03\x04" + doc[:100]),
            ("corrupt", "bundle.json not UTF-8",
             lambda: tar([("bundle.json", doc[:50] + b"\xff\xfe" + doc[50:]), *arts])),
            ("corrupt", "bundle.json not JSON", lambda: tar([("bundle.json", doc[:-3]), *arts])),
        ]
        kind, label, make = cases[k % len(cases)]
        yield kind, label, make(), "refused"

    def _versions(self, k: int) -> Iterator[tuple[str, str, bytes, str]]:
        if k % 3:
            value = BAD_VERSIONS[k % len(BAD_VERSIONS)]
            yield "wrong_version", f"version={value!r}", self.bundle(
                {**self.doc, "version": value}), "refused"
        else:
            fmt = [None, "mpcoa", 1, "MPCOA-CAMPAIGN-BUNDLE"][k % 4]
            yield "wrong_version", f"format={fmt!r}", self.bundle(
                {**self.doc, "format": fmt}), "refused"
        if k % 2:
            doc = dict(self.doc)
            doc.pop(["version", "format", "campaign", "measurements", "topology"][k % 5])
            yield "missing_key", "a top-level key left out", self.bundle(doc), "refused"

    def _contradictions(self, k: int) -> Iterator[tuple[str, str, bytes, str]]:
        doc = copy.deepcopy(self.doc)
        m = doc["measurements"]
        which = k % 6
        if which == 0:
            m.append(copy.deepcopy(m[k % len(m)]))
            m[-1]["artifacts"] = []
            label = "a measurement twice"
        elif which == 1:
            m[k % len(m)]["subflows"] = ["Z-Q"]
            label = "a subflow the topology lacks"
        elif which == 2:
            doc["topology"]["subflows"] = doc["topology"]["subflows"][:-1]
            label = "a pair left out of the topology"
        elif which == 3:
            m[k % len(m)]["goodput_mbps"] = [1.0] * 500
            label = "more intervals than the probe has"
        elif which == 4:
            doc["answer"]["bs_min_mib"] = doc["answer"]["bs_max_mib"] * 2
            label = "answer bounds the wrong way round"
        else:
            m[k % len(m)]["surprise"] = 1
            label = "an unknown column"
        yield "contradiction", label, self.bundle(doc), "refused"

    def _tampered(self, k: int) -> Iterator[tuple[str, str, bytes, str]]:
        """Answers changed to other well-formed values: imported, never applied as given."""
        answer = self.doc["answer"]
        ccs = [c for c in self.doc["campaign"]["ccs"] if c != answer["occ"]]
        used = answer["outputs"].get("subflows_used") or []
        changes = [
            {"obs_mib": 1e6}, {"obs_mib": answer["obs_mib"] / 7},
            {"opm": "FullMesh" if answer["opm"] == "PCDC" else "PCDC"},
            {"occ": ccs[k % len(ccs)]}, {"otp_mbps": 99_999.0}, {"tp_max_mbps": 0.5},
            {"outputs": {**answer["outputs"], "subflows_used": used[:1]}},
            {"obs_mib": 30.0, "occ": ccs[0], "opm": "FullMesh", "otp_mbps": 1.0},
        ]
        change = changes[k % len(changes)]
        yield "tampered_answer", f"answer {sorted(change)}", self.bundle(
            {**self.doc, "answer": {**answer, **change}}), "accepted"


def _after_document(doc_bytes: bytes, name: str, size: int) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as out:
        info = tarfile.TarInfo("bundle.json")
        info.size = len(doc_bytes)
        out.addfile(info, io.BytesIO(doc_bytes))
    head = buf.getvalue()[: 512 + -(-len(doc_bytes) // 512) * 512]
    info = tarfile.TarInfo(name)
    info.size = size
    return gzip.compress(head + info.tobuf() + b"\0" * 4096)


def _pax_bomb(size: int) -> bytes:
    """An extended (pax) header of `size` bytes: tarfile reads one whole before the member."""
    info = tarfile.TarInfo("././@PaxHeader")
    info.type, info.size = tarfile.XHDTYPE, size
    return gzip.compress(info.tobuf(format=tarfile.USTAR_FORMAT) + b"\0" * size, 1)


def _flip(data: bytes, at: int) -> bytes:
    at %= len(data)
    return data[:at] + bytes([data[at] ^ 0x5A]) + data[at + 1:]


def _leaves(value: Any, path: tuple = ()) -> Iterator[tuple[tuple, Any]]:
    if isinstance(value, dict):
        for key, v in value.items():
            yield from _leaves(v, (*path, key))
        if not value:
            yield path, value
    elif isinstance(value, list):
        for n, v in enumerate(value[:3]):  # a few items of each list
            yield from _leaves(v, (*path, n))
        if not value:
            yield path, value
    else:
        yield path, value


def _free_form(path: tuple) -> bool:
    """Inside a JSON column nothing reads to decide anything (notes, provenance, reports)."""
    free = {"exported_by", "capabilities", "software", "selection", "source",
            "inputs", "outputs", "traditional", "provenance", "coefficients", "curve_p_values",
            "arms", "observed_subflows", "timing", "before", "after", "objective"}
    return any(p in free for p in path)


def _p(path: tuple) -> str:
    return ".".join(str(p) for p in path)

"""When each test file ran on which pytest-xdist worker: is the suite's schedule the longest-first
one `tests/conftest.py` asks for, and where do workers wait?

As a pytest plugin, it writes every test's start and end per worker into a folder:

    MPCOA_TIMELINE_DIR=/tmp/tl PYTHONPATH=benchmarks .venv/bin/pytest -p suite_timeline \\
        -n 5 --dist loadfile

Then, as a script, it prints per worker each test file that took longer than `--min-s`
(start and end, seconds after the worker's session began) and when the worker's last test
ended:

    .venv/bin/python benchmarks/suite_timeline.py /tmp/tl
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

_out = None


def _write(kind: str, what: str) -> None:
    global _out
    if _out is None:
        folder = Path(os.environ.get("MPCOA_TIMELINE_DIR", "suite-timeline"))
        folder.mkdir(parents=True, exist_ok=True)
        _out = (folder / f"{os.environ.get('PYTEST_XDIST_WORKER', 'main')}.txt").open("a")
    _out.write(f"{kind} {time.time():.2f} {what}\n")
    _out.flush()


def pytest_sessionstart(session) -> None:
    _write("B", "session")


def pytest_runtest_logstart(nodeid, location) -> None:
    _write("S", nodeid)


def pytest_runtest_logfinish(nodeid, location) -> None:
    _write("E", nodeid)


def report(folder: Path, min_s: float) -> None:
    for log in sorted(folder.glob("*.txt")):
        begun, starts, files, last = None, {}, {}, 0.0
        for line in log.read_text().splitlines():
            kind, stamp, what = line.split(" ", 2)
            t = float(stamp)
            if kind == "B":
                begun = t
            elif kind == "S":
                starts[what] = t
            elif kind == "E" and what in starts:
                span = files.setdefault(what.split("::")[0], [starts[what], t])
                span[1], last = t, t
        if begun is None:
            continue
        print(f"{log.stem}: last test ended at {last - begun:.0f} s")
        for name, (start, end) in files.items():
            if end - start >= min_s:
                print(f"  {start - begun:6.0f} {end - begun:6.0f} {end - start:5.0f} s  {name}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--min-s", type=float, default=15.0)
    args = parser.parse_args()
    report(args.folder, args.min_s)


if __name__ == "__main__":
    main()

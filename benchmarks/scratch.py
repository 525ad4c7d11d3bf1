"""A benchmark's scratch folder (its SQLite database, data dir, apply journals), removed when the
process ends: normally, on an exception, or on SIGINT/SIGTERM inside `run_stoppable` (which
turns them into an exception, so the interpreter's exit hooks run).

`MPCOA_BENCH_KEEP=1` keeps it for a look afterwards; the path is printed on stderr then.
"""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
from pathlib import Path


def scratch_dir(prefix: str) -> Path:
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    if os.environ.get("MPCOA_BENCH_KEEP", "") not in ("", "0"):
        atexit.register(lambda: print(f"kept {folder}", file=sys.stderr))
    else:
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return folder

"""What every `mpcoa` command pays before it does anything: the CLI's imports.

scipy (stats, sparse, optimize) is imported by the functions that compute with it, never at
module level: at module level it cost every command, and every worker `mpcoa serve --workers`
spawns, over half a second of CPU (uvicorn kills a worker that has not started in time)."""

import json
import subprocess
import sys

import pytest

from tests.support import REPOSITORY

pytestmark = pytest.mark.slow  # a Python process of its own


def test_the_cli_starts_without_scipy():
    probe = ("import json, sys, cli.main; "
             "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] == 'scipy')))")
    out = subprocess.run([sys.executable, "-c", probe], cwd=REPOSITORY, capture_output=True,
                         text=True, timeout=120, check=True)
    assert json.loads(out.stdout) == [], out.stdout

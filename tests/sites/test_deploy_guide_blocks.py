"""docs/deploy.md's command blocks as the three-host test reads them (fast: no namespace): every
block is marked with its host, the ones this machine cannot run are exactly the listed ones,
and the runnable ones name only hosts the test builds."""

from __future__ import annotations

from pathlib import Path

import pytest

from . import guide_blocks as gb
from .test_deploy_guide import NOT_HERE, READY_LOG, READY_PORT, SITES


def test_every_block_is_marked_and_the_not_runnable_ones_are_listed():
    blocks = gb.blocks()
    assert {b.name for b in blocks if b.host == "not-here"} == set(NOT_HERE)
    assert {b.host for b in blocks} == {"control", *SITES, "not-here"}
    for b in blocks:
        if b.background:  # the test knows when each long-running block is up
            assert b.name in READY_PORT or b.name in READY_LOG, b
    assert [b.name for b in blocks if b.host == "control"][-2:] == ["apply", "rollback"]


def test_an_unmarked_block_is_refused():
    text = gb.GUIDE.read_text() + "\n```sh\nmpcoa something\n```\n"
    with pytest.raises(AssertionError, match="marker"):
        gb.blocks(text)


def test_only_the_placeholders_are_replaced():
    body = "mpcoa site add SRL --isp K:1:1; cp /etc/mpcoa/x /run/mpcoa/apply # SRLx HU"
    out = gb.substitute(body, Path("/e"), Path("/r"), {"SRL": "SRL1a", "HU": "HU1a"})
    assert out == "mpcoa site add SRL1a --isp K:1:1; cp /e/x /r/apply # SRLx HU1a"

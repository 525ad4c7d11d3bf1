"""docs/deploy.md's command blocks, as its markers say: each fenced block follows a comment
`<!-- deploy: HOST NAME [(flags)] -->` naming the host it runs on (`control`, a site's name)
or `<!-- deploy: not-here NAME: why -->` for a block this machine cannot run (Docker)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "deploy.md"
MARKED = re.compile(
    r"<!-- deploy: (?P<host>\S+) (?P<name>[a-z0-9-]+)(?P<rest>[^\n]*?) -->\n"
    r"```(?P<lang>[a-z]+)\n(?P<body>.*?)\n```", re.S)
FENCE = re.compile(r"^```(sh|ini|bash)$", re.M)


@dataclass(frozen=True)
class Block:
    host: str  # "control", a site's name, or "not-here"
    name: str
    flags: str  # "(background)", "(before every later ... block)", ": why" (not-here)
    lang: str
    body: str

    @property
    def background(self) -> bool:
        return "(background)" in self.flags

    @property
    def prefix(self) -> bool:
        return "(before every later" in self.flags

    @property
    def server_options(self) -> bool:
        return "(server options)" in self.flags


def blocks(text: str | None = None) -> list[Block]:
    """Every marked block in document order; fails when a command block has no marker."""
    text = GUIDE.read_text() if text is None else text
    found = [Block(m["host"], m["name"], m["rest"].strip(), m["lang"], m["body"])
             for m in MARKED.finditer(text)]
    fences = len(FENCE.findall(text))
    assert fences == len(found), (
        f"docs/deploy.md: {fences} sh/ini blocks but {len(found)} with a `<!-- deploy: ... -->` "
        "marker: mark every command block with the host it runs on (or not-here)")
    return found


def substitute(body: str, etc: Path, run: Path, sites: dict[str, str]) -> str:
    """Placeholders of the guide's table only: `/etc/mpcoa` (each host's files), `/run/mpcoa`
    (a site's apply journal) and the site names (`sites`: the guide's -> this run's)."""
    for guide_name, name in sites.items():
        body = re.sub(rf"\b{guide_name}\b", name, body)
    return body.replace("/etc/mpcoa", str(etc)).replace("/run/mpcoa", str(run))


def server_options(block: Block) -> list[str]:
    """A `key = value` configuration block as `-c key=value` server options."""
    opts = []
    for line in block.body.splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            key, _, value = line.partition("=")
            opts.append(f"{key.strip()}={value.strip().strip(chr(39))}")
    return opts

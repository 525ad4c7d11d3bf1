"""The README a newcomer reads: short, its two commands at the top (CI runs the second), no path
outside a clone, every shipped scenario named, every link to a file that exists, a LICENSE."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text()
DEMO = "./scripts/bootstrap && .venv/bin/mpcoa demo"
TESTS = "./scripts/bootstrap && .venv/bin/pytest -n 5 --dist loadfile"


def test_short_with_short_lines():
    lines = README.splitlines()
    assert len(lines) <= 85, len(lines)
    assert [n for n, line in enumerate(lines, 1) if len(line) > 100] == []


def test_the_two_commands_are_the_first_code_block_and_ci_runs_the_second():
    first = re.search(r"```sh\n(.*?)```", README, re.S)[1].splitlines()
    assert [line.split("  #")[0].strip() for line in first] == [DEMO, TESTS]
    assert README.index("Requirements") < README.index("```sh")
    assert (REPO / ".ci" / "run").read_text().splitlines()[-1] == TESTS


def test_no_path_outside_the_repository_and_every_link_resolves():
    assert "../" not in README
    for target in re.findall(r"\]\(([^)#]+)\)", README):
        if not target.startswith("https://"):
            assert (REPO / target).exists(), target
    for path in re.findall(r"\b((?:docs|scripts|probes)/[\w./-]+\w)", README):
        assert (REPO / path).exists(), path


def test_every_shipped_scenario_is_named():
    for scenario in (REPO / "probes" / "testbed" / "scenarios").glob("*.yaml"):
        assert re.search(rf"\b{scenario.stem}\b", README), scenario.stem


def test_the_paper_is_cited_with_its_doi_and_the_license_is_mit():
    assert "10.3390/electronics10161942" in README and "Electronics" in README
    license_text = (REPO / "LICENSE").read_text()
    assert license_text.startswith("MIT License") and "the mpcoa authors" in license_text
    assert tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["license"] == "MIT"

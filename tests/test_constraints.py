"""constraints.txt is the one list of versions: every install path uses it, it pins every package
pyproject.toml names (extras included) to one exact version, and the environment the tests run
in is exactly it."""

from __future__ import annotations

import re
import tomllib
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;#]+)$")


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _pins() -> dict[str, str]:
    lines = [x.strip() for x in (REPO / "constraints.txt").read_text().splitlines()]
    pins = {}
    for line in (x for x in lines if x and not x.startswith("#")):
        match = PIN.fullmatch(line)
        assert match, f"constraints.txt: {line!r} is not NAME==VERSION"
        assert _canonical(match[1]) not in pins, f"constraints.txt: {match[1]} twice"
        pins[_canonical(match[1])] = match[2]
    return pins


def test_every_install_path_installs_from_constraints():
    assert " -c constraints.txt " in (REPO / "scripts" / "bootstrap").read_text()
    dockerfile = (REPO / "Dockerfile").read_text()
    assert "COPY pyproject.toml README.md alembic.ini constraints.txt" in dockerfile
    installs = [x for x in dockerfile.splitlines() if "pip install" in x]
    assert installs and all("-c constraints.txt" in x for x in installs), installs
    # CI is the bootstrap, then the tests
    assert "./scripts/bootstrap &&" in (REPO / ".ci" / "run").read_text()


def test_every_named_package_is_pinned_exactly():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    named = [*project["dependencies"],
             *(d for extra in project["optional-dependencies"].values() for d in extra)]
    pins = _pins()
    for requirement in named:
        name = _canonical(re.split(r"[\[<>=!~; ]", requirement, maxsplit=1)[0])
        assert name in pins, f"{requirement}: not pinned in constraints.txt"
    assert {"celery", "flower", "kombu", "uvicorn", "starlette"} <= pins.keys()


def test_the_tests_run_on_exactly_the_pinned_versions():
    wrong = {}
    for name, pinned in _pins().items():
        try:
            installed = version(name)
        except PackageNotFoundError:
            installed = None
        if installed != pinned:
            wrong[name] = (pinned, installed)
    assert wrong == {}, f"installed differs from constraints.txt (pinned, installed): {wrong}"

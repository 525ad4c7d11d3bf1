"""docs/design.md is the map a newcomer reads first, so it must be true and short: every name it
puts in backticks exists (a file, a module's attribute, or a word the code uses), every contract
and test it names beside a claim exists, every claim of the kind "only", "never" or "imports"
names one, and it stays within MAX_LINES."""

from __future__ import annotations

import ast
import importlib.util
import re
import tomllib
from functools import cache
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "design.md"
MAX_LINES = 350
PACKAGES = ("cli", "api", "workers", "migrations", "service", "models", "probes", "tests",
            "benchmarks")
CITATION = re.compile(r"\b(contract|test): `([^`]+)`")
CLAIM = re.compile(r"\b(only|never|imports?|imported)\b", re.IGNORECASE)
CODE_SPAN = re.compile(r"`[^`]*`")
QUOTED = re.compile(r"\"[^\"]*\"")
NEW_BLOCK = re.compile(r"^\s*(\||#|- |\d+\. |<!--)")


def _prose(text: str) -> list[str]:
    """The doc's lines outside fenced code blocks."""
    lines, fenced = [], False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
            continue
        if not fenced:
            lines.append(line)
    return lines


def blocks(text: str) -> list[str]:
    """Paragraphs, list items, table rows and headings: what a claim and its citation share."""
    out: list[str] = []
    current: list[str] = []
    for line in _prose(text):
        if not line.strip() or NEW_BLOCK.match(line) or (current and current[0].startswith("|")):
            if current:
                out.append(" ".join(current))
            current = [line.strip()] if line.strip() else []
        else:
            current.append(line.strip())
    if current:
        out.append(" ".join(current))
    return out


@cache
def contract_names() -> frozenset[str]:
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    return frozenset(c["name"] for c in config["tool"]["importlinter"]["contracts"])


@cache
def code_words() -> frozenset[str]:
    """Every word of the code, its templates, its settings' example and pyproject.toml."""
    here = Path(__file__).resolve()  # this file names what does not exist, on purpose
    files = [p for pkg in PACKAGES for p in (REPO / pkg).rglob("*.py") if p != here]
    files += list((REPO / "api" / "dashboard" / "templates").glob("*.html"))
    files += [REPO / "pyproject.toml", REPO / ".env.example"]
    words: set[str] = set()
    for path in files:
        words.update(re.findall(r"\w+", path.read_text(errors="replace")))
    return frozenset(words)


def _module_file(dotted: str) -> Path | None:
    base = REPO.joinpath(*dotted.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


@cache
def _bound_names(path: Path) -> frozenset[str]:
    """The names a module binds at its top level (and in its classes)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return frozenset(names)


def _test_exists(ref: str) -> bool:
    path, _, name = ref.partition("::")
    file = REPO / path
    if not (path.startswith("tests/") and file.is_file() and name):
        return False
    return name.split("::")[-1] in _bound_names(file)


def citation_problems(text: str) -> list[str]:
    problems = []
    for kind, ref in CITATION.findall(text):
        if kind == "contract" and ref not in contract_names():
            problems.append(f"no import-linter contract is named {ref!r}")
        if kind == "test" and not _test_exists(ref):
            problems.append(f"no test {ref!r}")
    return problems


def uncited_claims(text: str) -> list[str]:
    out = []
    for block in blocks(text):
        bare = QUOTED.sub("", CODE_SPAN.sub("", block)).replace("import-linter", "")
        if CLAIM.search(bare) and not CITATION.search(block):
            out.append(block[:160])
    return out


def name_problem(token: str) -> str | None:
    """Why a backticked name does not exist, or None."""
    t = token.strip()
    if not t or t.startswith("/"):  # a route
        return None
    if " " in t:
        if re.fullmatch(r"[\w, ]+", t):  # a list of names
            missing = [w for w in re.findall(r"\w+", t) if w not in code_words()]
            return f"{t!r}: {missing} not in the code" if missing else None
        return None  # a command line or a sentence
    if "::" in t:
        return None if _test_exists(t) else f"{t!r}: no such test"
    t = re.sub(r"\(.*\)$", "", t)
    if "<" in t:  # a placeholder: the folder it goes in must exist
        parent = t.split("<")[0].rsplit("/", 1)[0]
        return None if (REPO / parent).is_dir() else f"{t!r}: no folder {parent}"
    if (REPO / t.rstrip("/")).exists():
        return None
    if "/" in t:
        return f"{t!r}: no such file"
    parts = t.split(".")
    if parts[0] in PACKAGES and all(p.isidentifier() for p in parts):
        for i in range(len(parts), 0, -1):
            module = _module_file(".".join(parts[:i]))
            if module is None:
                continue
            rest = parts[i:]
            if rest and rest[0] not in _bound_names(module):
                return f"{t!r}: {module.relative_to(REPO)} binds no {rest[0]}"
            missing = [w for w in rest[1:] if w not in code_words()]
            return f"{t!r}: {missing} not in the code" if missing else None
        return f"{t!r}: no such module"
    missing = [w for w in re.findall(r"\w+", t) if not w.isdigit() and w not in code_words()]
    return f"{t!r}: {missing} not in the code" if missing else None


def name_problems(text: str) -> list[str]:
    prose = "\n".join(_prose(text))
    cited = {m.group(0) for m in CITATION.finditer(prose)}
    for c in cited:
        prose = prose.replace(c, "")
    return [p for token in CODE_SPAN.findall(prose) if (p := name_problem(token[1:-1]))]


def test_the_design_doc_is_short():
    lines = DOC.read_text().splitlines()
    assert len(lines) <= MAX_LINES, f"docs/design.md has {len(lines)} lines"


def test_every_name_in_the_design_doc_exists():
    assert name_problems(DOC.read_text()) == []


def test_every_contract_and_test_the_design_doc_names_exists():
    text = DOC.read_text()
    assert CITATION.findall(text), "the doc names no contract or test"
    assert citation_problems(text) == []


def test_every_only_never_or_imports_claim_names_its_check():
    assert uncited_claims(DOC.read_text()) == []


def test_the_how_to_s_phase_is_a_phase_module_as_written():
    """The example phase of "How to add a phase" imports as a module of `phases/` and is one."""
    (source,) = re.findall(r"```python\n(# (\S+)\n.*?)```", DOC.read_text(), flags=re.S)
    code, path = source
    assert path.startswith("service/flows/campaign/phases/") and path.endswith(".py")
    name = path.removesuffix(".py").replace("/", ".")
    module = importlib.util.module_from_spec(importlib.util.spec_from_loader(name, loader=None))
    exec(compile(code, path, "exec"), module.__dict__)  # the doc's own example
    from service.flows.campaign.phases.base import DONE, PhaseVerdict

    assert isinstance(module.name, str) and callable(module.advance)
    assert isinstance(DONE, PhaseVerdict)


def test_the_checks_find_what_is_wrong():
    text = ("The store never imports `service.flows`.\n\n"
            "Kept (contract: `no such contract`), (test: `tests/test_design_doc.py::nope`).\n\n"
            "See `service/flows/nowhere.py`, `service.flows.campaign.finish.no_such_thing`, "
            "`service.flows.nowhere.x` and `NoSuchClassAnywhere`.\n\n"
            "Fine: `service.flows.campaign.finish.finish_campaign`, `probes/tools/`, "
            "(test: `tests/test_design_doc.py::test_the_design_doc_is_short`).\n")
    assert uncited_claims(text) == ["The store never imports `service.flows`."]
    assert citation_problems(text) == ["no import-linter contract is named 'no such contract'",
                                       "no test 'tests/test_design_doc.py::nope'"]
    problems = name_problems(text)
    assert len(problems) == 4, problems
    for bad in ("nowhere.py", "no_such_thing", "service.flows.nowhere.x", "NoSuchClassAnywhere"):
        assert any(bad in p for p in problems), (bad, problems)

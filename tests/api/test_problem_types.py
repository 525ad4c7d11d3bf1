"""Every problem `type` the API can give names a section of docs/api.md that exists: the types
are `api.problems.SLUGS`, and every status the code answers a problem with is one of them."""

from __future__ import annotations

import re
from pathlib import Path

from api import problems

ROOT = Path(__file__).resolve().parents[2]
API = ROOT / "api"
# where the code builds a problem: problem(STATUS, ...), send_problem(send, STATUS, ...),
# HTTPException(STATUS, ...), status_code=status.HTTP_NNN_...
EMITTERS = re.compile(r"(?:\bproblem\(|send_problem\(\s*send,\s*|HTTPException\(|"
                      r"super\(\).__init__\(|status\.HTTP_)(\d{3})")


def _anchors(markdown: str) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation but `-` and `_` dropped, spaces -> `-`."""
    out = set()
    for line in markdown.splitlines():
        heading = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if heading:
            text = re.sub(r"[^\w\- ]", "", heading.group(1).lower())
            out.add(text.replace(" ", "-"))
    return out


def test_every_type_has_its_section_in_docs_api_md():
    anchors = _anchors((ROOT / problems.DOCS).read_text())
    for status, slug in problems.SLUGS.items():
        assert slug in anchors, f"{status}: docs/api.md has no section {slug!r}"
        assert problems.type_of(status) == f"docs/api.md#{slug}"
        assert problems.document(status, "x")["type"] == f"docs/api.md#{slug}"
    assert len(set(problems.SLUGS.values())) == len(problems.SLUGS)


def test_every_status_the_code_answers_has_a_type():
    emitted: dict[int, list[str]] = {}
    for source in API.rglob("*.py"):
        for match in EMITTERS.finditer(source.read_text()):
            emitted.setdefault(int(match.group(1)), []).append(source.name)
    # Starlette's own: an unknown path, a wrong method
    emitted.setdefault(404, []).append("starlette")
    emitted.setdefault(405, []).append("starlette")
    assert {400, 401, 403, 409, 413, 422, 500, 503} <= set(emitted), emitted  # the regex sees
    missing = {s: where for s, where in emitted.items() if s >= 400 and s not in problems.SLUGS}
    assert not missing, missing


def test_an_unknown_status_keeps_rfc_9457s_default():
    assert problems.document(418, "a teapot")["type"] == "about:blank"

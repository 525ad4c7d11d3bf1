"""The house rules of the code base, checked on every run: imports flow one way (the
import-linter contracts in pyproject.toml) and no module imports itself back through others."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import grimp

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("cli", "api", "workers", "migrations", "service", "models", "probes")
# the circle check also reads the benchmark scripts, which import the product and each other
CIRCLE_CHECKED = (*PACKAGES, "benchmarks")


def test_import_contracts_are_kept():
    lint = Path(sys.executable).with_name("lint-imports")
    out = subprocess.run([str(lint)], cwd=REPO, capture_output=True, text=True, timeout=300,
                         check=False)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert "0 broken" in out.stdout


def _cycles(graph) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append(
                        (child, iter(sorted(graph.find_modules_directly_imported_by(child))))
                    )
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_import_cycles():
    graph = grimp.build_graph(*CIRCLE_CHECKED, cache_dir=None)
    assert _cycles(graph) == []


def test_the_cycle_finder_finds_a_cycle(tmp_path, monkeypatch):
    pkg = tmp_path / "cyc"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from cyc import b\n")
    (pkg / "b.py").write_text("def f():\n    from cyc import a\n")  # a lazy import counts
    (pkg / "c.py").write_text("from cyc import a\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert _cycles(grimp.build_graph("cyc", cache_dir=None)) == [["cyc.a", "cyc.b"]]


def test_the_flow_domains_layer_with_no_lazy_import_around_the_order():
    """The domains' order is a contract (run above); every import between domains, lazy ones
    (inside a function) too, goes down it, and every domain is in it."""
    import tomllib

    contracts = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]
    (flows,) = [c for c in contracts["contracts"] if c.get("containers") == ["service.flows"]]
    order = [[d.strip() for d in layer.split("|")] for layer in flows["layers"]]
    assert order == [["scheduling"], ["applying", "takeaways"], ["campaign"], ["answers"]]
    domains = {p.name for p in (REPO / "service" / "flows").iterdir()
               if (p / "__init__.py").exists()}
    assert domains == {d for layer in order for d in layer}
    rank = {d: k for k, layer in enumerate(order) for d in layer}
    graph = grimp.build_graph("service", cache_dir=None)
    for importer in graph.modules:
        parts = importer.split(".")
        if parts[:2] != ["service", "flows"] or len(parts) < 3:
            continue
        for imported in graph.find_modules_directly_imported_by(importer):
            other = imported.split(".")
            if other[:2] == ["service", "flows"] and len(other) > 2 and other[2] != parts[2]:
                assert rank[parts[2]] < rank[other[2]], (importer, imported)

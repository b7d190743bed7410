"""kafkacoord's imports run one way: no module imports itself back, however far round, and
no two subpackages of one package import each other (docs/architecture.md#layers).

Every import counts: at module level, in a function, or under ``TYPE_CHECKING``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import grimp
import pytest

Edges = Mapping[str, Iterable[str]]


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph("kafkacoord", cache_dir=None)


def cycles(edges: Edges) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan's, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, targets = work[-1]
            target = next(targets, None)
            if target is not None:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(edges.get(target, ())))))
                elif target in on_stack:
                    low[node] = min(low[node], index[target])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component: list[str] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return sorted(found)


def module_edges(graph: grimp.ImportGraph) -> dict[str, set[str]]:
    return {m: graph.find_modules_directly_imported_by(m) for m in graph.modules}


def sibling_cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Children of one package (each with everything under it) that import each other,
    directly or round other children: at every depth of the package."""
    found: list[list[str]] = []
    for package in sorted(graph.modules):
        children = sorted(graph.find_children(package))
        edges = {
            a: [
                b
                for b in children
                if b != a and graph.direct_import_exists(importer=a, imported=b, as_packages=True)
            ]
            for a in children
        }
        found.extend(cycles(edges))
    return found


def test_no_module_imports_itself_back(graph: grimp.ImportGraph) -> None:
    assert len(graph.modules) > 200  # the whole package was read
    assert cycles(module_edges(graph)) == []


def test_no_two_subpackages_import_each_other(graph: grimp.ImportGraph) -> None:
    assert sibling_cycles(graph) == []


def test_cycles_are_found_however_long() -> None:
    edges = {"a": ["b"], "b": ["c"], "c": ["a", "d"], "d": [], "e": ["e2"], "e2": ["e"]}
    assert cycles(edges) == [["a", "b", "c"], ["e", "e2"]]
    assert cycles({"a": ["b"], "b": ["c"], "c": []}) == []


def test_subpackages_that_import_each_other_are_found() -> None:
    graph = grimp.ImportGraph()
    for module in ("p", "p.a", "p.a.x", "p.a.w", "p.b", "p.b.y", "p.c"):
        graph.add_module(module)
    # No module cycle: x -> y -> w, but the packages a and b import each other.
    graph.add_import(importer="p.a.x", imported="p.b.y")
    graph.add_import(importer="p.b.y", imported="p.a.w")
    graph.add_import(importer="p.c", imported="p.a.x")
    assert cycles(module_edges(graph)) == []
    assert sibling_cycles(graph) == [["p.a", "p.b"]]

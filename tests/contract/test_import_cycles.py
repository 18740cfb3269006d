"""No import cycles between modules, at any depth.

The import contract (`make lint`, import-linter's acyclic_siblings) finds cycles between the
modules and subpackages of each package; a package's `__init__` that imports a child which
imports the package back is not between siblings, so this finds every cycle of the module graph
(lazy imports inside functions included, as grimp reads them)."""

from __future__ import annotations

import grimp
import pytest

PACKAGES = ("quota_controller", "quotactl", "quota_local")


def cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
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
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
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


def test_the_cycle_finder_finds_a_cycle_through_a_package_init() -> None:
    graph = grimp.ImportGraph()
    for name in ("pkg", "pkg.child", "pkg.other", "pkg.leaf"):
        graph.add_module(name)
    graph.add_import(importer="pkg", imported="pkg.child")
    graph.add_import(importer="pkg.child", imported="pkg")
    graph.add_import(importer="pkg.other", imported="pkg.leaf")
    assert cycles(graph) == [["pkg", "pkg.child"]]


@pytest.mark.parametrize("package", PACKAGES)
def test_no_module_imports_itself_back_through_others(package: str) -> None:
    assert cycles(grimp.build_graph(package)) == []

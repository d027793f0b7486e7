"""The package's shape: no import cycle between modules, and every import points down the layers.

Layers, lowest first: the private top-level modules ``_numbers``, ``_validate``, ``_version``
(argument checks, the version) < ``data``, ``nets`` (peers
that never import each other) < ``training`` < ``zoo`` < ``explore`` < ``course``. Imports are
read from the source (AST, nothing executed), function-level imports included; the top-level
``capsedu/__init__.py`` imports nothing (its names load lazily) and nothing inside the package
imports it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from conftest import REPO

pytestmark = pytest.mark.unit

PACKAGE = REPO / "capsedu"
LAYERS = {"base": 0, "data": 1, "nets": 1, "training": 2, "zoo": 3, "explore": 4, "course": 5}


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imports_of(source: str) -> set[str]:
    r"""The capsedu modules a source imports (``from a import b`` counts ``a.b`` when it is a module)."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found |= {f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in MODULES else node.module
                      for a in node.names}
    return {name for name in found if name == "capsedu" or name.startswith("capsedu.")}


def graph(read=lambda path: path.read_text()) -> dict[str, set[str]]:
    return {name: imports_of(read(path)) for name, path in MODULES.items()}


def layer(name: str) -> tuple[int, str]:
    r"""The layer of a module and the package it is in (the private top-level modules are "base")."""
    part = name.split(".")[1] if "." in name else ""
    part = "base" if part.startswith("_") else part
    return LAYERS.get(part, -1), part


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    r"""Every strongly connected component with more than one module (Tarjan)."""
    index, low, stack, on_stack, found, counter = {}, {}, [], set(), [], [0]

    def visit(node: str) -> None:
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for nxt in edges.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                item = stack.pop()
                on_stack.discard(item)
                component.append(item)
                if item == node:
                    break
            if len(component) > 1 or node in edges.get(node, ()):
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def upward_imports(edges: dict[str, set[str]]) -> list[str]:
    r"""Imports from a module to one in a higher layer, or to a peer package of its own layer."""
    wrong = []
    for source, targets in edges.items():
        for target in targets:
            (low_rank, low_part), (high_rank, high_part) = layer(source), layer(target)
            if target == "capsedu":
                wrong.append(f"{source} imports the top-level capsedu (import the module itself)")
            elif high_rank > low_rank or (high_rank == low_rank and high_part != low_part):
                wrong.append(f"{source} ({low_part}) imports {target} ({high_part})")
    return sorted(wrong)


def test_every_package_of_capsedu_has_a_layer():
    parts = {layer(name)[1] for name in MODULES if name != "capsedu"}
    assert parts <= set(LAYERS), f"give these a layer in LAYERS: {sorted(parts - set(LAYERS))}"


def test_no_module_imports_another_that_imports_it_back():
    assert cycles(graph()) == []


def test_every_import_points_down_the_layers():
    assert upward_imports(graph()) == []


def test_the_top_level_package_imports_nothing():
    assert imports_of(MODULES["capsedu"].read_text()) == set()


@pytest.mark.parametrize("module, line, problem", [
    ("capsedu.nets.capsnet", "from capsedu.training.loop import fit", "capsedu.nets.capsnet (nets) imports "
     "capsedu.training.loop (training)"),
    ("capsedu.nets.capsnet", "from capsedu.data.mnist import MNISTData", "(nets) imports capsedu.data.mnist (data)"),
    ("capsedu.training.loop", "import capsedu", "imports the top-level capsedu"),
])
def test_an_upward_import_is_caught(module, line, problem):
    edges = graph(lambda path: path.read_text() + (f"\n{line}\n" if path == MODULES[module] else ""))
    assert any(problem in entry for entry in upward_imports(edges)), upward_imports(edges)


def test_a_cycle_is_caught():
    squash = MODULES["capsedu.nets.squash"]
    edges = graph(lambda path: path.read_text() + ("\nfrom capsedu.nets.routing import DigitCaps\n"
                                                   if path == squash else ""))
    assert any({"capsedu.nets.routing", "capsedu.nets.squash"} <= set(found) for found in cycles(edges))

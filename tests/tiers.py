r"""The test tiers: every test belongs to exactly one, named by a marker (``pyproject.toml``
registers them; ``tests/conftest.py`` applies :func:`settle_tiers` when pytest collects).

* ``unit``: in-process tests of the package - no subprocess, no browser, no training beyond a
  few steps (a CapsNet or a CNN trained for tens of steps is not unit); ``make unit``, under
  two minutes. Enforced by measurement as each runs (:class:`UnitRules`): a unit test that
  imports ``coursetools`` or ``benchmarks``, starts a process, or takes more than about two
  seconds of CPU fails, naming which.
* ``tools``: what leaves the process or the package - command lines and ``python -c`` run in
  subprocesses, ruff, git, the wheel in a fresh venv, the environment and hub/Kubernetes
  configuration, the repository's tools (``coursetools``, ``benchmarks``) - and in-process tests
  past the unit tier's two seconds: trainings of more than a few steps, whole explorers drawn.
* ``lessons``: the lessons themselves (structure, fingerprints, handouts, nbgrader, nbval).
* ``browser``: JupyterLab, the hub and the book in Chromium.
* ``artefacts``: the stored artefacts (shipped weights, recorded studies) pinned to what they claim.

A test file names its tier once, ``pytestmark = pytest.mark.TIER``; a test of another tier in
it carries its own decorator, which wins (the closest node's tier: the test's, then its
class's, then its module's). A node with two tiers, or a test with none, stops the run before
any test runs (``pytest.UsageError`` naming each test). Once settled, a test's tier is on the
test alone (taken off its module and class), so that ``-m unit`` and ``-m "not unit"`` select
by the tier that won. nbval's notebook cells are ``lessons``.
"""

from __future__ import annotations

import ast
import contextlib
import inspect
import os
import subprocess
import textwrap
import time
from collections.abc import Iterator

import pytest

TIERS = ("unit", "tools", "lessons", "browser", "artefacts")


def tier_of(item: pytest.Item) -> str:
    r"""``item``'s tier: the one tier marker of the closest node that carries any (the test, its
    class, its module); ``ValueError`` naming the test when no node does or one carries two."""
    for node in reversed(item.listchain()):
        found = sorted({mark.name for mark in node.own_markers if mark.name in TIERS})
        if len(found) > 1:
            raise ValueError(f"{item.nodeid}: {node.name} carries {len(found)} tiers "
                             f"({', '.join(found)}), one expected")
        if found:
            return found[0]
    raise ValueError(f"{item.nodeid}: no tier - give its file `pytestmark = pytest.mark.TIER` "
                     f"(TIER one of {', '.join(TIERS)})")


def settle_tiers(items: list[pytest.Item]) -> None:
    r"""Give every test of ``items`` its one tier, on the test alone; ``pytest.UsageError`` naming
    every test without exactly one (see the module's docstring)."""
    settled, problems = [], []
    for item in items:
        if item.path.suffix == ".ipynb":  # nbval's cells
            item.add_marker(pytest.mark.lessons)
        try:
            settled.append((item, tier_of(item)))
        except ValueError as error:
            problems.append(str(error))
    if problems:
        raise pytest.UsageError("every test needs exactly one tier (tests/tiers.py):\n  "
                                + "\n  ".join(problems))
    for item, tier in settled:
        for node in item.listchain()[:-1]:  # the module, its class: the test alone keeps the tier
            node.own_markers[:] = [mark for mark in node.own_markers if mark.name not in TIERS]
        if tier not in {mark.name for mark in item.own_markers}:
            item.add_marker(tier)


# --- the unit tier's rules, measured as each unit test runs (UnitRules) ----------------------

UNIT_CPU_SECONDS = 2.5  # "about 2 s" of CPU (all threads; load does not inflate it), with a margin for slower CPUs
UNIT_WALL_SECONDS = 10.0  # and a wall-clock bound far above it, for a test that waits instead
TOOLS = ("coursetools", "benchmarks")  # the repository's tools: command lines, not the package


class UnitTierError(AssertionError):
    r"""A test marked ``unit`` that is not one by measurement."""


def tool_imports(item: pytest.Item) -> list[str]:
    r"""The imports of ``coursetools`` or ``benchmarks`` in ``item``'s own code and, when its module
    is unit as a whole, in the module's top level."""
    trees = []
    function = getattr(item, "function", None)
    if function is not None:
        with contextlib.suppress(OSError, TypeError):
            trees.append(ast.parse(textwrap.dedent(inspect.getsource(function))))
    module = getattr(item, "module", None)
    if module is not None and getattr(module, "pytestmark", None) == pytest.mark.unit:
        with contextlib.suppress(OSError, TypeError):
            tree = ast.parse(inspect.getsource(module))
            trees.append(ast.Module(body=[n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))],
                                    type_ignores=[]))
    found = []
    for tree in trees:
        for node in ast.walk(tree):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module] if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 else [])
            found += [name for name in names if name.split(".")[0] in TOOLS]
    return sorted(set(found))


@contextlib.contextmanager
def no_new_processes(test: str) -> Iterator[None]:
    r"""Inside the block, starting a process (subprocess, os.system, fork, posix_spawn) raises."""
    def refuse(what: str):
        def refused(*args, **kwargs):
            raise UnitTierError(f"{test}: a unit test started a process ({what}); give it the "
                                "tools tier (tests/tiers.py)")
        return refused

    saved = [(subprocess.Popen, "__init__"), (os, "system"), (os, "fork"), (os, "posix_spawn"),
             (os, "posix_spawnp")]
    originals = [getattr(owner, name) for owner, name in saved]
    for owner, name in saved:
        setattr(owner, name, refuse(f"{getattr(owner, '__name__', owner)}.{name}"))
    try:
        yield
    finally:
        for (owner, name), original in zip(saved, originals):
            setattr(owner, name, original)


class UnitRules:
    r"""The unit tier by measurement: a unit test that imports the repository's tools, starts a
    process or runs longer than ``cpu_seconds`` of CPU (``wall_seconds`` of wall clock) fails,
    naming which."""

    def __init__(self, cpu_seconds: float = UNIT_CPU_SECONDS, wall_seconds: float = UNIT_WALL_SECONDS) -> None:
        self.cpu_seconds, self.wall_seconds = cpu_seconds, wall_seconds

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item):
        if item.get_closest_marker("unit") is None:
            return (yield)
        imported = tool_imports(item)
        if imported:
            raise UnitTierError(f"{item.nodeid}: a unit test imports {', '.join(imported)}; the "
                                "repository's tools belong to the tools tier (tests/tiers.py)")
        cpu, wall = time.process_time(), time.perf_counter()
        with no_new_processes(item.nodeid):
            result = yield
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        if cpu > self.cpu_seconds or wall > self.wall_seconds:
            raise UnitTierError(f"{item.nodeid}: a unit test ran {cpu:.1f} s of CPU ({wall:.1f} s); the "
                                f"unit tier allows {self.cpu_seconds:g} s: give it another tier")
        return result

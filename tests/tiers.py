r"""The test tiers: every test belongs to exactly one, named by a marker (``pyproject.toml``
registers them; ``tests/conftest.py`` applies :func:`settle_tiers` when pytest collects).

* ``unit``: in-process tests of the package - no subprocess, no browser, no training beyond a
  few steps (a CapsNet or a CNN trained for tens of steps is not unit); ``make unit``, under
  two minutes.
* ``tools``: what leaves the process or the package - command lines and ``python -c`` run in
  subprocesses, ruff, git, the wheel in a fresh venv, the environment and hub/Kubernetes
  configuration, trainings of more than a few steps.
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

"""Every lesson's handout, executed with its stubs in place: each check answers with a hint.

The handouts (``coursetools.handouts``) replace every exercise solution by a stub that raises
``NotImplementedError``. Executed top to bottom in the fast profile (errors allowed, as a learner
would run it before solving anything), every check cell after an exercise must print a ❌ hint
and raise nothing; only cells that *use* an unfinished exercise's result may stop with an error.
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest
from conftest import REPO
from nbclient import NotebookClient

from capsedu.course.checks._kit import STUB_HINT
from coursetools.handouts import BEGIN, student_notebook

pytestmark = pytest.mark.lessons

LESSONS = sorted((REPO / "notebooks").glob("[0-9][0-9]_*.ipynb"))
CHECK_CALL = re.compile(r"\bcheck_\w+\(")


def check_cells(notebook: nbformat.NotebookNode) -> list[int]:
    r"""Indices of the code cells that check an exercise: the first code cell after each stub."""
    found = []
    for index, cell in enumerate(notebook.cells):
        if cell.cell_type == "code" and "NotImplementedError" in cell.source:
            following = next(i for i in range(index + 1, len(notebook.cells))
                             if notebook.cells[i].cell_type == "code")
            assert CHECK_CALL.search(notebook.cells[following].source), notebook.cells[following].source
            found.append(following)
    return found


def text_of(cell: nbformat.NotebookNode) -> str:
    return "".join(o.get("text", "") for o in cell.outputs if o.get("output_type") == "stream")


# One test per lesson (they spread over pytest-xdist's workers), each in its lesson's xdist_group:
# the worker that runs the lesson's nbval cells (tests/conftest.py), since both execute in notebooks/
# and lesson 06 writes and reads back checkpoints/ there.
@pytest.mark.parametrize("lesson", [pytest.param(p, id=p.stem, marks=pytest.mark.xdist_group(p.stem))
                                    for p in LESSONS])
def test_every_check_of_a_stubbed_handout_prints_a_hint(lesson: Path, monkeypatch):
    original = nbformat.read(lesson, as_version=4)
    handout = student_notebook(original)
    assert sum(c.source.count(BEGIN) for c in original.cells if c.cell_type == "code") >= 2
    checks = check_cells(handout)
    assert len(checks) >= 2, f"{lesson.stem}: found {len(checks)} exercise checks"
    monkeypatch.setenv("CAPSEDU_FAST", "1")
    client = NotebookClient(handout, timeout=600, kernel_name="python3", allow_errors=True,
                            resources={"metadata": {"path": str(lesson.parent)}})
    client.execute()
    for index in checks:
        cell = handout.cells[index]
        errors = [o for o in cell.outputs if o.get("output_type") == "error"]
        assert not errors, f"{lesson.stem} cell {index} raised {errors[0]['ename']}: {errors[0]['evalue']}"
        assert f"❌ {STUB_HINT}" in text_of(cell), f"{lesson.stem} cell {index}: {text_of(cell)!r}"

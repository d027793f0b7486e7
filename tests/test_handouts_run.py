"""Every lesson's handout runs top to bottom untouched, and its Build it section is the learner's.

The handouts (``coursetools.handouts``) replace every exercise solution by a stub that raises
``NotImplementedError``. Executed top to bottom in the fast profile with no error allowed (as a
learner runs it before solving anything), every check cell after a stub must print a ❌ hint, and
the cells after a Build-it check go on with ``capsedu``'s version of the piece. The worked lesson's
stored outputs are the solved case: each of those check cells prints ✅ and no ❌. And lesson 06,
run in a learner's folder whose handouts 01-05 are solved, assembles its network from their pieces.

The handouts run **offline**, as a learner without a network and without ``CAPSEDU_DATA`` does (an
empty home, so no cached download): the lessons fall back on the offline MNIST subset, and the
example digits they pick (cells tagged ``example-digits``) are of the same classes as in the
stored outputs, made with the official split.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import nbformat
import pytest
from conftest import REPO
from nbclient import NotebookClient

from capsedu.course.checks._kit import FAILED, STUB_HINT
from coursetools.handouts import BEGIN, student_notebook

pytestmark = pytest.mark.lessons

LESSONS = sorted((REPO / "notebooks").glob("[0-9][0-9]_*.ipynb"))
CHECK_CALL = re.compile(r"\bcheck_\w+\(")
EXAMPLES_TAG = "example-digits"
EXAMPLE_LINE = "example digit"


def check_cells(notebook: nbformat.NotebookNode, marker: str = "NotImplementedError") -> list[int]:
    r"""Indices of the code cells that check an exercise: the first code cell after each stub."""
    found = []
    for index, cell in enumerate(notebook.cells):
        if cell.cell_type == "code" and marker in cell.source:
            following = next(i for i in range(index + 1, len(notebook.cells))
                             if notebook.cells[i].cell_type == "code")
            assert CHECK_CALL.search(notebook.cells[following].source), notebook.cells[following].source
            found.append(following)
    return found


def build_it_cells(notebook: nbformat.NotebookNode) -> list[nbformat.NotebookNode]:
    r"""The cells of the section headed ``## Build it``, up to the next ``## `` heading."""
    inside, cells = False, []
    for cell in notebook.cells:
        if cell.cell_type == "markdown":
            for line in cell.source.splitlines():
                if line.startswith("## "):
                    inside = line.strip() == "## Build it"
        if inside:
            cells.append(cell)
    return cells


def text_of(cell: nbformat.NotebookNode) -> str:
    return "".join(o.get("text", "") for o in cell.outputs if o.get("output_type") == "stream")


def example_lines(notebook: nbformat.NotebookNode) -> list[tuple[str, str]]:
    r"""(classes, where) of every "example digit(s): ... — ..." line printed by the cells tagged
    ``example-digits``, in order."""
    lines = []
    for cell in notebook.cells:
        if cell.cell_type == "code" and EXAMPLES_TAG in cell.metadata.get("tags", []):
            found = [line for line in text_of(cell).splitlines() if line.startswith(EXAMPLE_LINE)]
            assert found, f"a cell tagged {EXAMPLES_TAG} printed no example line:\n{cell.source[:300]}"
            lines += [tuple(line.split(" — ", 1)) for line in found]
    return lines


@pytest.mark.parametrize("lesson", [p for p in LESSONS if p.stem[:2] != "00"], ids=lambda p: p.stem)
def test_the_build_it_section_holds_the_learners_code(lesson: Path):
    worked = nbformat.read(lesson, as_version=4)
    section = build_it_cells(worked)
    assert section, f"{lesson.stem} has no '## Build it' section"
    stubs = [c for c in section if c.cell_type == "code" and BEGIN in c.source]
    assert stubs, f"{lesson.stem}: no solution block (a stub in the handout) in its Build it section"


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda p: p.stem)
def test_the_worked_lesson_passes_every_check_after_a_solution(lesson: Path):
    worked = nbformat.read(lesson, as_version=4)
    for index in check_cells(worked, marker=BEGIN):
        text = text_of(worked.cells[index])
        assert "✅" in text and "❌" not in text, f"{lesson.stem} cell {index}: {text!r}"


# One test per lesson (they spread over pytest-xdist's workers), each in its lesson's xdist_group:
# the worker that runs the lesson's nbval cells (tests/conftest.py), since both execute in notebooks/
# and lesson 06 writes and reads back checkpoints/ there.
@pytest.mark.parametrize("lesson", [pytest.param(p, id=p.stem, marks=pytest.mark.xdist_group(p.stem))
                                    for p in LESSONS])
def test_the_untouched_handout_runs_offline_to_the_end_and_every_check_hints(lesson: Path, monkeypatch,
                                                                           tmp_path):
    original = nbformat.read(lesson, as_version=4)
    handout = student_notebook(original)
    assert sum(c.source.count(BEGIN) for c in original.cells if c.cell_type == "code") >= 2
    checks = check_cells(handout)
    assert len(checks) >= 2, f"{lesson.stem}: found {len(checks)} exercise checks"
    monkeypatch.setenv("CAPSEDU_FAST", "1")
    monkeypatch.delenv("CAPSEDU_DATA", raising=False)  # offline: no data root named,
    matplotlib_cache = os.environ.get("MPLCONFIGDIR") or str(Path.home() / ".config" / "matplotlib")
    monkeypatch.setenv("MPLCONFIGDIR", matplotlib_cache)  # the font cache as before: not rebuilt per lesson
    monkeypatch.setenv("HOME", str(tmp_path))  # no cached download,
    for proxy in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY"):  # and no download
        monkeypatch.setenv(proxy, "http://127.0.0.1:9")  # (the discard port: refused at once)
    client = NotebookClient(handout, timeout=600, kernel_name="python3", allow_errors=True,
                            resources={"metadata": {"path": str(lesson.parent)}})
    client.execute()
    for index, cell in enumerate(handout.cells):
        errors = [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]
        assert not errors, (f"{lesson.stem}'s untouched handout: cell {index} raised "
                            f"{errors[0]['ename']}: {errors[0]['evalue']}\n{cell.source[:400]}")
    for index in checks:
        text = text_of(handout.cells[index])
        assert f"{FAILED} {STUB_HINT}" in text, f"{lesson.stem} cell {index}: {text!r}"
    offline, stored = example_lines(handout), example_lines(original)
    assert [classes for classes, _ in offline] == [classes for classes, _ in stored], (
        f"{lesson.stem}: offline the examples are {offline}, stored {stored}")
    assert all("offline" in where for _, where in offline), offline
    assert all("official" in where for _, where in stored), stored


def solved(lesson: Path) -> nbformat.NotebookNode:
    r"""The handout of ``lesson`` with every exercise written: each stubbed cell gets the lesson's own
    solution back, as a learner who solved them all would have it."""
    original = nbformat.read(lesson, as_version=4)
    handout = student_notebook(original)
    for mine, theirs in zip(handout.cells, original.cells, strict=True):
        if mine.cell_type == "code" and BEGIN in theirs.source:
            mine.source = theirs.source
    return handout


def test_lesson_06_assembles_the_pieces_of_the_learners_own_lessons(monkeypatch, tmp_path):
    # a learner's folder: lessons 01-05 solved in their handouts, and lesson 06 solved beside them
    for lesson in LESSONS[1:6]:
        nbformat.write(solved(lesson), tmp_path / lesson.name)
    six = solved(REPO / "notebooks" / "06_training.ipynb")
    monkeypatch.setenv("CAPSEDU_FAST", "1")
    NotebookClient(six, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    printed = "".join(text_of(cell) for cell in six.cells if cell.cell_type == "code")
    pieces = [line for line in printed.splitlines() if re.match(r"^\w+: +uses ", line)]
    assert len(pieces) == 7 and all(re.match(r"^\w+: +uses your \w+ from 0[1-5]_\w+\.ipynb$", line)
                                     for line in pieces), pieces
    assert "✅ ok — your MyCapsNet, given the shipped CapsNet's weights" in printed
    assert "→ from here on this lesson uses your MyCapsNet" in printed
    gap = re.search(r"max \|Δ\| from the shipped network: yours ([0-9.e+-]+) in the class capsules and "
                    r"([0-9.e+-]+) in the reconstructions", printed)
    assert gap and float(gap[1]) <= 1e-4 and float(gap[2]) <= 1e-4, printed
    assert (tmp_path / "checkpoints" / "my_capsnet_fast.pt").is_file()

"""The class report (coursetools/class_report.py) counts each check's verdicts in synthetic
autograded submissions exactly: passed, a named mistake, a stub, a check that raised, a cell the
learner deleted or moved, a cell that failed before its check, and a learner who did not submit."""

from __future__ import annotations

import csv

import nbformat
import pytest

from capsedu.course.checks._kit import FAILED, PASSED, TRACE_KEY
from coursetools import class_report, figure_audit

pytestmark = pytest.mark.tools

LESSON = "01_squash"
CHECKS = ("squash.check_squash", "squash.check_input_length_for", "squash.check_votes_needed")


def _cell(grade_id: str, *, solution: bool = False) -> nbformat.NotebookNode:
    cell = nbformat.v4.new_code_cell("my_answer()" if solution else f"check({grade_id!r})")
    cell.metadata["nbgrader"] = {"grade": not solution, "solution": solution, "grade_id": grade_id,
                                 **({} if solution else {"points": 1})}
    return cell


def _source() -> nbformat.NotebookNode:
    cells = [nbformat.v4.new_markdown_cell("# Lesson 01")]
    for n in (1, 2, 3):
        cells += [_cell(f"{LESSON}-exercise-{n}", solution=True), _cell(f"{LESSON}-check-{n}")]
    return nbformat.v4.new_notebook(cells=cells)


def _traced(mistake: str, hint: str, n: int) -> dict:
    mark = PASSED if mistake == "passed" else FAILED
    return nbformat.v4.new_output("display_data", data={"text/plain": f"{mark} {hint}"},
                                  metadata={TRACE_KEY: {"check": CHECKS[n - 1], "mistake": mistake}})


def _error(ename: str, evalue: str) -> dict:
    return nbformat.v4.new_output("error", ename=ename, evalue=evalue, traceback=[f"{ename}: {evalue}"])


def _submission(outputs: dict[int, list[dict]]) -> nbformat.NotebookNode:
    notebook = _source()
    for cell in notebook.cells:
        gid = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id", "")
        if "-check-" in gid:
            cell.outputs = outputs.get(int(gid.rsplit("-", 1)[1]), [])
    return notebook


SQUARED = "for p = 0.1 you returned p/(1-p) = 0.1111: that is ||s||², the squared length"
STUB = "still the stub: replace `raise NotImplementedError(...)`"


@pytest.fixture
def course(tmp_path):
    root = tmp_path / "course"
    (root / "source" / LESSON).mkdir(parents=True)
    nbformat.write(_source(), root / "source" / LESSON / f"{LESSON}.ipynb")
    ok = [_traced("passed", "right", n) for n in (1, 2, 3)]
    learners = {
        "adaL": {1: [ok[0]], 2: [ok[1]], 3: [ok[2]]},
        # grading mode: a failed check shows its verdict, then raises CheckFailed
        "graceH": {1: [ok[0]], 2: [_traced("squared-length", SQUARED, 2), _error("CheckFailed", SQUARED)],
                  3: [_traced("stub", STUB, 3), _error("CheckFailed", STUB)]},
        "linY": {1: [ok[0]], 2: [_traced("squared-length", SQUARED.replace("0.1", "0.5"), 2)],
                3: [_error("NameError", "name 'votes_needed' is not defined")]},
        "boK": {1: [_traced("raised", "your function raised TypeError: bad", 1)], 2: [], 3: [ok[2]]},
    }
    for learner, outputs in learners.items():
        folder = root / "autograded" / learner / LESSON
        folder.mkdir(parents=True)
        notebook = _submission(outputs)
        if learner == "linY":  # moved check 1's cell to the end
            cells = notebook.cells
            check1 = next(c for c in cells if c.metadata.get("nbgrader", {}).get("grade_id", "").endswith("check-1"))
            cells.remove(check1)
            cells.append(check1)
        if learner == "boK":  # deleted check 2's cell
            notebook.cells = [c for c in notebook.cells
                              if not c.metadata.get("nbgrader", {}).get("grade_id", "").endswith("check-2")]
        nbformat.write(notebook, folder / f"{LESSON}.ipynb")
    return root


def _counts(report) -> dict[str, dict[str, int]]:
    return {cell.grade_id.rsplit("-", 1)[1]: {m: len(who) for m, who, _ in cell.rows()} for cell in report.cells}


def test_counts_every_kind_of_verdict_exactly(course):
    report = class_report.lesson_report(course, LESSON, learners=["adaL", "boK", "graceH", "linY", "maxP"])
    assert report.submitted == ["adaL", "boK", "graceH", "linY"] and report.missing == ["maxP"]
    assert _counts(report) == {"1": {"passed": 3, "raised": 1},
                               "2": {"passed": 1, "squared-length": 2, "cell-missing": 1},
                               "3": {"passed": 2, "stub": 1, "cell-error": 1}}
    assert [cell.function_name for cell in report.cells] == list(CHECKS)
    rows = {m: hint for m, _, hint in report.cells[1].rows()}
    assert rows["squared-length"].startswith("for p = 0.") and "2 wordings" in rows["squared-length"]
    assert rows["cell-missing"] == class_report.NO_CHECK["cell-missing"]
    assert {m: hint for m, _, hint in report.cells[2].rows()}["cell-error"] == "NameError: name 'votes_needed' is not defined"


def test_the_pages_are_anonymous_unless_asked(course, tmp_path):
    out = tmp_path / "report"
    pages = class_report.write_reports(course, out)
    assert [p.name for p in pages] == [f"{LESSON}.html"] and (out / "index.html").is_file()
    page = pages[0].read_text()
    assert "squared-length" in page and "the squared length" in page
    assert not any(name in page for name in ("adaL", "graceH", "linY", "boK", "maxP")), "names in an anonymous report"
    with (out / f"{LESSON}.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert "names" not in rows[0]
    assert {(r["cell"].rsplit("-", 1)[1], r["verdict"]): int(r["learners"]) for r in rows}[("2", "squared-length")] == 2
    class_report.write_reports(course, out, names=True)
    with (out / f"{LESSON}.csv").open() as handle:
        named = {(r["cell"].rsplit("-", 1)[1], r["verdict"]): r["names"] for r in csv.DictReader(handle)}
    assert named[("2", "squared-length")] == "graceH linY" and "graceH, linY" in pages[0].read_text()


def test_the_chart_keeps_the_course_figure_rules(course):
    report = class_report.lesson_report(course, LESSON)
    for cell in report.cells:
        assert figure_audit.problems(class_report.bar_chart(cell, len(report.submitted))) == []


def test_bad_folders_are_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="course=.* is not an nbgrader course folder"):
        class_report.write_reports(tmp_path, tmp_path / "out")
    (tmp_path / "source").mkdir()
    with pytest.raises(FileNotFoundError, match="nothing is autograded"):
        class_report.write_reports(tmp_path, tmp_path / "out")
    with pytest.raises(FileNotFoundError, match="'02_x' an assignment"):
        class_report.lesson_report(tmp_path, "02_x")

"""nbgrader grades the lessons: the released handout scores 0, a solved one full marks.

``python -m coursetools.grading`` builds the course folder; nbgrader's own
``generate_assignment`` releases each lesson, and ``autograde`` grades three submissions of it:
the released notebook untouched (every exercise still a stub), every exercise solved (the
lesson's own solutions pasted in), and the first half solved. CI grades lessons 04 and 06 here
(about a minute each; 06 grades the learner's own CapsNet, assembled from their pieces) and lesson 01 end to end on a JupyterHub (``tests/test_hub.py``: submitted from the
browser, 2/2 and 1/2); ``make grade-all`` grades every lesson the same way.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from conftest import REPO

from coursetools import class_report
from coursetools.grading import write_course

pytestmark = pytest.mark.lessons

pytest.importorskip("nbgrader")
LESSONS = sorted(p.stem for p in (REPO / "notebooks").glob("[0-9][0-9]_*.ipynb"))
GRADED = LESSONS if os.environ.get("CAPSEDU_GRADE_ALL") == "1" else ["04_margin_loss", "06_training"]


def nbgrader(course: Path, *args: str) -> None:
    # nbgrader runs the `alembic` command of its environment: as in an activated environment,
    # that environment's bin/ comes first on PATH
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    result = subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=course,
                            env={**os.environ, "PATH": path},
                            capture_output=True, text=True, timeout=900, check=False)
    assert result.returncode == 0, f"nbgrader {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}"


def submission(released: nbformat.NotebookNode, source: nbformat.NotebookNode,
               solve: int) -> nbformat.NotebookNode:
    r"""The released notebook with its first ``solve`` exercises answered by the lesson's solutions."""
    answered = nbformat.from_dict(released)
    solutions = {c.metadata["nbgrader"]["grade_id"]: c.source for c in source.cells
                 if c.metadata.get("nbgrader", {}).get("solution")}
    for cell in answered.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id", "")
        if cell.metadata.get("nbgrader", {}).get("solution") and len(solutions) and solve > 0:
            cell.source = solutions[grade_id]
            solve -= 1
    return answered


def grade(lesson: str, course: Path) -> dict[str, tuple[float, float]]:
    write_course([REPO / "notebooks" / f"{lesson}.ipynb"], course)
    nbgrader(course, "generate_assignment", lesson, "--force")
    released = nbformat.read(course / "release" / lesson / f"{lesson}.ipynb", as_version=4)
    source = nbformat.read(course / "source" / lesson / f"{lesson}.ipynb", as_version=4)
    exercises = sum(1 for c in source.cells if c.metadata.get("nbgrader", {}).get("solution"))
    students = {"stub": 0, "half": exercises // 2, "solved": exercises}
    for student, solve in students.items():
        folder = course / "submitted" / student / lesson
        folder.mkdir(parents=True, exist_ok=True)
        nbformat.write(submission(released, source, solve), folder / f"{lesson}.ipynb")
    nbgrader(course, "autograde", lesson, "--force", "--create")
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        return {s: (gradebook.find_submission(lesson, s).score,
                    gradebook.find_submission(lesson, s).max_score) for s in students}


@pytest.mark.parametrize("lesson", GRADED)
def test_stub_scores_zero_half_scores_between_solved_scores_full(lesson, tmp_path):
    scores = grade(lesson, tmp_path / "course")
    stub, half, solved = (scores[s][0] for s in ("stub", "half", "solved"))
    maximum = scores["solved"][1]
    assert maximum >= 2 and stub == 0, scores
    assert 0 < half < maximum, scores
    assert solved == maximum, scores
    # the class report counts each check's verdicts: the stub's "stub", the half-solved learner's
    # first half passed, the solved learner's every check passed
    report = class_report.lesson_report(tmp_path / "course", lesson)
    half_done = len(report.cells) // 2
    for k, cell in enumerate(report.cells):
        verdicts = {learner: verdict.mistake for learner, verdict in cell.verdicts.items()}
        assert verdicts == {"stub": "stub", "half": "passed" if k < half_done else "stub",
                            "solved": "passed"}, (cell.grade_id, verdicts)
    print(f"{lesson}: stub {stub}/{maximum}, half {half}/{maximum}, solved {solved}/{maximum}")


def test_the_course_folder_marks_solutions_and_checks(tmp_path):
    written = write_course(sorted((REPO / "notebooks").glob("[0-9][0-9]_*.ipynb")), tmp_path)
    assert (tmp_path / "nbgrader_config.py").is_file()
    for path in written:
        notebook = nbformat.read(path, as_version=4)
        marks = [c.metadata["nbgrader"] for c in notebook.cells if "nbgrader" in c.metadata]
        solutions = [m for m in marks if m["solution"]]
        checks = [m for m in marks if m["grade"]]
        assert len(solutions) == len(checks) >= 2 and all(m["points"] == 1 for m in checks), path.name
        assert all(not c.outputs for c in notebook.cells if c.cell_type == "code")
        assert "capsedu" not in notebook.metadata and "widgets" not in notebook.metadata
    shutil.rmtree(tmp_path / "source")


def _validate(notebook: Path) -> str:
    env = {k: v for k, v in os.environ.items() if k != "CAPSEDU_GRADING"}  # a student's server sets none
    path = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    result = subprocess.run([sys.executable, "-m", "nbgrader", "validate", str(notebook)],
                            env={**env, "PATH": path, "CAPSEDU_FAST": "1"},
                            capture_output=True, text=True, timeout=600, check=False)
    return result.stdout + result.stderr


def test_validate_fails_a_wrong_answer_with_the_checks_hint(tmp_path):
    lesson = "01_squash"
    course = tmp_path / "course"
    write_course([REPO / "notebooks" / f"{lesson}.ipynb"], course)
    nbgrader(course, "generate_assignment", lesson, "--force")
    released = nbformat.read(course / "release" / lesson / f"{lesson}.ipynb", as_version=4)
    source = nbformat.read(course / "source" / lesson / f"{lesson}.ipynb", as_version=4)
    stubs = [c.source for c in released.cells if c.metadata.get("nbgrader", {}).get("solution")]
    assert 'raise NotImplementedError("write your solution here, then run the check below")' in stubs[0]
    solved = submission(released, source, solve=len(stubs))
    (tmp_path / "solved.ipynb").write_text(nbformat.writes(solved))
    assert "Success! Your notebook passes all the tests." in _validate(tmp_path / "solved.ipynb")
    wrong = nbformat.from_dict(solved)
    squash = next(c for c in wrong.cells if c.metadata.get("nbgrader", {}).get("solution"))
    assert "return scale * s" in squash.source
    squash.source = squash.source.replace("return scale * s", "return s")  # forgot to squash
    (tmp_path / "wrong.ipynb").write_text(nbformat.writes(wrong))
    report = _validate(tmp_path / "wrong.ipynb")
    assert "VALIDATION FAILED ON 1 CELL(S)!" in report, report[-2000:]
    assert "CheckFailed" in report, report[-2000:]
    assert "not yet — norms above 1" in report.split("CheckFailed")[-1], report[-2000:]  # the hint, straight after
    assert "_kit.py" not in report, report[-2000:]  # not the checks' own frames
    # what the autograder's feedback shows after a failed check (no cell after it failing for want
    # of its result) is checked on the hub's class (tests/test_hub.py: grace's autograded lesson)

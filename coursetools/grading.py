r"""An nbgrader course built from the lessons: solution cells and autograded check cells.

    python -m coursetools.grading --out build/nbgrader          # every lesson, one assignment each
    python -m coursetools.grading 01 04 --out build/nbgrader    # some lessons
    cd build/nbgrader && nbgrader generate_assignment 01_squash    # then nbgrader as usual

The lesson sources stay as they are: their solutions already sit between nbgrader's own
``### BEGIN SOLUTION`` / ``### END SOLUTION`` markers. This command copies each lesson (outputs
cleared, solutions unfolded) into ``source/NN_name/NN_name.ipynb`` of a course folder and adds
nbgrader's cell metadata: every cell holding a solution becomes a *solution* cell, and the check
cell right after it an *autograded test* cell worth one point. A locked first cell turns on the
checks' grading mode (``CAPSEDU_GRADING=1``: a failed check raises with its hint), so that
nbgrader's *Validate* in a student's server reports a wrong or unfinished exercise as the
autograder will; the learners' own handouts (:mod:`coursetools.handouts`) have no such cell and
keep printing hints without stopping. The released stub is the handouts' (``raise
NotImplementedError("write your solution here, then run the check below")``). The course's
``nbgrader_config.py`` sets ``CAPSEDU_GRADING=1`` too and
``CAPSEDU_FAST=1`` (the fast profile: grading needs the checks, not the full training runs) for
the notebooks that ``nbgrader autograde`` executes. The pages the lessons link to (the training
record) are copied into each assignment's folder, so that nbgrader releases them beside it.

Needs nbgrader only to *use* the folder (``pip install capsedu[classroom]``); building it does not.

Shape legend: none (no tensor shapes of its own).
"""

from __future__ import annotations

import argparse
import copy
import re
from collections.abc import Sequence
from pathlib import Path

import nbformat

from coursetools.handouts import BEGIN, LESSONS, STUB, copy_pages, unfold

CHECK_CALL = re.compile(r"\bcheck_\w+\(")
CHECK_ASSIGNED = re.compile(r"^([A-Za-z]\w*) = check_\w+\(", re.MULTILINE)  # result = check_squash(my_squash)
CONFIG = '''"""nbgrader configuration of the capsedu course (written by python -m coursetools.grading)."""
import os

# Failed checks raise in grading mode, so that nbgrader counts them; grading runs the fast profile.
os.environ["CAPSEDU_GRADING"] = "1"
os.environ["CAPSEDU_FAST"] = "1"

c = get_config()  # noqa: F821 - provided by nbgrader when it loads this file
c.CourseDirectory.root = os.path.dirname(os.path.abspath(__file__))
c.CourseDirectory.course_id = "capsedu"
# the exchange folder shared with the learners' servers on the hub (classroom/jupyterhub_config.py)
c.Exchange.root = os.environ.get("CAPSEDU_EXCHANGE", "/srv/nbgrader/exchange")
c.ExecutePreprocessor.timeout = 600
c.ClearSolutions.code_stub = {{"python": {stub!r}}}
'''
GRADING_CELL = '''# Graded assignment: from here on a check that fails stops with its hint, so that Validate and
# the autograder count it (in the course's own handouts the checks only print their hints).
from capsedu.course.grading_mode import turn_on

turn_on()'''


def _cell_metadata(grade_id: str, *, solution: bool) -> dict:
    return {"grade": not solution, "solution": solution, "locked": not solution, "task": False,
            "grade_id": grade_id, "schema_version": 3, **({} if solution else {"points": 1})}


def graded_notebook(notebook: nbformat.NotebookNode, name: str) -> nbformat.NotebookNode:
    r"""The lesson with nbgrader metadata on its solution and check cells, no outputs or state."""
    graded = copy.deepcopy(notebook)
    graded.metadata.pop("widgets", None)
    graded.metadata.pop("capsedu", None)
    cells = graded.cells
    for cell in cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    count = 0
    for index, cell in enumerate(cells):
        if cell.cell_type != "code" or BEGIN not in cell.source:
            continue
        count += 1
        unfold(cell)
        cell.metadata["nbgrader"] = _cell_metadata(f"{name}-exercise-{count}", solution=True)
        check = next(c for c in cells[index + 1:] if c.cell_type == "code")
        if not CHECK_CALL.search(check.source):
            raise ValueError(f"{name}: the cell after exercise {count} calls no check_*(...)")
        check.metadata["nbgrader"] = _cell_metadata(f"{name}-check-{count}", solution=False)
        if assigned := CHECK_ASSIGNED.search(check.source):  # a check that raises assigns nothing: the
            check.source = f"{assigned[1]} = None\n{check.source}"  # cells reading it see None, not a NameError
    if count == 0:
        raise ValueError(f"{name} has no exercise (no {BEGIN!r} block)")
    mode = nbformat.v4.new_code_cell(GRADING_CELL)
    mode.metadata["nbgrader"] = {**_cell_metadata(f"{name}-grading-mode", solution=False), "grade": False}
    mode.metadata["nbgrader"].pop("points")
    first_code = next(i for i, c in enumerate(cells) if c.cell_type == "code")
    cells.insert(first_code, mode)
    return graded


def write_course(lessons: Sequence[Path], out_dir: str | Path) -> list[Path]:
    r"""Write ``nbgrader_config.py`` and one source assignment per lesson into ``out_dir``."""
    if not lessons:
        raise ValueError("lessons is empty: expected at least one lesson .ipynb")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "nbgrader_config.py").write_text(CONFIG.format(stub=f"# YOUR CODE HERE\n{STUB}"))
    written = []
    for path in map(Path, lessons):
        if path.suffix != ".ipynb" or not path.is_file():
            raise FileNotFoundError(f"{path} is not a lesson notebook (.ipynb)")
        target = out / "source" / path.stem / path.name
        target.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(graded_notebook(nbformat.read(path, as_version=4), path.stem), target)
        copy_pages(target.parent, path.parent)
        written.append(target)
    return written


def _select(names: Sequence[str]) -> list[Path]:
    every = sorted(LESSONS.glob("[0-9][0-9]_*.ipynb"))
    if not names:
        return every
    chosen = [p for p in every if any(p.stem == n or p.stem.startswith(f"{n}_") for n in names)]
    if len(chosen) < len(names):
        raise SystemExit(f"not every name in {list(names)} matches a lesson: {[p.stem for p in every]}")
    return chosen


def main(argv: list[str] | None = None) -> list[Path]:
    parser = argparse.ArgumentParser(prog="python -m coursetools.grading",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("lessons", nargs="*", help="lesson numbers or names (default: all)")
    parser.add_argument("--out", type=Path, default=Path("build/nbgrader"), help="course folder")
    args = parser.parse_args(argv)
    written = write_course(_select(args.lessons), args.out)
    print(f"wrote an nbgrader course with {len(written)} assignment(s) to {args.out}/ - next: "
          f"cd {args.out} && nbgrader generate_assignment {written[0].parent.name}")
    return written


if __name__ == "__main__":
    main()

r"""Student copies of the lessons: every solution replaced by a stub, every output cleared.

Each exercise cell of a lesson holds its reference solution between a ``### BEGIN SOLUTION``
and a ``### END SOLUTION`` line (CI runs the solutions). For a class, run::

    python -m coursetools.handouts                      # all lessons -> build/student/
    python -m coursetools.handouts notebooks/01_squash.ipynb --out handout/

Inside each block the solution becomes ``# YOUR CODE HERE`` and
``raise NotImplementedError(...)`` at the block's indentation, so the learner sees where to
write, and the exercise's check prints "still the stub" until they do. The lessons fold their
solution cells away (``jupyter.source_hidden`` and the book's ``hide-input`` tag); the handout
unfolds the stubbed cells. Outputs, execution counts and saved widget state are removed: the
handout shows no answers. The pages the lessons link to beside them (``PAGES``: the training
record, the statistics page) are copied with them, so that their relative links work in the handout folder too.

Shape legend: none (no tensor shapes of its own).
"""

from __future__ import annotations

import argparse
import copy
import shutil
from collections.abc import Sequence
from pathlib import Path

import nbformat

BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
STUB = 'raise NotImplementedError("write your solution here, then run the check below")'
LESSONS = Path(__file__).resolve().parents[1] / "notebooks"  # the repository's notebooks/
PAGES = ("training_record.md", "statistics.md")  # pages beside the lessons that they link to (relative links)
WORKED_SUFFIX = ".worked.ipynb"  # a worked lesson's name: its JupyterLab tab differs from the learner's


def worked_name(lesson: str) -> str:
    r"""The file name of lesson ``lesson``'s worked copy (``"03_dynamic_routing"`` ->
    ``"03_dynamic_routing.worked.ipynb"``): open beside the learner's own, the two tabs read apart."""
    return f"{lesson}{WORKED_SUFFIX}"


def strip_solutions(source: str) -> str:
    r"""``source`` with each solution block replaced by a stub at the block's indentation."""
    lines, inside = [], False
    for number, line in enumerate(source.splitlines(), start=1):
        marker = line.strip()
        if marker == BEGIN:
            if inside:
                raise ValueError(f"line {number}: {BEGIN!r} inside another solution block")
            indent = line[: len(line) - len(line.lstrip())]
            lines += [f"{indent}# YOUR CODE HERE", f"{indent}{STUB}"]
            inside = True
        elif marker == END:
            if not inside:
                raise ValueError(f"line {number}: {END!r} without a {BEGIN!r} before it")
            inside = False
        elif not inside:
            lines.append(line)
    if inside:
        raise ValueError(f"a {BEGIN!r} block is never closed by {END!r}")
    return "\n".join(lines)


def unfold(cell: nbformat.NotebookNode) -> None:
    r"""Remove the metadata that folds a cell's source away (JupyterLab and the book)."""
    cell.metadata.get("jupyter", {}).pop("source_hidden", None)
    if not cell.metadata.get("jupyter", True):
        del cell.metadata["jupyter"]
    tags = [t for t in cell.metadata.get("tags", []) if t != "hide-input"]
    if tags:
        cell.metadata["tags"] = tags
    else:
        cell.metadata.pop("tags", None)


def without_solutions(notebook: nbformat.NotebookNode) -> nbformat.NotebookNode:
    r"""A copy of ``notebook`` with every solution stubbed and unfolded, and the outputs of those
    cells removed (the stub makes none); the other cells keep their outputs, as the website
    built without solutions shows them (book/_ext/solutions.py)."""
    copied = copy.deepcopy(notebook)
    for cell in copied.cells:
        if cell.cell_type == "code" and BEGIN in cell.source:
            unfold(cell)
            cell.source = strip_solutions(cell.source)
            cell.outputs, cell.execution_count = [], None
    return copied


def student_notebook(notebook: nbformat.NotebookNode) -> nbformat.NotebookNode:
    r"""A copy of ``notebook`` with solutions stubbed and unfolded, and no outputs or widget state."""
    handout = without_solutions(notebook)
    handout.metadata.pop("widgets", None)
    handout.metadata.pop("capsedu", None)  # the fingerprint describes the lesson's outputs, gone here
    for cell in handout.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    return handout


def copy_pages(out_dir: str | Path, lessons: Path = LESSONS) -> list[Path]:
    r"""Copy the pages the lessons link to (``PAGES``, those present in ``lessons``) into ``out_dir``
    (replacing a read-only copy); return the copies."""
    out, copied = Path(out_dir), []
    out.mkdir(parents=True, exist_ok=True)
    for name in PAGES:
        source, target = Path(lessons) / name, out / name
        if source.is_file():
            target.unlink(missing_ok=True)
            shutil.copyfile(source, target)
            copied.append(target)
    return copied


def write_student_copies(sources: Sequence[str | Path], out_dir: str | Path) -> list[Path]:
    r"""Write the student copy of each ``.ipynb`` in ``sources`` into ``out_dir``; return the paths."""
    if not sources:
        raise ValueError("sources is empty: expected at least one lesson .ipynb")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for source in map(Path, sources):
        if source.suffix != ".ipynb" or not source.is_file():
            raise FileNotFoundError(f"{source} is not a notebook file (.ipynb); expected a lesson")
        handout = student_notebook(nbformat.read(source, as_version=4))
        target = out / source.name
        nbformat.write(handout, target)
        written.append(target)
    return written


def main(argv: list[str] | None = None) -> list[Path]:
    parser = argparse.ArgumentParser(prog="python -m coursetools.handouts", description=__doc__.split("\n")[0])
    parser.add_argument("notebooks", nargs="*", type=Path,
                        help="lesson .ipynb files (default: every lesson in notebooks/)")
    parser.add_argument("--out", type=Path, default=Path("build/student"), help="output folder")
    args = parser.parse_args(argv)
    sources = args.notebooks or sorted(LESSONS.glob("[0-9][0-9]_*.ipynb"))
    if not sources:
        parser.error(f"no lessons found in {LESSONS}; pass the lesson .ipynb files to convert")
    written = write_student_copies(sources, args.out)
    copy_pages(args.out)
    print(f"wrote {len(written)} student notebook(s) to {args.out}/ (solutions stubbed, outputs cleared)")
    return written


if __name__ == "__main__":
    main()

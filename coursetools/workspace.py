r"""A learner's own workspace: the lessons to work in, the worked lessons beside them, and updates
that never overwrite what the learner wrote.

``make lab`` runs ``python -m coursetools.workspace lab``: it prepares the workspace (created on
first use, ``workspace/`` in the clone, ignored by git; ``--workspace`` or ``CAPSEDU_WORKSPACE``
choose another folder) and opens JupyterLab on it at lesson 00. The course's own files in
``notebooks/`` are never opened, so saving can never change them.

What a learner gets::

    workspace/NN_name.ipynb          the lesson, exercises to write (solutions stubbed, no outputs)
    workspace/worked/NN_name.worked.ipynb  the complete lesson with its outputs, read-only, to
                                     compare with (named apart: the two tabs read differently)
    workspace/training_record.md     how the shipped networks were trained (the lessons link to it;
                                     also in worked/), read-only, always the course's current one
    workspace/.capsedu/delivered.json  what was delivered, to recognise the learner's edits

Updating (every ``make lab``, or ``python -m coursetools.workspace update``): a new lesson is added; a lesson whose cells the learner never edited is
replaced by the new version (outputs they made are re-made by running it); a lesson the learner
edited is kept, and a changed version arrives beside it as ``NN_name.updated.ipynb``; a deleted
lesson comes back; the worked lessons are always the course's current ones. On a JupyterHub the
same files arrive through nbgitpuller instead (``coursetools/hub.py``), which merges with git:
an edited lesson is merged line by line with the new version, the learner's lines winning.

Shape legend: none (no tensor shapes of its own).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import stat
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from coursetools.handouts import LESSONS, copy_pages, student_notebook, worked_name

REPO = LESSONS.parent
DEFAULT = REPO / "workspace"
WORKSPACE_ENV = "CAPSEDU_WORKSPACE"
LEARNER_CONFIG = Path(__file__).resolve().parent / "learner_jupyter"  # hides nbgrader
# JupyterLab defaults settled in the environment: no "official Jupyter news?" prompt on the
# first screen (the course machines reach no feed), no update check.
SETTINGS = {"@jupyterlab/apputils-extension:notification": {"fetchNews": "false",
                                                             "checkForUpdates": False}}


@dataclass
class Report:
    r"""What one update did, lesson by lesson (file names)."""

    added: list[str] = field(default_factory=list)
    replaced: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)  # the learner's edits kept, new version beside
    unchanged: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        labels = {"added": "new lessons", "replaced": "updated lessons (you had not edited them)",
                  "kept": "your edited lessons kept; the new version is beside each as .updated.ipynb"}
        return [f"{label}: {', '.join(getattr(self, name))}"
                for name, label in labels.items() if getattr(self, name)]


def cell_digest(notebook: nbformat.NotebookNode) -> str:
    r"""A digest of the cells' types and sources: what a learner edits (not outputs, not metadata)."""
    text = json.dumps([[cell.cell_type, cell.source] for cell in notebook.cells])
    return hashlib.sha256(text.encode()).hexdigest()


def workspace_root(path: str | os.PathLike | None = None) -> Path:
    r"""The workspace folder: ``path``, else ``$CAPSEDU_WORKSPACE``, else ``workspace/`` in the clone."""
    return Path(path or os.environ.get(WORKSPACE_ENV) or DEFAULT).expanduser().resolve()


def write_read_only(notebook: nbformat.NotebookNode, target: Path) -> None:
    r"""Write ``notebook`` to ``target`` (replacing a read-only copy) and make it read-only."""
    if target.exists():
        target.chmod(target.stat().st_mode | stat.S_IWUSR)
    nbformat.write(notebook, target)
    target.chmod(stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH)


def deliver(lesson: Path, root: Path, delivered: dict[str, str], report: Report) -> None:
    r"""Bring ``lesson`` into the workspace at ``root`` without losing a learner's edits."""
    new = student_notebook(nbformat.read(lesson, as_version=4))
    new_digest, target = cell_digest(new), root / lesson.name
    if not target.exists():
        (report.replaced if lesson.name in delivered else report.added).append(lesson.name)
        nbformat.write(new, target)
    elif new_digest == delivered.get(lesson.name):
        report.unchanged.append(lesson.name)
    elif cell_digest(nbformat.read(target, as_version=4)) == delivered.get(lesson.name):
        nbformat.write(new, target)
        report.replaced.append(lesson.name)
    else:
        nbformat.write(new, target.with_suffix(".updated.ipynb"))
        report.kept.append(lesson.name)
    delivered[lesson.name] = new_digest


def update(root: str | os.PathLike | None = None, lessons: Path = LESSONS) -> Report:
    r"""Create or update the workspace at ``root`` from the course's ``lessons`` folder."""
    sources = sorted(Path(lessons).glob("[0-9][0-9]_*.ipynb"))
    if not sources:
        raise FileNotFoundError(f"lessons={lessons}: no lesson notebooks (NN_name.ipynb) there")
    root = workspace_root(root)
    (root / "worked").mkdir(parents=True, exist_ok=True)
    record = root / ".capsedu" / "delivered.json"
    delivered = json.loads(record.read_text()) if record.exists() else {}
    report = Report()
    current = {worked_name(lesson.stem) for lesson in sources}
    for old in (root / "worked").glob("[0-9][0-9]_*.ipynb"):  # earlier names, withdrawn lessons
        if old.name not in current:
            old.unlink()
    for lesson in sources:
        deliver(lesson, root, delivered, report)
        write_read_only(nbformat.read(lesson, as_version=4), root / "worked" / worked_name(lesson.stem))
    for folder in (root, root / "worked"):  # the lessons' relative links work in both
        for page in copy_pages(folder, lessons):
            page.chmod(stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH)
    record.parent.mkdir(exist_ok=True)
    temporary = record.with_suffix(".tmp")
    temporary.write_text(json.dumps(delivered, indent=1, sort_keys=True))
    temporary.replace(record)  # atomic: an interrupted update never loses the record
    return report


def settle_lab_settings(prefix: str | os.PathLike = sys.prefix) -> Path:
    r"""Write the course's JupyterLab defaults into the environment at ``prefix`` (idempotent)."""
    target = Path(prefix) / "share" / "jupyter" / "lab" / "settings" / "overrides.d" / "capsedu.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(SETTINGS, indent=2) + "\n"
    if not target.exists() or target.read_text() != text:
        temporary = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        temporary.write_text(text)
        temporary.replace(target)  # atomic: a JupyterLab starting meanwhile never reads half a file
    return target


def lab_command(root: Path, extra: list[str]) -> tuple[list[str], dict[str, str]]:
    r"""The JupyterLab command line and environment for a learner's workspace at ``root``."""
    first = min(p.name for p in root.glob("[0-9][0-9]_*.ipynb"))
    command = [sys.executable, "-m", "jupyterlab", f"--ServerApp.root_dir={root}",
               f"--LabApp.default_url=/lab/tree/{first}", *extra]
    paths = [str(LEARNER_CONFIG), os.environ.get("JUPYTER_CONFIG_PATH", "")]
    return command, dict(os.environ, JUPYTER_CONFIG_PATH=os.pathsep.join(filter(None, paths)))


def main(argv: list[str] | None = None) -> Report:
    parser = argparse.ArgumentParser(prog="python -m coursetools.workspace",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("action", choices=["update", "lab"],
                        help="update: create or update the workspace; lab: update, then open JupyterLab on it")
    parser.add_argument("--workspace", type=Path, help=f"folder (default ${WORKSPACE_ENV} or workspace/)")
    args, extra = parser.parse_known_args(argv)
    if extra and args.action != "lab":
        parser.error(f"unrecognised arguments: {' '.join(extra)} (only `lab` passes options to JupyterLab)")
    root = workspace_root(args.workspace)
    report = update(root)
    print(f"your workspace: {root}", *report.lines(), sep="\n  ")
    if args.action == "lab":
        settle_lab_settings()
        command, env = lab_command(root, extra)
        sys.exit(subprocess.call(command, env=env, cwd=root))
    return report


if __name__ == "__main__":
    main()

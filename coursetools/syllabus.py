r"""What the course asks of a learner's time, and the teaching plan built on it.

Each lesson states its time once, in its *Prerequisites and time* section, as
``**Time:** about N minutes``: what a learner new to capsules needs to read it, write its pieces
and run it (the basis is in the README). Everything that adds those times up reads them from
there - the README's lesson table (:mod:`coursetools.readme_tables`), the front page's total and
the syllabus's sessions (``book/_ext/course_facts.py``) - so no page drifts from a lesson.

:data:`SESSIONS` is the teaching plan (``book/syllabus.md``): four class sessions on the core
path, lessons 00-07, and two optional ones on 08-13.

Shape legend: none (no tensor shapes of its own).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

LESSONS = Path(__file__).resolve().parents[1] / "notebooks"
STATED_TIME = re.compile(r"\*\*Time:\*\* about (\d+) minutes")
CORE = tuple(f"{n:02d}" for n in range(8))  # lessons 00-07: the path every class takes


@dataclass(frozen=True)
class Session:
    title: str
    lessons: tuple[str, ...]  # lesson numbers, "00".."13"
    optional: bool = False


SESSIONS = (
    Session("What a capsule is", ("00", "01", "02")),
    Session("Routing by agreement", ("03",)),
    Session("Loss, decoder and training", ("04", "05", "06")),
    Session("What the capsules learned", ("07",)),
    Session("Capsules against a CNN, and two digits at once", ("08", "09"), optional=True),
    Session("Projects", ("10", "11", "12", "13"), optional=True),
)


def lesson_paths(lessons: Path = LESSONS) -> dict[str, Path]:
    r"""Each lesson's number (``"03"``) and its notebook, in order."""
    return {path.name[:2]: path for path in sorted(Path(lessons).glob("[0-9][0-9]_*.ipynb"))}


def stated_minutes(notebook: Path) -> int:
    r"""The minutes lesson ``notebook`` states in its ``**Time:** about N minutes`` line."""
    cells = json.loads(Path(notebook).read_text(encoding="utf-8"))["cells"]
    for cell in cells:
        if cell["cell_type"] == "markdown":
            found = STATED_TIME.search("".join(cell["source"]))
            if found:
                return int(found[1])
    raise ValueError(f"{Path(notebook).name}: no '**Time:** about N minutes' in its markdown; "
                     "each lesson states its time once, in Prerequisites and time")


def lesson_minutes(lessons: Path = LESSONS) -> dict[str, int]:
    r"""Every lesson's stated minutes, by number."""
    return {number: stated_minutes(path) for number, path in lesson_paths(lessons).items()}


def hours(minutes: int) -> str:
    r"""``875`` -> ``"about 14.5 hours"`` (half hours); under two hours in minutes."""
    if minutes < 120:
        return f"about {minutes} minutes"
    return f"about {round(minutes / 30) / 2:g} hours"

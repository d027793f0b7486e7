r"""The course's times on the site, read from the lessons (``coursetools.syllabus``).

MyST substitutions for the front page and the syllabus, so that no page types a time a lesson
does not state:

* ``{{ time_NN }}``: lesson NN's stated time (``35 min``);
* ``{{ time_total }}``, ``{{ time_core }}`` (lessons 00-07), ``{{ time_optional }}`` (08-13);
* ``{{ session_K }}``: session K of the teaching plan (1-based): its lessons and their total time.
"""

from __future__ import annotations

import sys
from pathlib import Path

from sphinx.application import Sphinx
from sphinx.config import Config

REPO = Path(__file__).resolve().parents[2]


def facts() -> dict[str, str]:
    r"""Every substitution, from the lessons' stated times."""
    if str(REPO) not in sys.path:  # the course's tools live beside the package, not in it
        sys.path.insert(0, str(REPO))
    from coursetools.syllabus import CORE, SESSIONS, hours, lesson_minutes

    minutes = lesson_minutes()
    found = {f"time_{n}": f"{m} min" for n, m in minutes.items()}
    found["time_total"] = hours(sum(minutes.values()))
    found["time_core"] = hours(sum(m for n, m in minutes.items() if n in CORE))
    found["time_optional"] = hours(sum(m for n, m in minutes.items() if n not in CORE))
    for k, session in enumerate(SESSIONS, start=1):
        missing = [n for n in session.lessons if n not in minutes]
        if missing:
            raise ValueError(f"session {k} ({session.title}) names lessons that do not exist: {missing}")
        total = sum(minutes[n] for n in session.lessons)
        lessons = ", ".join(session.lessons)
        found[f"session_{k}"] = (f"Lesson{'s' * (len(session.lessons) > 1)} {lessons}: "
                                 f"{hours(total)} of a learner's time")
    return found


def add_substitutions(app: Sphinx, config: Config) -> None:
    config.myst_substitutions = {**config.myst_substitutions, **facts()}


def setup(app: Sphinx) -> dict:
    app.connect("config-inited", add_substitutions)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}

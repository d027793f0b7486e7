r"""The site with or without the exercises' solutions.

By default the site shows each lesson whole, its exercises' solutions folded under "Show code cell
source", and says so on the front page and on every lesson page. A class that grades the
exercises publishes the edition without them (``make book-no-solutions``, which sets
``CAPSEDU_BOOK_SOLUTIONS=omit``; or ``capsedu_solutions: omit`` under ``sphinx: config:``): each
lesson is then read as the handouts are made (``coursetools.handouts.without_solutions``) -
every ``### BEGIN SOLUTION`` block becomes the stub, unfolded, and those cells' outputs go -
and what the site offers for download follows: the lesson notebooks behind each page's download
button (``_sources/``) and the course download (``book/_ext/course_download.py``).

The substitution ``{{ solutions_note }}`` is the front page's sentence on which edition this is.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import nbformat
from sphinx.application import Sphinx
from sphinx.config import Config
from sphinx.errors import ConfigError

REPO = Path(__file__).resolve().parents[2]
LESSON_DOCNAME = re.compile(r"^notebooks/\d\d_\w+$")
ENV = "CAPSEDU_BOOK_SOLUTIONS"
EDITIONS = ("show", "omit")
NOTES = {
    "show": ("This edition of the site shows the exercises' solutions: each is folded under "
             "*Show code cell source* on its lesson page. A class that grades the exercises "
             "publishes the edition without them (see the instructors' page)."),
    "omit": ("This edition of the site leaves the exercises' solutions out: each exercise shows "
             "the stub a learner starts from, as in the handouts."),
}


def _handouts():
    if str(REPO) not in sys.path:  # the course's tools live beside the package, not in it
        sys.path.insert(0, str(REPO))
    from coursetools import handouts

    return handouts


def edition(config: Config) -> str:
    r"""``"show"`` or ``"omit"``: ``CAPSEDU_BOOK_SOLUTIONS`` if set, else ``capsedu_solutions``."""
    value = os.environ.get(ENV) or config.capsedu_solutions
    if value not in EDITIONS:
        raise ConfigError(f"{ENV} / capsedu_solutions is {value!r}; expected one of {EDITIONS}")
    return value


def omitted(text: str) -> str:
    r"""A lesson notebook's JSON ``text`` without its solutions (stubs in their place)."""
    notebook = nbformat.reads(text, as_version=4)
    return nbformat.writes(_handouts().without_solutions(notebook))


def without_solutions_file(relative: Path, data: bytes) -> bytes:
    r"""A course file's bytes as the edition without solutions ships it: lesson notebooks and
    their Jupytext sources stubbed, anything else unchanged."""
    if relative.parts[:1] != ("notebooks",) or not re.match(r"\d\d_", relative.name):
        return data
    if relative.suffix == ".ipynb":
        return omitted(data.decode("utf-8")).encode("utf-8")
    if relative.suffix == ".py":
        return (_handouts().strip_solutions(data.decode("utf-8")) + "\n").encode("utf-8")
    return data


def check_edition(app: Sphinx, config: Config) -> None:
    config.capsedu_solutions = edition(config)
    config.myst_substitutions = {**config.myst_substitutions,
                                 "solutions_note": NOTES[config.capsedu_solutions]}


def strip_on_read(app: Sphinx, docname: str, source: list[str]) -> None:
    r"""source-read: the edition without solutions reads each lesson as its handout."""
    if app.config.capsedu_solutions == "omit" and LESSON_DOCNAME.match(docname):
        source[0] = omitted(source[0])


def strip_copied_sources(app: Sphinx, exception: Exception | None) -> None:
    r"""The notebooks Sphinx copied into ``_sources/`` (each page's download button) are the
    originals: replace them by the stubbed ones."""
    if exception is not None or app.builder.format != "html" or app.config.capsedu_solutions != "omit":
        return
    for copied in (Path(app.outdir) / "_sources" / "notebooks").glob("[0-9][0-9]_*.ipynb"):
        copied.write_text(omitted(copied.read_text(encoding="utf-8")), encoding="utf-8")


def setup(app: Sphinx) -> dict:
    app.add_config_value("capsedu_solutions", "show", "env", types=[str])
    app.connect("config-inited", check_edition)
    app.connect("source-read", strip_on_read)
    app.connect("build-finished", strip_copied_sources)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}

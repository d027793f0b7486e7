r"""Offer the course itself on the site: a zip of everything a learner needs, and where the code lives.

At the end of an HTML build this writes ``course/capsedu-course.zip`` into the site: the lessons
(``notebooks/``, executed, with their sources), the ``capsedu`` package with its shipped networks,
the course tools (the learner's workspace, handouts, grading), ``Makefile``, ``pyproject.toml``,
``environment.yml``, the README and the licences - what ``make lab`` needs and nothing of the
development history (no tests, benchmarks or book sources). The zip is deterministic: the same
files give the same bytes.

The repository's address is written in one place, ``repository: url:`` of ``_config.yml``
(Jupyter Book passes it on as the theme's ``repository_url``). Pages use it through the MyST
substitutions ``{{ repository }}`` (a sentence for the learner naming it; empty when none is set,
so that the page offers the download alone and says nothing about deployments) and
``{{ course_zip }}`` (the download link); ``{{ version }}`` is the course's version. The edition
without solutions (book/_ext/solutions.py) ships its lessons stubbed in the download too.
"""

from __future__ import annotations

import ast
import zipfile
from collections.abc import Callable
from pathlib import Path

from sphinx.application import Sphinx
from sphinx.config import Config

REPO = Path(__file__).resolve().parents[2]
TARGET = Path("course") / "capsedu-course.zip"
CONTENTS = ("README.md", "LICENSE", "LICENSE-CONTENT.md", "Makefile", "pyproject.toml",
            "environment.yml", "capsedu", "coursetools", "notebooks")
SKIPPED_PARTS = {"__pycache__", ".ipynb_checkpoints", "checkpoints", ".pytest_cache"}
FIXED_TIME = (2020, 1, 1, 0, 0, 0)  # zip entries carry no build time, so the bytes repeat


def course_files(repo: Path = REPO) -> list[Path]:
    r"""Every file the download holds, relative to ``repo``, sorted."""
    files = []
    for name in CONTENTS:
        path = repo / name
        if not path.exists():
            raise FileNotFoundError(f"{path}: the course download needs it")
        found = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]
        files += [p.relative_to(repo) for p in found
                  if not SKIPPED_PARTS & set(p.relative_to(repo).parts) and p.suffix != ".pyc"]
    return sorted(files)


def write_course_zip(target: Path, repo: Path = REPO,
                     transform: Callable[[Path, bytes], bytes] | None = None) -> Path:
    r"""Write the course download to ``target`` (inside a ``capsedu-course/`` folder); ``transform``
    (relative path, bytes) -> bytes changes what a file holds (the edition without solutions)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(target, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for relative in course_files(repo):
            entry = zipfile.ZipInfo(f"capsedu-course/{relative.as_posix()}", FIXED_TIME)
            entry.external_attr = 0o644 << 16
            entry.compress_type = zipfile.ZIP_DEFLATED
            data = (repo / relative).read_bytes()
            archive.writestr(entry, transform(relative, data) if transform else data)
    return target


def course_version(repo: Path = REPO) -> str:
    r"""``capsedu.__version__``, read from ``capsedu/_version.py`` without importing the package."""
    tree = ast.parse((repo / "capsedu" / "_version.py").read_text(encoding="utf-8"))
    return next(node.value.value for node in tree.body if isinstance(node, ast.Assign)
                and [t.id for t in node.targets if isinstance(t, ast.Name)] == ["__version__"])


def add_substitutions(app: Sphinx, config: Config) -> None:
    url = (config.html_theme_options or {}).get("repository_url", "")
    repository = f"Or clone the course's repository: <{url}>." if url else ""
    config.myst_substitutions = {**config.myst_substitutions, "repository": repository,
                                 "version": course_version(),
                                 "course_zip": f'<a href="{TARGET.as_posix()}" download>capsedu-course.zip</a>'}


def write_download(app: Sphinx, exception: Exception | None) -> None:
    if exception is None and app.builder.format == "html":
        transform = None
        if getattr(app.config, "capsedu_solutions", "show") == "omit":
            from solutions import without_solutions_file  # book/_ext/solutions.py

            transform = without_solutions_file
        write_course_zip(Path(app.outdir) / TARGET, transform=transform)


def setup(app: Sphinx) -> dict:
    app.connect("config-inited", add_substitutions)
    app.connect("build-finished", write_download)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}

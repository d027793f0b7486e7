r"""Each lesson's figures for slides: vector PDFs in one zip per lesson, linked from the syllabus.

``coursetools.execute`` stores every inline figure of a lesson twice: as PNG, which the lesson
page shows, and as PDF (``application/pdf``), which prints sharp at any size. At the end of an
HTML build this writes, for each lesson, ``figures/NN_name-figures.zip`` into the site: its
figures as ``NN_name-figK.pdf`` in the order the lesson shows them (``.png`` for the few that
are pictures, such as an explorer's snapshot, which have no vector copy), and ``figures.txt`` naming
each file with the figure's text alternative (the cell's ``mystnb.image.alt``, a ready speaker's
note) and the licence. The zip is deterministic: the same notebooks give the same bytes.

Pages at the site's root link a lesson's zip with the MyST substitution ``{{ figures_NN }}``
(``{{ figures_03 }}``: a download link naming how many figures it holds).
"""

from __future__ import annotations

import base64
import json
import re
import zipfile
from pathlib import Path

from sphinx.application import Sphinx
from sphinx.config import Config

REPO = Path(__file__).resolve().parents[2]
NOTEBOOKS = REPO / "notebooks"
FOLDER = Path("figures")
PDF, PNG = "application/pdf", "image/png"
FIXED_TIME = (2020, 1, 1, 0, 0, 0)  # zip entries carry no build time, so the bytes repeat
LICENCE = ("Licence: CC BY 4.0 (the capsedu authors); figures that show MNIST digits are shared "
           "under CC BY-SA 3.0, like MNIST (Y. LeCun, C. Cortes, C. J. C. Burges). See "
           "LICENSE-CONTENT.md in the course.")


def lesson_notebooks(notebooks: Path = NOTEBOOKS) -> list[Path]:
    r"""The lesson notebooks (``NN_name.ipynb``), in order."""
    return sorted(notebooks.glob("[0-9][0-9]_*.ipynb"))


def lesson_figures(notebook: Path) -> list[tuple[str, bytes, str]]:
    r"""Each figure ``notebook`` shows, in order: (suffix, bytes, alt text) - its PDF copy where
    it has one (matplotlib's figures), else the PNG itself (a picture such as an explorer's
    snapshot)."""
    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    found = []
    for cell in cells:
        alt = cell.get("metadata", {}).get("mystnb", {}).get("image", {}).get("alt", "")
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            if PNG in data:
                mime, suffix = (PDF, ".pdf") if PDF in data else (PNG, ".png")
                text = data[mime] if isinstance(data[mime], str) else "".join(data[mime])
                found.append((suffix, base64.b64decode(text), alt))
    return found


def zip_name(notebook: Path) -> str:
    return f"{notebook.stem}-figures.zip"


def write_figures_zip(notebook: Path, target: Path) -> int:
    r"""Write ``notebook``'s figures for slides to the zip ``target``; return how many it holds."""
    figures = lesson_figures(notebook)
    index = [f"Figures of lesson {notebook.stem}, in the order the lesson shows them: vector PDFs, and "
             "PNG where a figure is a picture (an explorer's snapshot).",
             LICENCE, ""]
    target.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(target, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for k, (suffix, data, alt) in enumerate(figures, start=1):
            name = f"{notebook.stem}-fig{k}{suffix}"
            _write(archive, f"{notebook.stem}-figures/{name}", data)
            index += [f"{name}: {alt or '(no text alternative)'}", ""]
        _write(archive, f"{notebook.stem}-figures/figures.txt", "\n".join(index).encode("utf-8"))
    return len(figures)


def _write(archive: zipfile.ZipFile, name: str, data: bytes) -> None:
    entry = zipfile.ZipInfo(name, FIXED_TIME)
    entry.external_attr = 0o644 << 16
    entry.compress_type = zipfile.ZIP_DEFLATED
    archive.writestr(entry, data)


def add_substitutions(app: Sphinx, config: Config) -> None:
    r"""``{{ figures_NN }}``: the download link of lesson NN's figures (from a root-level page)."""
    links = {}
    for notebook in lesson_notebooks():
        count = len(lesson_figures(notebook))
        number = re.match(r"\d\d", notebook.stem)[0]
        href = (FOLDER / zip_name(notebook)).as_posix()
        links[f"figures_{number}"] = (f'<a href="{href}" download>{notebook.stem} figures</a> '
                                      f"({count} figure{'s' * (count != 1)})")
    config.myst_substitutions = {**config.myst_substitutions, **links}


def write_all(app: Sphinx, exception: Exception | None) -> None:
    if exception is None and app.builder.format == "html":
        for notebook in lesson_notebooks():
            write_figures_zip(notebook, Path(app.outdir) / FOLDER / zip_name(notebook))


def setup(app: Sphinx) -> dict:
    app.connect("config-inited", add_substitutions)
    app.connect("build-finished", write_all)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}

r"""How to cite the course, written from ``CITATION.cff`` (the one place its metadata lives).

The directive ``{cff-citation}`` renders the citation as a sentence (APA style) and as a BibTeX
entry, both from the repository's ``CITATION.cff``, so the site's "how to cite" page and GitHub's
"Cite this repository" say the same. (``cffconvert``, the Citation File Format's own converter,
pins jsonschema 3, which Jupyter's packages cannot share; the fields a citation needs are few.)
"""

from __future__ import annotations

import datetime
from pathlib import Path

import yaml
from docutils import nodes
from sphinx.application import Sphinx
from sphinx.util.docutils import SphinxDirective

REPO = Path(__file__).resolve().parents[2]


def read_cff(path: Path = REPO / "CITATION.cff") -> dict:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def _authors(cff: dict) -> list[str]:
    r"""Each author as BibTeX wants it: ``Family, Given``, or ``{Name}`` for an entity."""
    return [f"{a['family-names']}, {a['given-names']}" if "family-names" in a else f"{{{a['name']}}}"
            for a in cff["authors"]]


def released(cff: dict) -> datetime.date:
    return datetime.date.fromisoformat(str(cff["date-released"]))


def bibtex(cff: dict) -> str:
    r"""A BibTeX ``@misc`` entry for the software ``cff`` describes."""
    date = released(cff)
    fields = {"title": cff["title"], "author": " and ".join(_authors(cff)),
              "year": str(date.year), "month": date.strftime("%b").lower(),
              "note": f"Version {cff['version']}"}
    if cff.get("repository-code"):
        fields["howpublished"] = f"\\url{{{cff['repository-code']}}}"
    key = f"capsedu{date.year}"
    body = ",\n".join(f"  {name:<12} = {{{value}}}" if name != "month" else f"  {name:<12} = {value}"
                      for name, value in fields.items())
    return f"@misc{{{key},\n{body}\n}}"


def sentence(cff: dict) -> str:
    r"""The citation in APA style."""
    names = [a.get("name") or f"{a['family-names']}, {a['given-names'][0]}." for a in cff["authors"]]
    where = f" {cff['repository-code']}" if cff.get("repository-code") else ""
    return (f"{', '.join(names)} ({released(cff).year}). {cff['title']} (Version {cff['version']}) "
            f"[Computer software].{where}")


class CffCitation(SphinxDirective):
    has_content = False

    def run(self) -> list[nodes.Node]:
        path = REPO / "CITATION.cff"
        self.env.note_dependency(str(path))
        cff = read_cff(path)
        return [nodes.paragraph(text=sentence(cff)),
                nodes.literal_block(text=bibtex(cff), language="bibtex")]


def setup(app: Sphinx) -> dict:
    app.add_directive("cff-citation", CffCitation)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}

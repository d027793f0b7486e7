r"""Put a "run this lesson live" note at the top of every lesson page.

A lesson page of the book is a snapshot of the notebook as it was last run. The note tells the
reader how to open the lesson in JupyterLab; on pages whose notebook embeds ipywidgets state it
also says what moves on the page: the explorers' frames (``capsedu.explore.frames``, linked in
the browser) move without a kernel, the live explorers need JupyterLab; where the state holds
only controls that need a kernel, that they show their saved state only.

Lessons are the documents named ``notebooks/NN_name`` (two digits, underscore).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from docutils import nodes
from sphinx import addnodes
from sphinx.application import Sphinx

LESSON_DOCNAME = re.compile(r"^notebooks/(\d\d_[A-Za-z0-9_]+)$")
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
CONTROL_MODEL = re.compile(
    r"Slider|Button|Dropdown|Checkbox|Text|Toggle|Select|Picker|Play|Radio|Combobox"
)


def saved_widgets(notebook: Path) -> str:
    """What the notebook's embedded widget state holds: ``"frames"`` when it links controls to
    frames in the browser (``jslink``: capsedu.explore.frames), ``"controls"`` when it holds
    only controls a reader could move but that need a kernel (a slider, button, text box...),
    ``""`` otherwise (progress bars and output areas alone do not count)."""
    metadata = json.loads(notebook.read_text(encoding="utf-8")).get("metadata", {})
    state = metadata.get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    names = [model.get("model_name", "") for model in state.values()]
    if "LinkModel" in names:
        return "frames"
    return "controls" if any(CONTROL_MODEL.search(name) for name in names) else ""


def _paragraph(*parts: str | nodes.Node) -> nodes.paragraph:
    para = nodes.paragraph()
    for part in parts:
        para += nodes.Text(part) if isinstance(part, str) else part
    return para


def setup_link(docname: str) -> addnodes.pending_xref:
    """A link to the Setup page that Sphinx resolves (and checks) like {doc}`/setup`."""
    xref = addnodes.pending_xref("", refdomain="std", reftype="doc", reftarget="/setup",
                                 refexplicit=True, refdoc=docname, refwarn=True)
    xref += nodes.inline(text="Setup")
    return xref


def live_note(docname: str, stem: str, widgets: str, repository: str = "",
              solutions: str = "show") -> nodes.admonition:
    """The admonition shown under a lesson's title: where the learner runs this lesson (the
    workspace that ``make lab`` opens, never the course's own ``notebooks/``), the repository
    when the site names one, and whether this edition shows the exercises' solutions."""
    note = nodes.admonition(classes=["tip", "capsedu-live-note"])
    note += nodes.title(text="Run this lesson live")
    where = [" in the course's folder (", setup_link(docname), " says how to get it and what it needs"]
    if repository:
        where += ["; the repository is ", nodes.reference(repository, repository, refuri=repository)]
    note += _paragraph(
        "This page shows the lesson as it was last run. To do its exercises yourself, run ",
        nodes.literal(text="make lab"), *where, "). JupyterLab opens your workspace: this lesson "
        "is ", nodes.literal(text=f"workspace/{stem}.ipynb"), ", with the exercises left for you "
        "to write, and ", nodes.literal(text=f"workspace/worked/{stem}.worked.ipynb"),
        " is the complete lesson to compare with.",
    )
    if repository and solutions == "show":
        note += _paragraph(
            "Without installing anything: the Binder button above opens this lesson in a workspace "
            "like make lab's, on a free temporary server (a few minutes to start; nothing is kept). "
            "Where the repository is on GitHub, the Colab button opens the lesson's notebook itself, "
            "solutions and outputs included; add a first cell ",
            nodes.literal(text=f'%pip install "capsedu @ git+{repository}"'),
            " and run it before the others (lesson 13 also needs ",
            nodes.literal(text="%pip install --no-deps torchattacks==3.5.1"),
            "). Both were built for but not tried from this site."
        )
    note += _paragraph(
        "The exercises' solutions are on this page, folded under \u201cShow code cell source\u201d: "
        "write your own before you open them." if solutions == "show" else
        "This edition of the site leaves the exercises' solutions out: each exercise shows the "
        "stub you start from."
    )
    if widgets == "frames":
        note += _paragraph(
            "The explorers on this page move without a kernel: each holds pictures computed when "
            "the lesson ran, and where they cover only part of what the live explorer offers, the "
            "line under its sliders says which image and positions. The live explorers - any "
            "image, any position, several sliders at once - run in JupyterLab only, where each "
            "move recomputes the picture."
        )
    elif widgets:
        note += _paragraph(
            "The interactive controls on this page show their saved state only: without a "
            "running kernel, moving them changes nothing. The static figures next to them "
            "show the same results; open the lesson in JupyterLab to explore live."
        )
    return note


def add_live_note(app: Sphinx, doctree: nodes.document) -> None:
    """doctree-read: insert the note after the first title of every lesson page."""
    match = LESSON_DOCNAME.match(app.env.docname)
    if match is None:
        return
    widgets = saved_widgets(Path(app.env.doc2path(app.env.docname)))
    section = next(iter(doctree.findall(nodes.section)), None)
    if section is None or not isinstance(section[0], nodes.title):
        return
    repository = (app.config.html_theme_options or {}).get("repository_url", "")
    solutions = getattr(app.config, "capsedu_solutions", "show")
    section.insert(1, live_note(app.env.docname, match.group(1), widgets, repository, solutions))


def setup(app: Sphinx) -> dict:
    app.connect("doctree-read", add_live_note)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}

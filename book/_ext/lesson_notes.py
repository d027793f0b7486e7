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


def live_note(docname: str, stem: str, widgets: str) -> nodes.admonition:
    """The admonition shown under a lesson's title."""
    note = nodes.admonition(classes=["tip", "capsedu-live-note"])
    note += nodes.title(text="Run this lesson live")
    note += _paragraph(
        "This page shows the lesson as it was last run. To run and change it yourself, open a "
        "terminal in a clone of the repository, run ",
        nodes.literal(text="make lab"),
        " and open ",
        nodes.literal(text=f"notebooks/{stem}.ipynb"),
        " in JupyterLab (see ",
        setup_link(docname),
        ").",
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
    section.insert(1, live_note(app.env.docname, match.group(1), widgets))


def setup(app: Sphinx) -> dict:
    app.connect("doctree-read", add_live_note)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}

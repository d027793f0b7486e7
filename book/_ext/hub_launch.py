r"""Open a lesson on your class's JupyterHub: a launch button on every lesson page, when configured.

An instructor who runs a hub (``make hub``, ``classroom/README.md``) sets two values under
``sphinx: config:`` in ``_config.yml``::

    capsedu_hub_url: https://hub.example.org            # the hub's address
    capsedu_learner_repository: git://hub.example.org/capsedu-learner   # what nbgitpuller pulls

and each lesson page gets a *Your class hub* button in its header: the nbgitpuller link of
``coursetools.hub.pull_link``, the one ``make hub`` prints and the hub test follows, opening that
lesson - the learner's copy with its exercises stubbed, pulled into ``~/capsedu`` - not the course's
repository with its solutions (which is what the theme's own JupyterHub button would pull). Empty
values (the default): no button.

A Binder button (the theme's) appears only where ``repository: url:`` names a repository: the
theme fails the build when its Binder button is configured without one, so ``capsedu_binderhub_url``
is handed to it only then.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from sphinx.application import Sphinx

REPO = Path(__file__).resolve().parents[2]
LESSON_PAGE = re.compile(r"^notebooks/(\d\d_\w+)$")


def hub_link(hub_url: str, learner_repository: str, pagename: str) -> str | None:
    r"""The nbgitpuller link that opens lesson page ``pagename`` on the hub; None for other pages
    or when the hub is not configured."""
    lesson = LESSON_PAGE.match(pagename)
    if not (hub_url and learner_repository and lesson):
        return None
    if str(REPO) not in sys.path:  # the course's tools live beside the package, not in it
        sys.path.insert(0, str(REPO))
    from coursetools.hub import pull_link

    return pull_link(hub_url, learner_repository, open_path=f"{lesson[1]}.ipynb")


def add_hub_button(app: Sphinx, pagename: str, templatename: str, context: dict, doctree) -> None:
    r"""Put the *Your class hub* button among the page's header buttons (after the theme's)."""
    link = hub_link(app.config.capsedu_hub_url, app.config.capsedu_learner_repository, pagename)
    if link is None or "header_buttons" not in context:
        return
    context["header_buttons"].append({
        "type": "link", "text": "Your class hub", "label": "capsedu-hub-launch", "url": link,
        "tooltip": "Open this lesson on your class's JupyterHub", "icon": "fas fa-rocket"})


def binder_when_a_repository_is_named(app: Sphinx, config) -> None:
    r"""Give the theme's launch buttons ``capsedu_binderhub_url``, if ``repository_url`` is set."""
    theme = config.html_theme_options
    if theme.get("repository_url") and config.capsedu_binderhub_url:
        theme.setdefault("launch_buttons", {})["binderhub_url"] = config.capsedu_binderhub_url


def setup(app: Sphinx) -> dict:
    app.add_config_value("capsedu_hub_url", "", "html", types=[str])
    app.add_config_value("capsedu_learner_repository", "", "html", types=[str])
    app.add_config_value("capsedu_binderhub_url", "", "html", types=[str])
    app.connect("config-inited", binder_when_a_repository_is_named)
    app.connect("html-page-context", add_hub_button, priority=600)  # the theme's buttons exist by then
    return {"parallel_read_safe": True, "parallel_write_safe": True}

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

Where ``repository: url:`` names the course's public repository, each lesson page also gets a
*Binder* button (``capsedu_binderhub_url``, mybinder.org by default: repo2docker builds
``environment.yml``, and ``postBuild`` makes the learner's workspace, so the button opens
``workspace/NN_name.ipynb`` as ``make lab`` would) and, for a GitHub repository, a *Colab* button
(Colab opens the course's notebook itself, solutions and outputs included, and has no capsedu
until the learner installs it from the repository; the lesson's note says how). The theme's own
launch buttons are not used: they would open ``book/notebooks/``, a link Colab cannot follow,
rather than the workspace. The edition without solutions (book/_ext/solutions.py) shows neither:
both hand out the whole repository.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from urllib.parse import quote, urlsplit

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


def github_parts(repository: str) -> tuple[str, str] | None:
    r"""(owner, name) of a ``https://github.com/OWNER/NAME`` address, else None."""
    parts = urlsplit(repository)
    path = parts.path.strip("/").removesuffix(".git").split("/")
    return (path[0], path[1]) if parts.netloc == "github.com" and len(path) == 2 else None


def binder_link(binderhub: str, repository: str, branch: str, pagename: str) -> str | None:
    r"""The Binder link that opens lesson page ``pagename`` in the learner's workspace; None for
    other pages or without a repository."""
    lesson = LESSON_PAGE.match(pagename)
    if not (binderhub and repository and lesson):
        return None
    github = github_parts(repository)
    spec = f"gh/{github[0]}/{github[1]}/{branch}" if github else f"git/{quote(repository, safe='')}/{branch}"
    return f"{binderhub.rstrip('/')}/v2/{spec}?urlpath={quote(f'lab/tree/workspace/{lesson[1]}.ipynb', safe='')}"


def colab_link(repository: str, branch: str, pagename: str) -> str | None:
    r"""The Colab link that opens lesson page ``pagename``'s notebook from a GitHub repository."""
    lesson, github = LESSON_PAGE.match(pagename), github_parts(repository)
    if not (lesson and github):
        return None
    return (f"https://colab.research.google.com/github/{github[0]}/{github[1]}/blob/{branch}/"
            f"notebooks/{lesson[1]}.ipynb")


def add_cloud_buttons(app: Sphinx, pagename: str, templatename: str, context: dict, doctree) -> None:
    r"""*Binder* and *Colab* buttons on a lesson page of the edition with solutions, when the site
    names a repository."""
    theme = app.config.html_theme_options or {}
    repository, branch = theme.get("repository_url", ""), theme.get("repository_branch") or "main"
    if "header_buttons" not in context or getattr(app.config, "capsedu_solutions", "show") != "show":
        return
    for text, link, tip in (
            ("Binder", binder_link(app.config.capsedu_binderhub_url, repository, branch, pagename),
             "Open this lesson in your workspace on Binder (free, temporary, a few minutes to start)"),
            ("Colab", colab_link(repository, branch, pagename),
             "Open this lesson's notebook on Google Colab (install capsedu first: see the note)")):
        if link:
            context["header_buttons"].append({"type": "link", "text": text, "url": link, "tooltip": tip,
                                              "label": f"capsedu-{text.lower()}-launch", "icon": "fas fa-rocket"})


def setup(app: Sphinx) -> dict:
    app.add_config_value("capsedu_hub_url", "", "html", types=[str])
    app.add_config_value("capsedu_learner_repository", "", "html", types=[str])
    app.add_config_value("capsedu_binderhub_url", "", "html", types=[str])
    app.connect("html-page-context", add_hub_button, priority=600)  # the theme's buttons exist by then
    app.connect("html-page-context", add_cloud_buttons, priority=600)
    return {"parallel_read_safe": True, "parallel_write_safe": True}

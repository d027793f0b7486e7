r"""Every page's JavaScript runs without an error in the browser console.

Two fixes for what the site's parts do to each other (tests/test_book.py fails on any console
error or uncaught exception):

- **Each script once.** sphinx-thebe and sphinx-togglebutton add inline scripts (no file name)
  after the HTML builder started; Sphinx 7.4 keeps them once as the file name ``None`` and again,
  from its registry, as ``''``, so every page declared ``const THEBE_JS_URL`` twice
  ("Identifier 'THEBE_JS_URL' has already been declared"). A page's scripts are de-duplicated
  on ``html-page-context``, the first of each kept.
- **MathJax 2's API for the widget manager.** The ipywidgets HTML manager typesets widget labels
  through ``MathJax.Hub.Queue`` (MathJax 2); the site loads MathJax 3, which has no ``Hub``, so
  every page with a slider threw "Cannot read properties of undefined (reading 'Queue')".
  ``_static/mathjax2-bridge.js`` gives MathJax 3 a ``Hub.Queue`` that calls ``typesetPromise``
  (Jupyter Book adds every ``.js`` file of ``book/_static`` to every page).
"""

from __future__ import annotations

from sphinx.application import Sphinx


def _key(script) -> tuple:
    r"""What makes two of a page's script entries the same: file name and attributes (an inline
    script's text is its ``body`` attribute)."""
    return script.filename or "", tuple(sorted(script.attributes.items()))


def scripts_once(app: Sphinx, pagename: str, templatename: str, context: dict, doctree) -> None:
    r"""Drop repeated entries from the page's ``script_files``, keeping each first one."""
    seen, kept = set(), []
    for script in context.get("script_files", []):
        if _key(script) not in seen:
            seen.add(_key(script))
            kept.append(script)
    context["script_files"] = kept


def setup(app: Sphinx) -> dict:
    app.connect("html-page-context", scripts_once, priority=900)  # after the others add theirs
    return {"parallel_read_safe": True, "parallel_write_safe": True}

r"""What the HTML writer gets wrong for WCAG 2.1 AA (tests/test_book.py runs axe-core on every page).

- **Bibliography entries.** docutils writes a citation list as ``<div role="list">`` holding
  ``<div role="doc-biblioentry">`` entries: DPUB-ARIA 1.1 deprecates ``doc-biblioentry``, and a
  list must hold list items, so screen readers announce a broken list (axe: aria-deprecated-role,
  aria-required-children). Each entry becomes a ``listitem``.

The widgets' names, alt texts and keyboard stops are added in the browser, where the widget manager
draws them (``_static/widget-a11y.js``).
"""

from __future__ import annotations

from sphinx.application import Sphinx

BIBLIOENTRY = 'role="doc-biblioentry"'


def list_items(app: Sphinx, pagename: str, templatename: str, context: dict, doctree) -> None:
    r"""Bibliography entries as list items in the page's body."""
    if BIBLIOENTRY in context.get("body", ""):
        context["body"] = context["body"].replace(BIBLIOENTRY, 'role="listitem"')


def setup(app: Sphinx) -> dict:
    app.connect("html-page-context", list_items)
    return {"parallel_read_safe": True, "parallel_write_safe": True}

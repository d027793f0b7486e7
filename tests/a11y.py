"""axe-core (Deque's accessibility rules) for the browser tests: the site's pages and JupyterLab.

axe-core comes from the npm registry like the book's other assets: pinned, checked against its
published integrity and cached (``book/_ext/offline_assets.py``), so the tests need no network
once it is cached. :data:`AXE_RUN` runs the WCAG 2.0/2.1 A and AA rules on the page it is
injected into and returns each violation with its elements.
"""

from __future__ import annotations

import sys
import tarfile
from pathlib import Path

BOOK_EXT = Path(__file__).resolve().parents[1] / "book" / "_ext"
SPEC, TARBALL, MEMBER = "axe-core@4.10.2", "axe-core-4.10.2.tgz", "package/axe.min.js"
INTEGRITY = "sha512-RE3mdQ7P3FRSe7eqCWoeQ/Z9QXrtniSjp1wUjt5nRC3WIpz5rSCve6o3fsZ2aCpJtrZjSZgjwXAoTO5k4tEI0w=="
AXE_RUN = """async () => (await axe.run(document, {runOnly: {type: 'tag',
    values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa']}})).violations
  .map(v => ({rule: v.id, count: v.nodes.length, example: v.nodes[0].html.slice(0, 160),
              nodes: v.nodes.map(n => ({html: n.html.slice(0, 160),
                                        inOutput: !!document.querySelector(n.target[0])
                                          && !!document.querySelector(n.target[0]).closest('.jp-OutputArea-output')}))}))"""


def axe_script() -> str:
    """The text of axe.min.js, fetched once with ``npm pack`` and verified."""
    sys.path.insert(0, str(BOOK_EXT))
    try:
        import offline_assets
    finally:
        sys.path.remove(str(BOOK_EXT))
    asset = offline_assets.NpmAsset(SPEC, TARBALL, INTEGRITY, "", "", ())
    with tarfile.open(offline_assets.fetch_tarball(asset, offline_assets.default_cache())) as archive:
        return archive.extractfile(MEMBER).read().decode("utf-8")

r"""Serve MathJax and the ipywidgets HTML manager from the built site, not from a CDN.

The book must work with the network cut, so the JavaScript that Sphinx and myst-nb would load
from jsdelivr/cdnjs is fetched at build time from the npm registry with ``npm pack`` (pinned
versions, checked against their published sha512 integrity), kept in a cache so later builds
need no network, and unpacked into ``_static/vendor/`` of the HTML output:

- ``vendor/mathjax/``: MathJax 3 (``tex-mml-chtml.js``, its TeX extensions, CHTML fonts,
  menu and accessibility components) — ``mathjax_path`` in ``_config.yml`` points here.
- ``vendor/html-manager/``: ``@jupyter-widgets/html-manager``'s standalone ``embed.js`` and
  its icon fonts, which render the widget state that executed notebooks embed —
  ``nb_ipywidgets_js`` in ``_config.yml`` points here.

Config values (``sphinx: config:`` in ``_config.yml``):
``offline_assets_cache``: folder for the npm tarballs; default ``$CAPSEDU_BOOK_CACHE``, else
``~/.cache/capsedu/book-assets``.
"""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import subprocess
import tarfile
from dataclasses import dataclass
from pathlib import Path

from sphinx.application import Sphinx
from sphinx.errors import ExtensionError
from sphinx.util import logging

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class NpmAsset:
    """One pinned npm package and the parts of it that the site serves."""

    spec: str  # name@version as given to `npm pack`
    tarball: str  # the file name `npm pack` writes
    integrity: str  # the registry's sha512 integrity string
    target: str  # folder under _static/vendor/
    prefix: str  # folder inside the tarball that becomes `target`
    keep: tuple[str, ...]  # paths under `prefix` to copy (files or folders)


ASSETS = (
    NpmAsset(
        spec="mathjax@3.2.2",
        tarball="mathjax-3.2.2.tgz",
        integrity="sha512-Bt+SSVU8eBG27zChVewOicYs7Xsdt40qm4+UpHyX7k0/"
        "O9NliPc+x77k1/FEsPsjKPZGJvtRZM1vO+geW0OhGw==",
        target="mathjax",
        prefix="package/es5/",
        keep=(
            "tex-mml-chtml.js",
            "input/tex/extensions/",
            "input/mml/extensions/",
            "output/chtml/fonts/woff-v2/",
            "ui/",
            "a11y/",
            "sre/",
        ),
    ),
    NpmAsset(
        spec="@jupyter-widgets/html-manager@1.0.15",
        tarball="jupyter-widgets-html-manager-1.0.15.tgz",
        integrity="sha512-5thBIV6ymNgmPVOHvzx+gGy8ZSKmSazhtGw4/"
        "c4xJDVzRhG9PTeQsRjF3FUTopvFi//SABeNz1yp47bCrJ3CQA==",
        target="html-manager",
        prefix="package/dist/",
        keep=("embed.js", "embed.js.LICENSE.txt", ".woff2", ".woff"),
    ),
)


def default_cache() -> Path:
    """Where the npm tarballs are kept between builds."""
    if os.environ.get("CAPSEDU_BOOK_CACHE"):
        return Path(os.environ["CAPSEDU_BOOK_CACHE"])
    return Path.home() / ".cache" / "capsedu" / "book-assets"


def sha512_integrity(path: Path) -> str:
    """npm's integrity string (``sha512-`` + base64 digest) of a file."""
    digest = hashlib.sha512(path.read_bytes()).digest()
    return "sha512-" + base64.b64encode(digest).decode("ascii")


def fetch_tarball(asset: NpmAsset, cache: Path) -> Path:
    """Return the verified tarball of ``asset``, running ``npm pack`` when it is not cached."""
    path = cache / asset.tarball
    if path.is_file() and sha512_integrity(path) == asset.integrity:
        return path
    npm = shutil.which("npm")
    if npm is None:
        raise ExtensionError(
            f"npm not found: the book serves {asset.spec} from its own files and fetches it "
            f"from the npm registry with `npm pack`. Install Node.js/npm (Debian: "
            f"`apt-get install npm`) or put {asset.tarball} into {cache}."
        )
    cache.mkdir(parents=True, exist_ok=True)
    logger.info(f"offline_assets: npm pack {asset.spec} -> {cache}")
    result = subprocess.run(
        [npm, "pack", asset.spec, "--pack-destination", str(cache), "--silent"],
        capture_output=True, text=True, timeout=600, check=False,
    )
    if result.returncode != 0 or not path.is_file():
        raise ExtensionError(f"`npm pack {asset.spec}` failed:\n{result.stderr.strip()}")
    found = sha512_integrity(path)
    if found != asset.integrity:
        path.unlink()
        raise ExtensionError(
            f"{asset.tarball}: integrity {found} differs from the pinned {asset.integrity}"
        )
    return path


def _wanted(name: str, asset: NpmAsset) -> str | None:
    """Path of tarball member ``name`` under the target folder, or None to skip it."""
    if not name.startswith(asset.prefix):
        return None
    rel = name[len(asset.prefix):]
    for keep in asset.keep:
        if keep.endswith("/") and rel.startswith(keep):
            return rel
        if keep.startswith(".") and "/" not in rel and rel.endswith(keep):
            return rel
        if rel == keep:
            return rel
    return None


def unpack(asset: NpmAsset, tarball: Path, vendor_dir: Path) -> int:
    """Copy the kept files of ``tarball`` into ``vendor_dir/asset.target``; return the count."""
    target = vendor_dir / asset.target
    staging = vendor_dir / f".{asset.target}.partial"
    shutil.rmtree(staging, ignore_errors=True)
    count = 0
    with tarfile.open(tarball, "r:gz") as archive:
        for member in archive.getmembers():
            rel = _wanted(member.name, asset)
            if rel is None or not member.isfile() or ".." in Path(rel).parts:
                continue
            out = staging / rel
            out.parent.mkdir(parents=True, exist_ok=True)
            with archive.extractfile(member) as src, open(out, "wb") as dst:
                shutil.copyfileobj(src, dst)
            count += 1
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)
    return count


def stage_assets(app: Sphinx) -> None:
    """builder-inited: fetch, verify and unpack every asset; add them to html_static_path."""
    if app.builder.format != "html":
        return
    cache = Path(app.config.offline_assets_cache or default_cache()).expanduser()
    static_root = Path(app.doctreedir).parent / "offline-static"
    vendor_dir = static_root / "vendor"
    vendor_dir.mkdir(parents=True, exist_ok=True)
    for asset in ASSETS:
        stamp = vendor_dir / f".{asset.target}.stamp"
        if stamp.is_file() and stamp.read_text() == asset.integrity:
            continue
        count = unpack(asset, fetch_tarball(asset, cache), vendor_dir)
        stamp.write_text(asset.integrity)
        logger.info(f"offline_assets: {asset.spec}: {count} files in _static/vendor/{asset.target}")
    if str(static_root) not in app.config.html_static_path:
        app.config.html_static_path.append(str(static_root))


def setup(app: Sphinx) -> dict:
    app.add_config_value("offline_assets_cache", "", "env", types=[str])
    app.connect("builder-inited", stage_assets)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}

"""The course site (book/): built offline from the committed notebooks, checked in Chromium.

The module builds the book with `make book` (or reuses a build newer than every input), then
checks the HTML statically (lessons in order, no remote resources, internal links resolve) and
opens pages in headless Debian Chromium driven by Playwright (no browser download: it launches
`/usr/bin/chromium`), with every host name unresolvable so that the network is cut. On a lesson
page it asserts that MathJax typeset every equation, that the lesson's figures are loaded images,
that no request left the local files, and it saves a screenshot to book/_build/screenshots/.
The browser tests are skipped only when no Chromium is installed (`apt-get install chromium`).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import textwrap
import zipfile
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from types import SimpleNamespace
from urllib.parse import parse_qs, unquote, urlsplit

import pytest
import yaml
from a11y import AXE_RUN, axe_script
from conftest import lesson_numbers_follow_the_plan
from local_servers import CHROMIUM, free_port, headless_chromium, running, wait_for

pytestmark = pytest.mark.browser

REPO = Path(__file__).resolve().parents[1]
BOOK = REPO / "book"
HTML = BOOK / "_build" / "html"
SCREENSHOTS = BOOK / "_build" / "screenshots"
LOCAL_SCHEMES = ("file", "data", "blob", "about", "chrome-error")
OFFLINE = ("--disable-quic", "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1")  # the network is cut, but for this machine


def toc_lessons() -> list[str]:
    """Lesson docnames (``notebooks/NN_name``) in the order _toc.yml lists them."""
    toc = yaml.safe_load((BOOK / "_toc.yml").read_text(encoding="utf-8"))
    files = [ch["file"] for part in toc["parts"] for ch in part["chapters"]]
    return [f for f in files if re.fullmatch(r"notebooks/\d\d_\w+", f)]


def build_inputs() -> list[Path]:
    """Every file the site is built from."""
    book_files = [p for p in BOOK.rglob("*") if "_build" not in p.parts and p.is_file()
                  and "notebooks" not in p.relative_to(BOOK).parts]
    download = [REPO / f for f in course_download().course_files()]  # the site's course zip
    return book_files + sorted((REPO / "notebooks").glob("*.ipynb")) + [REPO / "Makefile"] + download


def book_extension(name: str):
    """One of the book's local extensions (book/_ext/NAME.py)."""
    sys.path.insert(0, str(BOOK / "_ext"))
    try:
        return __import__(name)
    finally:
        sys.path.remove(str(BOOK / "_ext"))


def course_download():
    """The book's extension that writes the course download (book/_ext/course_download.py)."""
    return book_extension("course_download")


@pytest.fixture(scope="module")
def site() -> Path:
    """The built site: a fresh `make book` unless the existing build is newer than its inputs."""
    missing = [d for d in toc_lessons() if not (REPO / f"{d}.ipynb").is_file()]
    assert not missing, f"_toc.yml lists lessons that are not committed yet: {missing}"
    index = HTML / "index.html"
    newest_input = max(p.stat().st_mtime for p in build_inputs())
    if not index.is_file() or index.stat().st_mtime < newest_input:
        result = subprocess.run(["make", "book"], cwd=REPO, capture_output=True, text=True,
                                timeout=600, check=False)
        assert result.returncode == 0, f"make book failed:\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
    return HTML


class _Tags(HTMLParser):
    """Collects (tag, attributes) of every start tag of an HTML page."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, {k: v or "" for k, v in attrs}))


def page_tags(path: Path) -> list[tuple[str, dict[str, str]]]:
    parser = _Tags()
    parser.feed(path.read_text(encoding="utf-8"))
    return parser.tags


def site_pages(site: Path) -> list[Path]:
    """The book's HTML pages (not the theme's Jinja templates that land in _static/)."""
    return [p for p in site.rglob("*.html") if "_static" not in p.relative_to(site).parts]


def is_remote(url: str) -> bool:
    return url.startswith("//") or urlsplit(url).scheme in ("http", "https", "ws", "wss", "ftp")


def test_lessons_listed_in_order_and_numbered(site: Path) -> None:
    lessons = toc_lessons()
    problem = lesson_numbers_follow_the_plan([int(d.split("/")[1][:2]) for d in lessons])
    assert not problem, problem
    committed = sorted(p.stem for p in (REPO / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    assert [d.split("/")[1] for d in lessons] == committed, "the book lists every committed lesson"
    nav = [(a["href"], a) for t, a in page_tags(site / "intro.html")
           if t == "a" and "reference internal" in a.get("class", "") and "href" in a]
    pages = list(dict.fromkeys(href.split("#")[0] for href, _ in nav if href.startswith("notebooks/")))
    order = [page for page in pages if re.match(r"notebooks/\d\d_", page)]
    assert order == [f"{d}.html" for d in lessons], f"sidebar order {order}"
    assert "notebooks/training_record.html" in pages, "the training record is in the sidebar"
    for docname in lessons:
        title = re.search(r"<title>(.*?)</title>",
                          (site / f"{docname}.html").read_text(encoding="utf-8"), re.DOTALL)
        assert title and title.group(1).startswith(f"Lesson {docname.split('/')[1][:2]}"), (docname, title)


def test_no_remote_resources_in_built_files(site: Path) -> None:
    loaders = {"script": "src", "img": "src", "iframe": "src", "source": "src",
               "video": "src", "audio": "src", "embed": "src", "object": "data"}
    remote = []
    for page in site_pages(site):
        for tag, attrs in page_tags(page):
            url = attrs.get(loaders.get(tag, ""), "")
            if tag == "link" and attrs.get("rel", "") not in ("canonical", "author", "license"):
                url = attrs.get("href", "")
            if url and is_remote(url):
                remote.append(f"{page.relative_to(site)}: <{tag}> {url}")
    for css in site.rglob("*.css"):
        text = css.read_text(encoding="utf-8", errors="replace")
        text = re.sub(r"/\*.*?\*/", "", text, flags=re.DOTALL)  # comments are not requests
        remote += [f"{css.relative_to(site)}: {m}" for m in
                   re.findall(r"(?:url\(|@import\s+)['\"]?((?:https?:)?//[^'\")\s]+)", text)]
    assert not remote, "resources that would be fetched from the network:\n" + "\n".join(remote)


def test_every_figure_on_the_site_says_what_it_shows(site: Path) -> None:
    """The lessons' figures carry their alt text (the cells' mystnb.image.alt), not a file name."""
    figures = 0
    for lesson in sorted((site / "notebooks").glob("[0-9][0-9]_*.html")):
        for tag, attrs in page_tags(lesson):
            if tag != "img" or "_images/" not in attrs.get("src", ""):
                continue
            figures += 1
            alt = attrs.get("alt") or ""
            assert len(alt.split()) >= 20 and not alt.endswith((".png", ".jpg", ".svg")), \
                f"{lesson.name}: {attrs.get('src')} has the alt text {alt[:80]!r}"
    assert figures >= 67, f"only {figures} figures on the lesson pages"


def test_internal_links_resolve(site: Path) -> None:
    broken = []
    for page in site_pages(site):
        for tag, attrs in page_tags(page):
            url = attrs.get("href" if tag in ("a", "link") else "src", "")
            if tag not in ("a", "link", "img", "script") or not url or is_remote(url):
                continue
            parts = urlsplit(url)
            if parts.scheme or not parts.path:
                continue
            target = (page.parent / unquote(parts.path)).resolve()
            if not target.exists():
                broken.append(f"{page.relative_to(site)} -> {url}")
    assert not broken, "links to files missing from the site:\n" + "\n".join(broken)


def test_the_setup_page_offers_the_whole_course(site: Path, tmp_path: Path) -> None:
    """The site's download holds what `make lab` needs, built from today's files, and it works
    unpacked: its own capsedu and course tools make a learner's workspace."""
    links = [a.get("href") for tag, a in page_tags(site / "setup.html") if tag == "a"]
    assert "course/capsedu-course.zip" in links, "the Setup page does not link the course download"
    archive = site / "course" / "capsedu-course.zip"
    with zipfile.ZipFile(archive) as course:
        names = set(course.namelist())
        course.extractall(tmp_path)
    root = tmp_path / "capsedu-course"
    lessons = sorted(p.name for p in (REPO / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    needed = {"README.md", "LICENSE", "LICENSE-CONTENT.md", "Makefile", "pyproject.toml",
              "environment.yml", "capsedu/__init__.py", "capsedu/zoo/weights/capsnet.pt",
              "coursetools/workspace.py", "notebooks/jupytext.toml",
              *(f"notebooks/{name}" for name in lessons),
              *(f"notebooks/src/{Path(name).stem}.py" for name in lessons)}
    assert not {f"capsedu-course/{n}" for n in needed} - names, "missing from the download"
    unwanted = [n for n in names if re.search(r"__pycache__|/tests/|/book/|/workspace/|\.git/|checkpoints/", n)]
    assert not unwanted, f"the download holds development files: {unwanted[:5]}"
    for name in ("capsedu/zoo/weights/capsnet.pt", "notebooks/01_squash.ipynb", "README.md"):
        assert (root / name).read_bytes() == (REPO / name).read_bytes(), f"{name} is stale in the download"
    made = subprocess.run([sys.executable, "-c", "import capsedu, coursetools.workspace as w; "
                           "print(capsedu.__file__); w.main(['update', '--workspace', 'ws'])"],
                          cwd=root, env={**os.environ, "PYTHONPATH": str(root)},
                          capture_output=True, text=True, timeout=120)
    assert made.returncode == 0, made.stderr[-2000:]
    assert made.stdout.startswith(str(root)), f"capsedu did not come from the download: {made.stdout[:200]}"
    assert sorted(p.name for p in (root / "ws").glob("*.ipynb")) == lessons


def test_the_repository_address_is_set_in_one_place() -> None:
    """`repository: url:` of _config.yml reaches the pages through one substitution."""
    named = SimpleNamespace(html_theme_options={"repository_url": "https://example.org/capsedu"},
                            myst_substitutions={})
    course_download().add_substitutions(None, named)
    assert "<https://example.org/capsedu>" in named.myst_substitutions["repository"]
    unnamed = SimpleNamespace(html_theme_options={}, myst_substitutions={})
    course_download().add_substitutions(None, unnamed)
    assert unnamed.myst_substitutions["repository"] == ""  # the download alone, no deployer's note
    assert "{{ repository }}" in (BOOK / "setup.md").read_text()
    assert "repository: url:" in (BOOK / "instructors.md").read_text()  # where a deployment sets it


def test_the_class_hub_button_opens_the_lesson_as_make_hub_links_it() -> None:
    """book/_ext/hub_launch.py: configured, each lesson page's header gets the nbgitpuller link of
    coursetools.hub (the format the hub test follows), opening that lesson from the learner
    repository; unconfigured (the default build) or on another page, nothing."""
    from coursetools.hub import TARGET, pull_link

    launch = book_extension("hub_launch")
    hub, learner = "https://hub.example.org", "git://hub.example.org/capsedu-learner"
    link = launch.hub_link(hub, learner, "notebooks/03_dynamic_routing")
    assert link == pull_link(hub, learner, open_path="03_dynamic_routing.ipynb")
    query = parse_qs(urlsplit(link).query)
    assert query["repo"] == [learner] and query["urlpath"] == [f"lab/tree/{TARGET}/03_dynamic_routing.ipynb"]
    assert launch.hub_link("", "", "notebooks/03_dynamic_routing") is None
    assert launch.hub_link(hub, learner, "setup") is None
    app = SimpleNamespace(config=SimpleNamespace(capsedu_hub_url=hub, capsedu_learner_repository=learner))
    context = {"header_buttons": []}
    launch.add_hub_button(app, "notebooks/03_dynamic_routing", "page.html", context, None)
    assert [b["url"] for b in context["header_buttons"]] == [link]
    config = yaml.safe_load((BOOK / "_config.yml").read_text())["sphinx"]["config"]
    assert (config["capsedu_hub_url"], config["capsedu_learner_repository"]) == ("", "")  # a deployment sets them
    assert "capsedu_hub_url" in (BOOK / "instructors.md").read_text()


def test_binder_opens_the_workspace_and_colab_the_lesson_where_a_repository_is_named() -> None:
    """book/_ext/hub_launch.py: with a repository named, a lesson page's Binder button opens the
    lesson in the workspace that postBuild makes (as `make lab` would), its Colab button the
    lesson's notebook on GitHub; no repository, another page or the edition without solutions
    (both buttons hand out the whole repository): no button."""
    launch = book_extension("hub_launch")
    page = "notebooks/03_dynamic_routing"
    github = "https://github.com/someone/capsedu"
    assert launch.binder_link("https://mybinder.org", github, "main", page) == (
        "https://mybinder.org/v2/gh/someone/capsedu/main?urlpath=lab%2Ftree%2Fworkspace%2F03_dynamic_routing.ipynb")
    other = launch.binder_link("https://mybinder.org/", "https://git.example.org/capsedu.git", "v1", page)
    assert other == ("https://mybinder.org/v2/git/https%3A%2F%2Fgit.example.org%2Fcapsedu.git/v1"
                     "?urlpath=lab%2Ftree%2Fworkspace%2F03_dynamic_routing.ipynb")
    assert launch.colab_link(github, "main", page) == (
        "https://colab.research.google.com/github/someone/capsedu/blob/main/notebooks/03_dynamic_routing.ipynb")
    assert launch.colab_link("https://git.example.org/capsedu.git", "main", page) is None
    assert launch.binder_link("https://mybinder.org", github, "main", "setup") is None
    assert launch.binder_link("https://mybinder.org", "", "main", page) is None
    postbuild = (REPO / "postBuild").read_text()
    assert "coursetools.workspace update" in postbuild, "Binder's image would have no workspace to open"
    for repository, solutions, expected in ((github, "show", ["Binder", "Colab"]), ("", "show", []),
                                            (github, "omit", [])):
        app = SimpleNamespace(config=SimpleNamespace(
            html_theme_options={"repository_url": repository}, capsedu_binderhub_url="https://mybinder.org",
            capsedu_solutions=solutions))
        context = {"header_buttons": []}
        launch.add_cloud_buttons(app, page, "page.html", context, None)
        assert [b["text"] for b in context["header_buttons"]] == expected, (repository, solutions)


def test_the_publishing_workflow_builds_what_the_makefile_builds(tmp_path: Path) -> None:
    """.github/workflows/book.yml: a make target that exists for each edition, the folder that
    target writes uploaded, and the step that names the repository on the site really sets
    `repository: url:` in book/_config.yml."""
    workflow = yaml.safe_load((REPO / ".github" / "workflows" / "book.yml").read_text())
    steps = workflow["jobs"]["build"]["steps"]
    script = next(s["run"] for s in steps if s.get("name") == "Build the site")
    makefile = (REPO / "Makefile").read_text()
    for target, folder in (("book", "book/_build/html"), ("book-no-solutions", "book/_build/no-solutions/_build/html")):
        assert f"make {target} && echo \"SITE={folder}\"" in script, target
        assert re.search(rf"^{re.escape(target)}:", makefile, re.M), f"the Makefile has no target {target}"
    assert "--path-output book/_build/no-solutions" in makefile
    assert next(s for s in steps if "upload-pages-artifact" in s.get("uses", ""))["with"]["path"] == "${{ env.SITE }}"
    naming = next(s["run"] for s in steps if s.get("name") == "Name this repository on the site")
    program = naming.split("<<'PY'\n", 1)[1].rsplit("PY", 1)[0].replace(
        "${{ github.server_url }}/${{ github.repository }}", "https://github.com/someone/capsedu")
    (tmp_path / "book").mkdir()
    (tmp_path / "book" / "_config.yml").write_text((BOOK / "_config.yml").read_text())  # a copy: the site may be building
    subprocess.run([sys.executable, "-c", textwrap.dedent(program)], cwd=tmp_path, check=True)
    config = yaml.safe_load((tmp_path / "book" / "_config.yml").read_text())
    assert config["repository"]["url"] == "https://github.com/someone/capsedu"


def test_mathjax_and_widget_renderer_are_shipped(site: Path) -> None:
    assert (site / "_static/vendor/mathjax/tex-mml-chtml.js").is_file()
    assert (site / "_static/vendor/mathjax/output/chtml/fonts/woff-v2").is_dir()
    assert (site / "_static/vendor/html-manager/embed.js").is_file()


PAGE_LIMIT = 3_000_000  # bytes: a lesson page with its figures and the explorers' frames


def page_weight(html: Path) -> int:
    """Bytes a reader downloads for a lesson page: the HTML (which embeds the widget state, the
    explorers' frames included) and every local image it shows (not the shared theme and fonts)."""
    images = {(html.parent / unquote(attrs["src"])).resolve() for tag, attrs in page_tags(html)
              if tag == "img" and attrs.get("src") and not is_remote(attrs["src"])
              and not attrs["src"].startswith("data:")}
    return html.stat().st_size + sum(p.stat().st_size for p in images if p.is_file())


def test_every_lesson_page_stays_under_3_mb(site: Path) -> None:
    weights = {html.name: page_weight(html) for html in lesson_pages(site)}
    print("\n".join(f"{name}: {size / 1e6:.2f} MB" for name, size in weights.items()))
    heavy = {name: size for name, size in weights.items() if size > PAGE_LIMIT}
    assert not heavy, f"lesson pages over {PAGE_LIMIT / 1e6:.0f} MB: {heavy}"


# --- the browser ---------------------------------------------------------------------------


class BookPage:
    """One Playwright tab on the built site: open pages, evaluate JavaScript, list requests."""

    def __init__(self, page) -> None:
        self.page = page
        self._requests: list[str] = []
        self._failures: list[str] = []
        self._errors: list[str] = []
        page.on("request", lambda request: self._requests.append(request.url))
        page.on("requestfailed", lambda request: self._failures.append(
            f"{request.url}: {request.failure}"))
        page.on("pageerror", lambda error: self._errors.append(f"uncaught: {error}"))
        page.on("console", lambda message: self._errors.append(f"console.error: {message.text}")
                if message.type == "error" else None)

    def open(self, url: str, wait_until: str = "load") -> None:
        self._requests.clear()
        self._failures.clear()
        self._errors.clear()
        self.page.goto(url, wait_until=wait_until)

    def evaluate(self, expression: str):
        return self.page.evaluate(expression)

    def wait_for(self, expression: str, timeout: float = 60.0) -> bool:
        try:
            self.page.wait_for_function(expression, timeout=timeout * 1000)
            return True
        except Exception:  # noqa: BLE001 - Playwright's TimeoutError: report as "not reached"
            return False

    def requests(self) -> list[str]:
        return list(self._requests)

    def failures(self) -> list[str]:
        return list(self._failures)

    def errors(self) -> list[str]:
        """Uncaught exceptions and console errors since the page was opened."""
        return list(self._errors)

    def screenshot(self, path: Path, max_height: int = 6000) -> None:
        """Save the top of the page (up to max_height pixels) as a PNG."""
        height = min(int(self.evaluate("document.documentElement.scrollHeight")), max_height)
        path.parent.mkdir(parents=True, exist_ok=True)
        self.page.screenshot(path=str(path), full_page=True,
                             clip={"x": 0, "y": 0, "width": 1280, "height": height})


@pytest.fixture(scope="module")
def page(site: Path) -> Iterator[BookPage]:
    if CHROMIUM is None:
        pytest.skip("Chromium is not installed (Debian: `apt-get install -y chromium`); "
                    "the browser checks of the book need it")
    with headless_chromium(OFFLINE) as browser:
        yield BookPage(browser.new_page(viewport={"width": 1280, "height": 1600}))


WAIT_FOR_MATHJAX = """(async () => {
  if (!window.MathJax || !MathJax.startup || !MathJax.startup.promise) return false;
  await MathJax.startup.promise; return true; })()"""

RENDERED = """(() => {
  const maths = [...document.querySelectorAll('main .math')];
  const imgs = [...document.querySelectorAll('main .cell_output img')];
  return {
    maths: maths.length,
    typeset: maths.filter(m => m.querySelector('mjx-container')).length,
    errors: document.querySelectorAll('mjx-merror').length,
    images: imgs.length,
    loaded: imgs.filter(i => i.complete && i.naturalWidth > 0).length,
    widgetViews: document.querySelectorAll('script[type="application/vnd.jupyter.widget-view+json"]').length,
    widgets: document.querySelectorAll('main .jupyter-widgets').length,
    liveNote: !!document.querySelector('.capsedu-live-note'),
    sideways: [...document.querySelectorAll('main .cell_output pre')]
      .filter(p => p.scrollWidth > p.clientWidth + 1).map(p => p.textContent.slice(0, 60)),
    title: document.title,
  }; })()"""


def lesson_pages(site: Path) -> list[Path]:
    return [site / f"{d}.html" for d in toc_lessons()]


def check_lesson(page: BookPage, html: Path) -> dict:
    """Open a lesson page and assert what the reader must see; return the DOM summary."""
    page.open(html.as_uri())
    if page.evaluate("document.querySelectorAll('main .math').length > 0"):
        assert page.wait_for(WAIT_FOR_MATHJAX), f"{html.name}: MathJax never started"
    state = page.evaluate(RENDERED)
    if state["widgetViews"]:
        page.wait_for("document.querySelectorAll('main .jupyter-widgets').length > 0", 30)
        state = page.evaluate(RENDERED)
    remote = [u for u in page.requests() if urlsplit(u).scheme not in LOCAL_SCHEMES]
    assert not remote, f"{html.name}: requests to remote hosts: {remote}"
    assert not page.failures(), f"{html.name}: resources that failed to load: {page.failures()}"
    assert not page.errors(), f"{html.name}: JavaScript errors: {page.errors()}"
    assert state["typeset"] == state["maths"], f"{html.name}: not every equation typeset: {state}"
    assert state["errors"] == 0, f"{html.name}: MathJax reported TeX errors"
    assert state["loaded"] == state["images"], f"{html.name}: figures that did not load: {state}"
    assert state["liveNote"], f"{html.name}: no note on how to open the lesson in JupyterLab"
    assert not state["sideways"], f"{html.name}: printed lines wider than the page (scroll sideways): {state['sideways']}"
    if state["widgetViews"]:
        assert state["widgets"] > 0, f"{html.name}: embedded widgets were not rendered: {state}"
    return state


def test_a_lesson_page_in_chromium(site: Path, page: BookPage) -> None:
    """Lesson 01 (the squash, Eq. 1): equations typeset, figures shown, offline; screenshot."""
    lesson = next((p for p in lesson_pages(site) if p.name.startswith("01_")), None)
    assert lesson is not None and lesson.is_file(), "lesson 01 is not in the site"
    state = check_lesson(page, lesson)
    assert state["maths"] > 0, f"{lesson.name}: no equations on the page"
    assert state["images"] > 0, f"{lesson.name}: no figures on the page"
    page.screenshot(SCREENSHOTS / f"{lesson.stem}.png")


FRAMES = "main .capsedu-frames"  # capsedu.explore.frames.CSS_CLASS


def _shown_picture(explorer) -> bytes:
    """The pixels of the one frame an explorer shows (its visible image), as a PNG screenshot."""
    shown = explorer.locator("img:visible")
    assert shown.count() == 1, f"a frame explorer shows {shown.count()} pictures, expected 1"
    return shown.screenshot()


def _move(page: BookPage, handle) -> str:
    """One step of a slider with the keyboard: right, or left where it is at its end; returns
    the key that moves it back."""
    now, top = (float(handle.get_attribute(k)) for k in ("aria-valuenow", "aria-valuemax"))
    handle.focus()
    key, back = ("ArrowRight", "ArrowLeft") if now < top else ("ArrowLeft", "ArrowRight")
    page.page.keyboard.press(key)
    page.page.wait_for_timeout(150)
    return back


def test_the_explorers_move_on_the_static_site(site: Path, page: BookPage) -> None:
    """Every frame explorer on every lesson page: from where it starts, each of its sliders moved
    alone with the keyboard changes the picture (a reader may try any one first), with no kernel
    and no request beyond the local files; screenshots."""
    moved: dict[str, int] = {}
    for lesson in lesson_pages(site):
        if "capsedu-frames" not in lesson.read_text(encoding="utf-8"):
            continue
        check_lesson(page, lesson)
        assert page.wait_for(f"document.querySelectorAll('{FRAMES}').length > 0", 30), lesson.name
        explorers = page.page.locator(FRAMES)
        for e in range(explorers.count()):
            explorer = explorers.nth(e)
            explorer.scroll_into_view_if_needed()
            explorer.screenshot(path=str(SCREENSHOTS / f"{lesson.stem}-frames{e}-before.png"))
            handles = explorer.locator(".noUi-handle")
            assert handles.count() >= 1, f"{lesson.name}: explorer {e} has no slider"
            start = _shown_picture(explorer)
            alt = explorer.locator("img:visible").get_attribute("alt") or ""
            assert len(alt.split()) >= 20, f"{lesson.name}: explorer {e}'s picture has the alt text {alt!r}"
            for h in range(handles.count()):
                name = handles.nth(h).get_attribute("aria-label") or ""
                assert name and name in explorer.inner_text(), f"{lesson.name}: explorer {e}, slider {h} is named {name!r}"
                back = _move(page, handles.nth(h))
                ring = handles.nth(h).evaluate("e => [getComputedStyle(e).outlineStyle, parseFloat(getComputedStyle(e).outlineWidth)]")
                assert ring[0] != "none" and ring[1] >= 2, f"{lesson.name}: a focused slider shows no focus ring ({ring})"
                assert (explorer.locator("img:visible").get_attribute("alt") or "") != alt, (
                    f"{lesson.name}: explorer {e}, slider {h}: the new picture kept the old alt text")
                assert _shown_picture(explorer) != start, (
                    f"{lesson.name}: explorer {e}, slider {h} moved alone from the start changed nothing")
                page.page.keyboard.press(back)  # back to the start for the next slider
                page.page.wait_for_timeout(150)
                assert _shown_picture(explorer) == start, f"{lesson.name}: explorer {e} did not return"
                moved[lesson.stem] = moved.get(lesson.stem, 0) + 1
            explorer.screenshot(path=str(SCREENSHOTS / f"{lesson.stem}-frames{e}-after.png"))
        remote = [u for u in page.requests() if urlsplit(u).scheme not in LOCAL_SCHEMES]
        assert not remote, f"{lesson.name}: requests beyond the local files: {remote}"
    assert len(moved) >= 5, f"frame explorers found on {sorted(moved)} only (lessons 03, 07, 08, 09, 11)"


WIDE = "document.documentElement.scrollWidth > window.innerWidth + 1"  # the page scrolls sideways


def test_every_page_renders_fits_the_screen_and_passes_axe(site: Path, page: BookPage) -> None:
    """Every page of the site in Chromium, widgets rendered: each lesson as check_lesson requires
    (equations typeset, figures loaded, widgets drawn, nothing remote; screenshots of the widget
    lessons); no page scrolls sideways at 1,280 px (long inline code breaks, wide tables scroll in
    their own box: book/_static/capsedu.css; before, the hub's URL made the instructors' page
    1,419 px wide); and axe-core's WCAG 2.0/2.1 A and AA rules find no violation."""
    script, found, wide, lessons = axe_script(), {}, [], set(lesson_pages(site))
    totals = {"maths": 0, "images": 0}
    for html in [p for p in site_pages(site) if p.name not in ("genindex.html", "search.html", "index.html")]:
        if html in lessons:  # (index.html only redirects to intro.html)
            state = check_lesson(page, html)
            if state["widgetViews"]:
                page.screenshot(SCREENSHOTS / f"{html.stem}.png")
            totals = {k: totals[k] + state[k] for k in totals}
        else:
            page.open(html.as_uri())
        if html in lessons and state["widgetViews"]:
            page.page.wait_for_timeout(500)  # the page script names what the widget manager drew
        if page.evaluate(WIDE):
            wide.append(str(html.relative_to(site)))
        page.page.add_script_tag(content=script)
        violations = page.page.evaluate(AXE_RUN)
        if violations:
            found[str(html.relative_to(site))] = violations
    assert totals["maths"] > 0 and totals["images"] > 0, totals
    assert not wide, f"pages that scroll sideways at 1,280 px: {wide}"
    assert not found, "axe-core violations (rule, elements, first element):\n" + "\n".join(
        f"{name}: {[(v['rule'], v['count'], v['example']) for v in vs]}" for name, vs in found.items())


def test_landing_page_in_chromium(site: Path, page: BookPage) -> None:
    """The landing page answers a visitor's first questions: who the course is for, what it needs,
    what a learner can do at the end, how long it takes (the lessons' own stated times, added up),
    a "Start with lesson 00" action and three ways to use it; Eq. 1 typeset, a course map linking
    every lesson with its time, nothing remote; screenshots at desktop and phone width."""
    from coursetools.syllabus import CORE, hours, lesson_minutes

    page.open((site / "intro.html").as_uri())
    assert page.wait_for(WAIT_FOR_MATHJAX), "intro.html: MathJax never started"
    state = page.evaluate(RENDERED)
    assert state["maths"] > 0 and state["typeset"] == state["maths"], state
    cards = page.evaluate("[...document.querySelectorAll('main section#course-map .sd-card a')]"
                          ".map(a => a.getAttribute('href').split('#')[0])")
    assert cards == [f"{d}.html" for d in toc_lessons()], cards
    assert not [u for u in page.requests() if urlsplit(u).scheme not in LOCAL_SCHEMES]
    assert not page.failures(), page.failures()
    text = page.evaluate("document.querySelector('main').innerText").replace("\u2019", "'")
    assert f"version {course_download().course_version()} of the course" in text, \
        "the front page does not name the course's version"
    for heading in ("Who it is for", "What you will be able to do", "How long it takes", "Three ways to use it"):
        assert heading in text, f"the front page has no section {heading!r}"
    minutes = lesson_minutes()
    assert f"takes {hours(sum(m for n, m in minutes.items() if n in CORE))} of a learner's time" in text
    assert f"the whole course {hours(sum(minutes.values()))}" in text, "the total is not the lessons' own"
    for number, stated in minutes.items():
        assert f"Lesson {number} — " in text and f"· {stated} min" in text, f"lesson {number}'s time is not on its card"
    start = page.evaluate("[...document.querySelectorAll('main a.sd-btn')].map(a => [a.innerText, a.getAttribute('href')])")
    assert any("Start with lesson 00" in label and href.startswith("notebooks/00_start_here.html")
               for label, href in start), start
    paths = page.evaluate("[...document.querySelectorAll('main .capsedu-paths .sd-card a')]"
                          ".map(a => a.getAttribute('href').split('#')[0])")
    assert paths == ["setup.html", "syllabus.html", "notebooks/00_start_here.html"], paths
    assert "shows the exercises' solutions" in text, "the front page does not say that it shows the solutions"
    page.screenshot(SCREENSHOTS / "intro.png")
    page.page.set_viewport_size({"width": 390, "height": 844})
    page.page.screenshot(path=str(SCREENSHOTS / "intro-phone.png"))
    page.page.set_viewport_size({"width": 1280, "height": 1600})


def test_the_syllabus_page_plans_six_sessions_with_figures_for_slides(site: Path, page: BookPage) -> None:
    """The teaching plan: each session of coursetools.syllabus with its lessons and their time, its
    objectives, assignments, in-class activity and assessment, and a download of every lesson's
    figures; screenshots at desktop and phone width."""
    from coursetools.syllabus import SESSIONS, hours, lesson_minutes

    page.open((site / "syllabus.html").as_uri())
    text = page.evaluate("document.querySelector('main').innerText").replace("\u2019", "'")
    minutes = lesson_minutes()
    for k, session in enumerate(SESSIONS, start=1):
        assert f"Session {k}" in text and session.title in text, f"session {k} is missing"
        assert f"{hours(sum(minutes[n] for n in session.lessons))} of a learner's time" in text
    for part in ("After it, learners can", "Assign", "In class.", "Assessment ideas.", "Figures:"):
        assert text.count(part) >= len(SESSIONS), f"not every session has {part!r}"
    links = page.evaluate("[...document.querySelectorAll('main a[download]')].map(a => a.getAttribute('href'))")
    lessons = [Path(d).name for d in toc_lessons()]
    assert links == [f"figures/{name}-figures.zip" for name in lessons], links
    assert all((site / link).is_file() for link in links)
    page.screenshot(SCREENSHOTS / "syllabus.png")
    page.page.set_viewport_size({"width": 390, "height": 844})
    page.page.screenshot(path=str(SCREENSHOTS / "syllabus-phone.png"))
    page.page.set_viewport_size({"width": 1280, "height": 1600})


def test_each_lessons_figures_download_as_vector_pdfs(site: Path) -> None:
    """figures/NN_name-figures.zip: one file per figure the lesson shows (its PNG outputs, the
    explorers' widgets aside), in order - the vector PDF of each matplotlib figure, the picture
    itself for the few that are pictures (an explorer's snapshot) - and figures.txt naming each
    with its text alternative."""
    for lesson in toc_lessons():
        notebook = json.loads((REPO / f"{lesson}.ipynb").read_text(encoding="utf-8"))
        alts = [cell["metadata"].get("mystnb", {}).get("image", {}).get("alt", "")
                for cell in notebook["cells"] for output in cell.get("outputs", [])
                if "image/png" in output.get("data", {})]
        name = Path(lesson).name
        with zipfile.ZipFile(site / "figures" / f"{name}-figures.zip") as archive:
            files = sorted((n for n in archive.namelist() if n.endswith((".pdf", ".png"))),
                           key=lambda n: int(re.search(r"fig(\d+)\.\w+$", n)[1]))
            assert len(files) == len(alts) > 0, f"{name}: {len(files)} files for {len(alts)} figures"
            pdfs = [n for n in files if n.endswith(".pdf")]
            assert len(pdfs) >= len(files) - 2, f"{name}: only {len(pdfs)} of {len(files)} figures as vector PDFs"
            assert all(archive.read(n).startswith(b"%PDF-") for n in pdfs), f"{name}: not a PDF"
            assert all(archive.read(n).startswith(b"\x89PNG") for n in files if n.endswith(".png"))
            index = archive.read(f"{name}-figures/figures.txt").decode("utf-8")
        for file, alt in zip(files, alts):
            assert f"{Path(file).name}: {alt}" in index, f"{name}: figures.txt does not describe {file}"
        assert "CC BY 4.0" in index and "CC BY-SA 3.0" in index


def test_the_menus_open_on_a_phone_and_desktop_has_one_search_box(site: Path, page: BookPage) -> None:
    """At 390 px the navigation menu (the visible ☰) opens, and a lesson link in it works; so does
    the page's contents button. At 1280 px the page has one search box. (pydata-sphinx-theme 0.17's
    navbar put a second `.primary-toggle` before the visible one, and its script bound that
    one only: pydata-sphinx-theme#2451.)"""
    phone = page.page.context.browser.new_page(viewport={"width": 390, "height": 844})
    try:
        phone.goto((site / "notebooks" / "01_squash.html").as_uri(), wait_until="load")
        toggle = phone.locator(".primary-toggle:visible")
        assert toggle.count() == 1, f"{toggle.count()} visible menu buttons at 390 px"
        toggle.click()
        dialog = phone.locator("#pst-primary-sidebar-modal")
        phone.wait_for_function("document.getElementById('pst-primary-sidebar-modal').open", timeout=5000)
        phone.screenshot(path=str(SCREENSHOTS / "phone-menu.png"))
        dialog.get_by_role("link", name=re.compile(r"Lesson 03")).click()
        phone.wait_for_url(re.compile(r"03_dynamic_routing\.html"), timeout=10000)
        phone.locator(".secondary-toggle:visible").click()
        phone.wait_for_function("document.getElementById('pst-secondary-sidebar-modal').open", timeout=5000)
        assert "Learning objectives" in phone.locator("#pst-secondary-sidebar-modal").inner_text()
    finally:
        phone.close()
    page.open((site / "notebooks" / "01_squash.html").as_uri())
    searches = page.page.locator(".search-button-field:visible, .search-button:visible")
    assert searches.count() == 1, f"{searches.count()} search boxes on a desktop page"


PHONE_LESSONS = ("01_squash", "06_training", "13_under_pressure")  # the longest inline code


def test_no_page_scrolls_sideways_on_a_phone(site: Path, page: BookPage) -> None:
    """At 390 px no page scrolls sideways: every page that is not a lesson, and the lessons with
    the longest inline code (each lesson's note names its workspace paths, which widened every
    lesson page on a phone before book/_static/capsedu.css let inline code break; the 1,280 px
    check covers every lesson)."""
    phone = page.page.context.browser.new_page(viewport={"width": 390, "height": 844})
    lessons = set(lesson_pages(site))
    chosen = [p for p in site_pages(site) if p not in lessons and p.name != "index.html"]
    chosen += [site / "notebooks" / f"{name}.html" for name in PHONE_LESSONS]
    wide = []
    try:
        for html in chosen:
            phone.goto(html.as_uri(), wait_until="domcontentloaded")
            if phone.evaluate(WIDE):
                wide.append(f"{html.relative_to(site)}: {phone.evaluate('document.documentElement.scrollWidth')} px")
    finally:
        phone.close()
    assert len(chosen) >= 12 and not wide, f"pages that scroll sideways at 390 px: {wide}"


def test_no_javascript_error_on_the_other_pages(site: Path, page: BookPage) -> None:
    """The pages that are not lessons (check_lesson checks those): no uncaught exception and no
    console error once the page and its MathJax have loaded. (index.html only redirects to
    intro.html; search.html is opened by test_search_works_offline.)"""
    lessons = set(lesson_pages(site))
    others = [p for p in site_pages(site) if p not in lessons and p.name not in ("index.html", "search.html")]
    assert len(others) >= 4, others
    for html in others:
        page.open(html.as_uri())
        if page.evaluate("document.querySelectorAll('main .math').length > 0"):
            assert page.wait_for(WAIT_FOR_MATHJAX), f"{html.name}: MathJax never started"
        assert not page.errors(), f"{html.relative_to(site)}: JavaScript errors: {page.errors()}"


def test_search_works_offline(site: Path, page: BookPage) -> None:
    page.open((site / "search.html").as_uri() + "?q=squash")
    found = page.wait_for("document.querySelectorAll('#search-results li').length > 0", 30)
    assert found, "the search page found nothing for 'squash'"
    links = page.evaluate("[...document.querySelectorAll('#search-results li a')].map(a => a.href)")
    assert any("notebooks/01_squash" in link for link in links), links
    assert not [u for u in page.requests() if urlsplit(u).scheme not in LOCAL_SCHEMES]


SELF_CHECK = "main .capsedu-self-check"  # capsedu.course.self_check's HTML


OPEN_EVERY_OPTION = """(block) => [...block.querySelectorAll('[role=listitem]')].map(question => {
  const options = [...question.querySelectorAll('details')];
  const hiddenBefore = options.every(o => !o.open && !o.querySelector('p').checkVisibility());
  return {hiddenBefore, shown: options.map(o => {
    o.querySelector('summary').click();
    const p = o.querySelector('p');
    return p.checkVisibility() ? p.innerText : null; })};
})"""


def test_every_self_check_answers_on_the_static_site(site: Path, page: BookPage) -> None:
    """Every lesson's self-check questions: each option shows its feedback once chosen, none
    before (one per question says it is right), with no kernel; the keyboard opens an option
    (Enter on its summary: checked on each lesson's first option); a screenshot of lesson 01's."""
    for lesson in lesson_pages(site):
        page.open(lesson.as_uri(), wait_until="domcontentloaded")  # the questions are plain HTML
        block = page.page.locator(SELF_CHECK)
        assert block.count() == 1, f"{lesson.name}: {block.count()} self-check blocks, expected 1"
        questions = block.evaluate(OPEN_EVERY_OPTION)
        assert 3 <= len(questions) <= 5, f"{lesson.name}: {len(questions)} questions"
        for q, question in enumerate(questions, start=1):
            assert question["hiddenBefore"], f"{lesson.name}: question {q}'s feedback is shown before a choice"
            assert None not in question["shown"], f"{lesson.name}: question {q} has an option that opened nothing"
            right = sum(text.startswith("✅ Right.") for text in question["shown"])
            assert right == 1, f"{lesson.name}: question {q} has {right} right options"
        first = block.locator("[role=listitem] details").first
        first.evaluate("details => { details.open = false; }")
        first.locator("summary").focus()
        page.page.keyboard.press("Enter")
        assert first.locator("p").is_visible(), f"{lesson.name}: Enter on an option opened nothing"
        if lesson.name.startswith("01_"):
            block.screenshot(path=str(SCREENSHOTS / f"{lesson.stem}-self-check.png"))


# --- the edition without solutions, and the site served over http ----------------------------

NO_SOLUTIONS = BOOK / "_build" / "no-solutions" / "_build" / "html"


@pytest.fixture(scope="module")
def no_solutions_site(site: Path) -> Path:
    """`make book-no-solutions`, built afresh (after the default site, which it must not touch)."""
    result = subprocess.run(["make", "book-no-solutions"], cwd=REPO, capture_output=True, text=True,
                            timeout=600, check=False)
    assert result.returncode == 0, f"make book-no-solutions failed:\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
    return NO_SOLUTIONS


def solution_lines() -> dict[str, set[str]]:
    """For each lesson, the lines of its solutions that appear nowhere else in the lesson (long
    enough to be telling): what the edition without solutions must not show."""
    from coursetools.handouts import BEGIN, END

    found = {}
    for lesson in toc_lessons():
        notebook = json.loads((REPO / f"{lesson}.ipynb").read_text(encoding="utf-8"))
        inside, lines, elsewhere = False, set(), []
        for cell in notebook["cells"]:
            for line in "".join(cell["source"]).splitlines():
                marker = line.strip()
                if marker in (BEGIN, END):
                    inside = marker == BEGIN
                elif inside and len(marker) >= 20 and not marker.startswith("#"):
                    lines.add(marker)
                else:
                    elsewhere.append(line)
        rest = "\n".join(elsewhere)
        found[Path(lesson).name] = {line for line in lines if line not in rest}
    return found


def page_text(html: Path) -> str:
    """What a reader sees of a page: its text without tags (code spans joined again), unescaped."""
    import html as entities

    text = entities.unescape(re.sub(r"<[^>]+>", "", html.read_text(encoding="utf-8")))
    return text.replace("\u2019", "'")  # Sphinx's typographic apostrophes, as typed


def shown_solutions(site: Path) -> dict[str, list[str]]:
    """Each lesson page's solution lines that the page shows."""
    shown = {}
    for lesson, lines in solution_lines().items():
        text = page_text(site / "notebooks" / f"{lesson}.html")
        shown[lesson] = sorted(line for line in lines if line in text)
    return shown


def test_the_edition_without_solutions_shows_none(site: Path, no_solutions_site: Path) -> None:
    """`make book-no-solutions`: no lesson page, downloadable notebook, search index or course
    download holds a line of a solution or a solution marker; each exercise shows its stub and
    both editions say which they are. The same detector finds the solutions on the default site."""
    from coursetools.handouts import BEGIN, STUB

    in_default = shown_solutions(site)
    assert sum(map(len, in_default.values())) > 50 and all(in_default.values()), \
        f"the detector finds too few solution lines on the default site: {({k: len(v) for k, v in in_default.items()})}"
    leaks = {lesson: lines for lesson, lines in shown_solutions(no_solutions_site).items() if lines}
    assert not leaks, f"solution lines on the edition without solutions: {leaks}"
    every = set().union(*solution_lines().values())
    for path in no_solutions_site.rglob("*"):
        if path.suffix in (".html", ".js", ".ipynb", ".txt") and path.is_file():
            raw = path.read_text(encoding="utf-8", errors="replace")
            assert BEGIN not in raw, f"{path.relative_to(no_solutions_site)} holds a solution marker"
            if path.suffix == ".ipynb":
                sources = "\n".join("".join(c["source"]) for c in json.loads(raw)["cells"])
                assert not [line for line in every if line in sources], f"{path.name} holds solution lines"
    for lesson in solution_lines():
        html = page_text(no_solutions_site / "notebooks" / f"{lesson}.html")
        assert STUB in html, f"{lesson}: the edition without solutions shows no stub"
        assert "leaves the exercises' solutions out" in html
        assert "solutions are on this page" in page_text(site / "notebooks" / f"{lesson}.html")
    assert "leaves the exercises' solutions out" in page_text(no_solutions_site / "intro.html")
    with zipfile.ZipFile(no_solutions_site / "course" / "capsedu-course.zip") as course:
        for name in course.namelist():
            if re.search(r"/notebooks/(src/)?\d\d_\w+\.(ipynb|py)$", name):
                data = course.read(name).decode("utf-8")
                assert BEGIN not in data and not [line for line in every if line in data], \
                    f"the course download's {name} holds a solution"


@contextlib.contextmanager
def served_from_a_sub_path(site: Path, tmp_path: Path, sub_path: str = "capsedu") -> Iterator[str]:
    """The site served by an http server at http://127.0.0.1:PORT/SUB_PATH/ (as a static host
    serves a project site); yields that address."""
    root = tmp_path / "host"
    root.mkdir()
    (root / sub_path).symlink_to(site, target_is_directory=True)
    port = free_port()
    command = [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1", "--directory", str(root)]
    with running(command, tmp_path / "http.log") as server:
        base = f"http://127.0.0.1:{port}/{sub_path}/"
        wait_for(base + "intro.html", server, tmp_path / "http.log", "the http server")
        yield base


def test_the_site_works_served_over_http_from_a_sub_path(site: Path, page: BookPage, tmp_path: Path) -> None:
    """A static host serves the site under a sub-path: every page's requests stay inside it and
    load, no script fails, equations, figures and widgets render, and search finds a lesson."""
    with served_from_a_sub_path(site, tmp_path) as base:
        for name in ("intro.html", "syllabus.html", "notebooks/03_dynamic_routing.html", "cite.html"):
            page.open(base + name)
            if page.evaluate("document.querySelectorAll('main .math').length > 0"):
                assert page.wait_for(WAIT_FOR_MATHJAX), f"{name}: MathJax never started over http"
            state = page.evaluate(RENDERED)
            if state["widgetViews"]:
                assert page.wait_for("document.querySelectorAll('main .jupyter-widgets').length > 0", 30), name
            outside = [u for u in page.requests() if not u.startswith(base)
                       and urlsplit(u).scheme not in ("data", "blob", "about")]
            assert not outside, f"{name}: requests outside {base}: {outside}"
            assert not page.failures(), f"{name}: failed over http: {page.failures()}"
            assert not page.errors(), f"{name}: JavaScript errors over http: {page.errors()}"
            state = page.evaluate(RENDERED)
            assert state["typeset"] == state["maths"] and state["loaded"] == state["images"], (name, state)
        page.open(base + "search.html?q=squash")
        assert page.wait_for("document.querySelectorAll('#search-results li').length > 0", 30)
        links = page.evaluate("[...document.querySelectorAll('#search-results li a')].map(a => a.href)")
        assert any(link.startswith(base + "notebooks/01_squash") for link in links), links

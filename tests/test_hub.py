"""A class on a real JupyterHub: log in, pull the lessons, fetch, submit, validate, get graded and feedback.

The test runs ``make hub``'s command (``python -m coursetools.hub_server``) with the arguments
``classroom/README.md`` gives - one instructor, two learners, lesson 01 withheld - in folders and
ports of its own: it prepares the state folder, the exchange, configurable-http-proxy from npm and
the learner repository, serves it with git daemon on loopback, and starts JupyterHub
(``classroom/jupyterhub_config.py``). It then plays a class, the learners' side in headless
Chromium (Playwright):

1. the instructor releases lesson 01 as an nbgrader assignment (``nbgrader generate_assignment`` /
   ``release_assignment``);
2. each learner logs in on the hub's login page, opens the nbgitpuller link (lessons with stubs
   and the worked lessons arrive in ``~/capsedu``; lesson 01 does not), edits lesson 00;
3. each learner fetches 01_squash in JupyterLab's *Assignments* list, types into its exercise
   cells (ada solves all three; grace the first, a wrong answer to the second - the square root
   forgotten - and nothing in the third), runs every cell and saves; grace presses *Validate*,
   which names the failed check; both submit;
4. the instructor collects, autogrades, generates and releases feedback: 3/3 and 1/3; the class
   report (``make class-report``) counts grace's forgotten square root once and her stub once;
5. each learner fetches the feedback (an HTML report with the score arrives in their home);
6. the instructor publishes again, with lesson 01 (the assignment is closed) and a new closing
   cell in lesson 00; ada opens the link again: lesson 01 arrives, and her lesson 00 holds both
   her own cell and the course's new one, and is still a valid notebook (nbgitpuller's merge).

The instructor's side is nbgrader's commands, run by the test in the course folder as an
instructor would in a terminal; the instructor never opens the hub in the browser.

Screenshots of every step go to ``build/screenshots/hub/``. Skipped, with the reason, where
Chromium, jupyterhub, npm (for configurable-http-proxy, or npm cannot reach its registry) or git
is missing.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import types
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import nbformat
import pytest
from conftest import REPO
from local_servers import CHROMIUM, free_port, headless_chromium, running, wait_for

from coursetools import class_report, hub_server
from coursetools.grading import write_course
from coursetools.hub import TARGET, publish, pull_link

pytestmark = pytest.mark.tools

CLASSROOM = REPO / "classroom"
SCREENSHOTS = REPO / "build" / "screenshots" / "hub"
LESSON = "01_squash"
PASSWORD = "capsedu-class"
EXERCISE_COUNT = 3  # lesson 01's: my_squash (Build it), input_length_for, votes_needed
LEARNERS = {"ada": EXERCISE_COUNT, "grace": 1}  # how many of them each one solves
# grace's answer to the second exercise: the square root forgotten (the check's hint names it)
WRONG = "def input_length_for(p: float) -> float:\n    return p / (1 - p)"
ENV_BIN = Path(sys.executable).parent
TEST_CONFIG = """
load_subconfig({classroom!r})
# what the test changes: ports of its own, one system user with a fixed password (it cannot
# create system users), root allowed, and the notebook model exposed
c.JupyterHub.bind_url = "http://127.0.0.1:{port}"
c.JupyterHub.hub_bind_url = "http://127.0.0.1:{hub_port}"
c.ConfigurableHTTPProxy.api_url = "http://127.0.0.1:{api_port}"
c.JupyterHub.authenticator_class = "dummy"
c.DummyAuthenticator.password = {password!r}
c.JupyterHub.spawner_class = "simple"
c.SimpleLocalProcessSpawner.home_dir_template = {homes!r} + "/{{username}}"
c.Spawner.args = ["--allow-root", "--LabApp.expose_app_in_browser=True"]
"""


def readme_hub_args() -> list[str]:
    r"""The ``HUB_ARGS`` of the ``make hub`` line in ``classroom/README.md``, split as the shell would."""
    lines = [line for line in (CLASSROOM / "README.md").read_text().splitlines() if line.startswith("make hub ")]
    assert len(lines) == 1, f"classroom/README.md should give one `make hub` line, found {lines}"
    words = shlex.split(lines[0].split("#")[0])
    return shlex.split(next(w.split("=", 1)[1] for w in words if w.startswith("HUB_ARGS=")))


def nbgrader(course: Path, exchange: Path, *args: str) -> str:
    r"""One of the instructor's nbgrader commands, run in the course folder."""
    env = dict(os.environ, CAPSEDU_EXCHANGE=str(exchange),
               PATH=os.pathsep.join([str(ENV_BIN), os.environ.get("PATH", "")]))
    result = subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=course, env=env,
                            capture_output=True, text=True, timeout=600, check=False)
    assert result.returncode == 0, f"nbgrader {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}"
    return result.stdout + result.stderr


@pytest.fixture(scope="module")
def hub(tmp_path_factory) -> Iterator[dict]:
    r"""``make hub``'s command with classroom/README.md's arguments, in folders and ports of the test's own."""
    pytest.importorskip("jupyterhub")
    pytest.importorskip("nbgrader")
    if CHROMIUM is None:
        pytest.skip("Chromium is not installed (Debian: `apt-get install -y chromium`)")
    if shutil.which("git") is None:
        pytest.skip("git is missing (nbgitpuller needs it)")
    try:
        hub_server.proxy_command()  # what make hub does first: from npm, once, into the cache
    except RuntimeError as error:
        pytest.skip(str(error))
    root = tmp_path_factory.mktemp("hub")
    folders = {name: root / name for name in ("state", "homes", "exchange", "course")}
    # git daemon runs as nobody when make hub runs as root: its folder must be one nobody can
    # enter (pytest's own temporary folders are private to their account)
    public = Path(tempfile.mkdtemp(prefix="capsedu-hub-", dir="/tmp"))
    public.chmod(0o755)
    folders["repos"] = public / "repos"
    folders["homes"].mkdir()
    folders["course"].mkdir()
    port, hub_port, api_port, git_port = (free_port() for _ in range(4))
    config = root / "jupyterhub_config.py"
    config.write_text(TEST_CONFIG.format(
        classroom=str(CLASSROOM / "jupyterhub_config.py"), port=port, hub_port=hub_port,
        api_port=api_port, password=PASSWORD, homes=str(folders["homes"])))
    args = readme_hub_args()
    assert hub_server.parser().parse_args(args).learners == list(LEARNERS), "the README's class is the test's"
    command = [sys.executable, "-m", "coursetools.hub_server", *args, "--state", str(folders["state"]),
               "--exchange", str(folders["exchange"]), "--repos", str(folders["repos"]),
               "--git-port", str(git_port), "--config", str(config),
               "--url", f"http://127.0.0.1:{port}", "--no-access-check"]
    with running(command, root / "hub.log", cwd=REPO) as process:
        url = f"http://127.0.0.1:{port}"
        wait_for(f"{url}/hub/health", process, root / "hub.log", "make hub", seconds=120)
        assert (folders["exchange"].stat().st_mode & 0o7777) == 0o1777, "the exchange must be writable by all"
        assert (folders["state"].stat().st_mode & 0o777) == 0o700, "the hub's secrets must be private"
        if os.geteuid() == 0:  # git daemon gave up root: its serving process is nobody's
            owners = subprocess.run(["ps", "-o", "user=", "-C", "git-daemon"], capture_output=True,
                                    text=True, check=False).stdout.split()
            assert "nobody" in owners, f"git daemon's processes run as {owners}"
        try:
            yield dict(folders, url=url, log=root / "hub.log",
                       repo=f"git://127.0.0.1:{git_port}/{hub_server.LEARNER_REPO}")
        finally:
            shutil.rmtree(public, ignore_errors=True)


@pytest.fixture(scope="module")
def browser(hub):
    with headless_chromium() as chromium:
        yield chromium


def shot(page, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"))


def log_in(browser, hub: dict, user: str):
    r"""A learner's browser: the hub's login page, then JupyterLab once the server has started."""
    page = browser.new_context(viewport={"width": 1400, "height": 900}).new_page()
    page.set_default_timeout(120_000)
    page.goto(f"{hub['url']}/hub/login")
    page.fill("input[name=username]", user)
    page.fill("input[name=password]", PASSWORD)
    shot(page, f"1-{user}-login")
    page.click("input[type=submit], button[type=submit]")
    page.wait_for_selector(".jp-LabShell", timeout=180_000)
    return page


def pull(page, hub: dict, user: str, step: str) -> None:
    r"""Open the course's nbgitpuller link and wait for lesson 00 and the file browser."""
    page.goto(pull_link(hub["url"], hub["repo"]))
    page.wait_for_selector(CURRENT, timeout=180_000)
    open_notebook(page, "00_start_here.ipynb")  # the link's urlpath
    page.locator(".jp-DirListing-item", has_text="00_start_here").first.wait_for()
    shot(page, f"{step}-{user}-pulled")


def learner_home(hub: dict, user: str) -> Path:
    return hub["homes"] / user


def test_publish_withholds_graded_lessons_and_names_bad_ones(tmp_path):
    repo = tmp_path / "learner"
    first = publish(repo, withhold=[LESSON])
    files = {p.relative_to(repo).as_posix() for p in repo.rglob("*.ipynb") if ".git" not in p.parts}
    assert f"{LESSON}.ipynb" not in files and f"worked/{LESSON}.worked.ipynb" not in files
    assert "00_start_here.ipynb" in files and "worked/00_start_here.worked.ipynb" in files
    stub = nbformat.read(repo / "04_margin_loss.ipynb", as_version=4)
    text = "\n".join(cell.source for cell in stub.cells)
    assert "### BEGIN SOLUTION" not in text and "YOUR CODE HERE" in text
    assert all(not cell.get("outputs") for cell in stub.cells if cell.cell_type == "code")
    assert publish(repo, withhold=[LESSON]) == first  # nothing changed: no new commit
    assert publish(repo) != first and (repo / f"{LESSON}.ipynb").exists()
    with pytest.raises(ValueError, match="withhold"):
        publish(repo, withhold=["01_squish"])
    clone = tmp_path / "clone"  # stands for the course's own clone (never the real one: a broken
    clone.mkdir()               # guard would commit into it)
    subprocess.run(["git", "init", "--quiet", str(clone)], check=True)
    (clone / "README.md").write_text("# capsedu\n")
    with pytest.raises(ValueError, match="dest=.*not a capsedu learner repository"):
        publish(clone)
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "todo.txt").write_text("mine")
    with pytest.raises(ValueError, match="dest=.*not a learner repository"):
        publish(tmp_path / "notes")
    with pytest.raises(ValueError, match="hub="):
        pull_link("hub.example.org", "https://example.org/learner")
    link = urllib.parse.urlsplit(pull_link("https://hub.example.org/", "https://example.org/learner"))
    assert link.path == "/hub/user-redirect/git-pull"
    assert urllib.parse.parse_qs(link.query) == {
        "repo": ["https://example.org/learner"], "branch": ["main"], "targetpath": [TARGET],
        "urlpath": [f"lab/tree/{TARGET}/00_start_here.ipynb"]}


def menu(page, top: str, item: str) -> None:
    r"""Click JupyterLab's main menu ``top``, then its entry ``item``."""
    page.locator(".lm-MenuBar-itemLabel", has_text=top).first.click()
    page.locator(".lm-Menu-itemLabel", has_text=item).first.click()


def assignment_list(page):
    r"""JupyterLab's Assignments list (nbgrader's menu), refreshed; a learner's menu has no Formgrader."""
    page.locator(".lm-MenuBar-itemLabel", has_text="Nbgrader").first.click()
    items = page.locator(".lm-Menu-itemLabel").all_inner_texts()
    assert "Assignment List" in items and "Formgrader" not in items, f"a learner's Nbgrader menu: {items}"
    page.keyboard.press("Escape")
    menu(page, "Nbgrader", "Assignment List")
    panel = page.locator("#nbgrader-assignment-list")
    panel.wait_for()
    return panel


EXERCISES = """() => window.jupyterapp.shell.currentWidget.content.widgets
  .map((cell, i) => [i, cell.model.type, cell.model.sharedModel.source])
  .filter(([i, type, source]) => type === 'code' && source.includes('YOUR CODE HERE')).map(([i]) => i)"""
FOCUSED = """(i) => { const notebook = window.jupyterapp.shell.currentWidget.content;
  return notebook.activeCellIndex === i && notebook.mode === 'edit'
    && notebook.widgets[i].node.contains(document.activeElement); }"""
SOURCE = """(i) => window.jupyterapp.shell.currentWidget.content.widgets[i].model.sharedModel.source"""
# Run All stops at the first error: in the graded release a failed check raises (grading mode)
RUN_ENDED = """() => {
  const panel = window.jupyterapp.shell.currentWidget;
  const cells = panel.content.widgets.filter(c => c.model.type === 'code' && c.model.sharedModel.source.trim());
  const failed = cells.some(c => c.model.outputs.toJSON().some(o => o.output_type === 'error'));
  return panel.sessionContext.session.kernel.status === 'idle'
    && (failed || cells.every(c => c.model.executionCount !== null));
}"""
OUTPUTS = """() => window.jupyterapp.shell.currentWidget.content.widgets
  .filter(cell => cell.model.type === 'code')
  .flatMap(cell => cell.model.outputs.toJSON())
  .map(o => o.text || (o.data && o.data['text/plain']) || o.evalue || '').join('\\n')"""
CURRENT = ".jp-NotebookPanel:not(.lm-mod-hidden)"


def open_notebook(page, name: str) -> None:
    r"""Wait until the notebook in front is ``name`` (JupyterLab restores the tabs of the last visit
    first: another notebook can be in front for a while), has rendered its cells and its kernel is
    ready."""
    page.wait_for_function("""(name) => { const app = window.jupyterapp, panel = app && app.shell.currentWidget;
        return panel && panel.context && panel.context.path.split('/').pop() === name
          && panel.sessionContext && panel.sessionContext.isReady; }""", arg=name)
    page.wait_for_selector(f"{CURRENT} .jp-Notebook .jp-Cell .jp-InputArea")


def type_into(page, index: int, text: str, tries: int = 4) -> None:
    r"""Click into the editor of code cell ``index`` of the open notebook, as a learner does, and
    replace its text with ``text``; checked in the notebook's model.

    JupyterLab may still move the focus while it settles after opening a notebook (restoring its
    side panels, starting the kernel). Typed keys that land outside the editor are command-mode
    shortcuts (``m`` turns the selected cells into markdown, ``a``/``b`` insert cells), so the text
    goes in with Playwright's ``fill``, which focuses the editor and inserts the text in one step,
    presses no key, and is made again if it did not arrive. A cell that never takes it fails with
    what held the focus, and a screenshot.
    """
    from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

    editor = page.locator(f'{CURRENT} .jp-Cell[data-windowed-list-index="{index}"] .cm-content')
    kind = page.evaluate("(i) => window.jupyterapp.shell.currentWidget.content.widgets[i].model.type", index)
    assert kind == "code", f"cell {index} is a {kind} cell, expected the exercise's code cell"
    for _ in range(tries):
        editor.click()  # Playwright scrolls it into view and waits until it takes the click
        with contextlib.suppress(PlaywrightTimeoutError):
            page.wait_for_function(FOCUSED, arg=index, timeout=5_000)
            editor.fill(text)
            page.wait_for_function(f"(i) => ({SOURCE})(i) === {json.dumps(text)}", arg=index, timeout=5_000)
            return
    shot(page, f"focus-lost-cell-{index}")
    holder = page.evaluate("() => document.activeElement && document.activeElement.outerHTML.slice(0, 200)")
    raise AssertionError(f"cell {index} never took the solution ({tries} tries); the focus is on {holder}, "
                         f"its source is {page.evaluate(SOURCE, index)[:200]!r}")


def solve(page, answers: list[str]) -> None:
    r"""Type ``answers`` into the first exercise cells of the open notebook, one each; the rest stay stubs."""
    exercises = page.evaluate(EXERCISES)
    assert len(exercises) == EXERCISE_COUNT, f"exercise cells {exercises}, expected {EXERCISE_COUNT}"
    for index, answer in zip(exercises, answers):
        type_into(page, index, answer)
    left = page.evaluate(EXERCISES)
    assert len(left) == EXERCISE_COUNT - len(answers), f"after typing, exercise cells still stubbed: {left}"


def validate(page) -> str:
    r"""Press nbgrader's *Validate* in the notebook's toolbar; the text of the dialog it opens."""
    page.locator(f"{CURRENT} .validate-button").click()
    message = page.locator("#validation-message")
    message.wait_for(timeout=300_000)
    text = message.inner_text()
    shot(page, "3-grace-validated")
    page.locator(".jp-Dialog button", has_text="Ok").first.click()
    return text


def run_all_and_save(page) -> str:
    r"""Run every cell (JupyterLab's Run menu) until the end or a failed check, save (Ctrl+S); the outputs' text."""
    menu(page, "Run", "Run All Cells")
    page.wait_for_function(RUN_ENDED, timeout=300_000)
    page.keyboard.press("Control+s")
    page.wait_for_function("() => !window.jupyterapp.shell.currentWidget.context.model.dirty")
    return page.evaluate(OUTPUTS)


def add_a_note(page, tab: str, note: str) -> None:
    r"""In the notebook ``tab``, insert a cell above the first (keyboard ``A``), type ``note``, save."""
    page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab", has_text=tab).click()
    open_notebook(page, tab)
    page.evaluate("""() => { const notebook = window.jupyterapp.shell.currentWidget.content;
        notebook.activeCellIndex = 0; notebook.mode = 'command'; notebook.node.focus(); }""")
    page.keyboard.press("a")
    page.keyboard.press("Enter")
    page.keyboard.insert_text(note)
    page.keyboard.press("Escape")
    page.keyboard.press("Control+s")
    page.wait_for_function("() => !window.jupyterapp.shell.currentWidget.context.model.dirty")
    shot(page, "6-ada-edited")


def fetch_solve_submit(page, user: str, answers: list[str]) -> tuple[str, str]:
    r"""Fetch the assignment, type ``answers``, run, save, validate and submit; the checks' output and
    what *Validate* said."""
    panel = assignment_list(page)
    panel.locator("#released_assignments_list button", has_text="Fetch").click()
    fetched = panel.locator("#fetched_assignments_list")
    fetched.locator("button", has_text="Submit").wait_for()
    shot(page, f"3-{user}-fetched")
    page.goto(page.url.split("/lab")[0] + f"/lab/tree/{LESSON}/{LESSON}.ipynb")
    open_notebook(page, f"{LESSON}.ipynb")
    solve(page, answers)
    output = run_all_and_save(page)
    shot(page, f"3-{user}-solved")
    validation = validate(page) if user == "grace" else ""
    panel = assignment_list(page)
    panel.locator("#fetched_assignments_list button", has_text="Submit").click()
    panel.locator("#submitted_assignments_list", has_text=LESSON).wait_for()
    shot(page, f"3-{user}-submitted")
    return output, validation


def release(hub: dict) -> list[str]:
    r"""The instructor releases lesson 01; its solutions (for the learners to type)."""
    course = hub["course"]
    write_course([REPO / "notebooks" / f"{LESSON}.ipynb"], course)
    nbgrader(course, hub["exchange"], "generate_assignment", LESSON, "--force")
    nbgrader(course, hub["exchange"], "release_assignment", LESSON, "--force")
    source = nbformat.read(course / "source" / LESSON / f"{LESSON}.ipynb", as_version=4)
    solutions = [cell.source for cell in source.cells if cell.metadata.get("nbgrader", {}).get("solution")]
    assert len(solutions) == EXERCISE_COUNT, f"lesson 01 should hold {EXERCISE_COUNT} graded exercises"
    return solutions


def grade(hub: dict) -> dict[str, tuple[float, float]]:
    r"""The instructor collects, autogrades and returns feedback; each learner's score."""
    course = hub["course"]
    for command in (["collect"], ["autograde", "--create"], ["generate_feedback"], ["release_feedback"]):
        nbgrader(course, hub["exchange"], command[0], LESSON, *command[1:])
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        return {user: (gradebook.find_submission(LESSON, user).score,
                       gradebook.find_submission(LESSON, user).max_score) for user in LEARNERS}


def class_report_names_graces_mistake(hub: dict, browser, out: Path) -> None:
    r"""``make class-report``'s command on the autograded lesson: each check's verdicts counted,
    grace's forgotten square root named once; a screenshot of the page (the instructors' page shows it)."""
    counts = {}
    for cell in class_report.lesson_report(hub["course"], LESSON, class_report.gradebook_learners(hub["course"])).cells:
        counts[cell.grade_id.rsplit("-", 1)[1]] = {mistake: len(who) for mistake, who, _ in cell.rows()}
    assert counts == {"1": {"passed": 2}, "2": {"passed": 1, "squared-length": 1},
                      "3": {"passed": 1, "stub": 1}}, counts
    class_report.main(["--course", str(hub["course"]), "--out", str(out), LESSON])
    page = browser.new_page(viewport={"width": 1000, "height": 900})
    page.goto((out / f"{LESSON}.html").as_uri())
    text = page.inner_text("body")
    assert "2 learner(s) submitted" in text and "the squared length" in text, text
    assert not any(re.search(rf"\b{user}\b", text) for user in LEARNERS), "names in an anonymous report"
    page.screenshot(path=str(SCREENSHOTS / "7-class-report.png"), full_page=True)
    page.close()


def fetch_feedback(page, hub: dict, user: str) -> str:
    r"""The learner fetches the feedback in the Assignments list; the report's HTML."""
    panel = assignment_list(page)
    panel.locator("#submitted_assignments_list button", has_text="Fetch Feedback").click()
    panel.locator("#submitted_assignments_list a", has_text="view feedback").wait_for()
    shot(page, f"5-{user}-feedback")
    reports = list((learner_home(hub, user) / LESSON / "feedback").glob(f"*/{LESSON}.html"))
    assert len(reports) == 1, f"{user}'s feedback: {reports}"
    return reports[0].read_text()


def republish_with_a_change(hub: dict, lessons: Path) -> None:
    r"""The course publishes lesson 01 (closed) and a new closing cell in lesson 00."""
    shutil.copytree(REPO / "notebooks", lessons, ignore=shutil.ignore_patterns("src", "*.py", "*.toml"))
    lesson00 = nbformat.read(lessons / "00_start_here.ipynb", as_version=4)
    lesson00.cells.append(nbformat.v4.new_markdown_cell("A closing cell the course added later."))
    nbformat.write(lesson00, lessons / "00_start_here.ipynb")
    publish(hub["repos"] / hub_server.LEARNER_REPO, lessons=lessons)


@pytest.mark.browser
def test_a_class_pulls_fetches_submits_and_gets_graded(hub, browser, tmp_path):
    solutions = release(hub)
    pages = {}
    for user, count in LEARNERS.items():
        pages[user] = page = log_in(browser, hub, user)
        pull(page, hub, user, "2")
        home = learner_home(hub, user) / TARGET
        assert (home / "00_start_here.ipynb").exists() and (home / "worked" / "02_primary_capsules.worked.ipynb").exists()
        assert not (home / f"{LESSON}.ipynb").exists(), "a graded lesson must come through nbgrader, not the pull"
        answers = solutions[:count] + ([WRONG] if count < EXERCISE_COUNT else [])
        output, validation = fetch_solve_submit(page, user, answers)
        # one ✅ for each solved exercise (the first is Build it's squash); the wrong one's hint
        assert output.count("✅") == count, f"{user}'s checks:\n{output[-2000:]}"
        assert ("take its square root" in output) == (count < EXERCISE_COUNT), f"{user}'s checks:\n{output[-2000:]}"
        if user == "grace":  # Validate, before she submits, fails the wrong answer with its hint
            assert "failed" in validation and "take its square root" in validation, validation[-2000:]

    assert grade(hub) == {"ada": (3.0, 3.0), "grace": (1.0, 3.0)}
    # what her feedback shows: the failed checks, and no cell after them failing for want of their result
    graded = nbformat.read(hub["course"] / "autograded" / "grace" / LESSON / f"{LESSON}.ipynb", as_version=4)
    errors = [o.ename for c in graded.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert errors == ["CheckFailed", "CheckFailed"], errors  # exercise 2 wrong, exercise 3 the stub
    class_report_names_graces_mistake(hub, browser, tmp_path / "report")
    for user, count in LEARNERS.items():
        assert f"Score: {count:.1f} / {EXERCISE_COUNT:.1f}" in fetch_feedback(pages[user], hub, user), f"{user}'s feedback lacks the score"

    page, lesson00 = pages["ada"], learner_home(hub, "ada") / TARGET / "00_start_here.ipynb"
    add_a_note(page, "00_start_here.ipynb", "# ada's own notes")
    assert "ada's own notes" in lesson00.read_text(), "the learner's edit was not saved"
    republish_with_a_change(hub, tmp_path / "lessons")
    pull(page, hub, "ada", "6")
    assert (lesson00.parent / f"{LESSON}.ipynb").exists(), "the second pull did not bring the newly published lesson"
    merged = nbformat.read(lesson00, as_version=4)
    nbformat.validate(merged)
    sources = [cell.source for cell in merged.cells]
    assert "# ada's own notes" in sources, "the second pull lost the learner's edit"
    assert "A closing cell the course added later." in sources, "the second pull lost the course's change"


def test_the_kubernetes_values_make_the_same_choices_as_the_one_machine_hub(tmp_path):
    import yaml

    values = yaml.safe_load((CLASSROOM / "z2jh" / "values.yaml").read_text())
    single = values["singleuser"]
    from traitlets.config import Config

    path, config = CLASSROOM / "jupyterhub_config.py", Config()
    exec(compile(path.read_text(), str(path), "exec"), {"get_config": lambda: config, "__file__": str(path)})
    assert (config.Spawner.mem_guarantee, config.Spawner.mem_limit) == (single["memory"]["guarantee"],
                                                                        single["memory"]["limit"])
    assert (config.Spawner.cpu_guarantee, config.Spawner.cpu_limit) == (single["cpu"]["guarantee"],
                                                                        single["cpu"]["limit"])
    assert single["extraEnv"]["CAPSEDU_EXCHANGE"] in {m["mountPath"] for m in single["storage"]["extraVolumeMounts"]}
    # the hub's extra configuration runs: learners get the learners' folder, admins nothing
    snippet, c = values["hub"]["extraConfig"]["capsedu-learners"], types.SimpleNamespace()
    c.KubeSpawner = types.SimpleNamespace(environment={})
    exec(compile(snippet, "values.yaml:hub.extraConfig", "exec"), {"c": c})
    learner_config = c.KubeSpawner.environment["JUPYTER_CONFIG_PATH"]
    spawner = types.SimpleNamespace(user=types.SimpleNamespace(admin=False))
    assert learner_config(spawner).replace("/opt/capsedu/", "") == "classroom/learner_jupyter"
    assert (REPO / learner_config(spawner).replace("/opt/capsedu/", "")).is_dir()
    spawner.user.admin = True
    assert learner_config(spawner) == ""


def test_check_values_names_what_the_schema_rejects(tmp_path):
    sys.path.insert(0, str(CLASSROOM / "z2jh"))
    try:
        import check_values
    finally:
        sys.path.pop(0)
    chart = tmp_path / "chart"
    chart.mkdir()
    (chart / "values.yaml").write_text("singleuser:\n  memory: {limit: null}\n")
    (chart / "values.schema.json").write_text(json.dumps({"type": "object", "properties": {"singleuser": {
        "type": "object", "properties": {"memory": {"type": "object", "additionalProperties": False,
                                                    "properties": {"limit": {}, "guarantee": {}}}}}}}))
    bad = tmp_path / "bad.yaml"
    bad.write_text("singleuser:\n  memory: {limt: 2G}\n")
    assert check_values.violations(chart, CLASSROOM / "z2jh" / "values.yaml") == []
    assert any("limt" in v for v in check_values.violations(chart, bad))
    with pytest.raises(FileNotFoundError, match="chart="):
        check_values.violations(tmp_path, bad)


def test_make_hub_runs_the_server_with_the_readmes_arguments():
    makefile = (REPO / "Makefile").read_text()
    recipe = makefile.split("\nhub: ", 1)[1].split("\n\n", 1)[0]
    assert "$(PY) -m coursetools.hub_server $(HUB_ARGS)" in recipe and "CLASSROOM_STAMP" in recipe.splitlines()[0]
    args = hub_server.parser().parse_args(readme_hub_args())
    assert (args.instructors, args.learners, args.withhold) == (["instructor"], list(LEARNERS), [LESSON])
    assert (args.state, args.exchange) == (Path("/srv/capsedu-hub"), Path("/srv/nbgrader/exchange"))
    assert (args.repos, args.git_user) == (Path("/srv/capsedu-repos"), "nobody")


def test_the_access_check_names_what_learner_accounts_cannot_enter():
    with tempfile.TemporaryDirectory(dir="/tmp") as folder:  # pytest's own tmp_path sits in a private folder
        check_access_in(Path(folder))


def check_access_in(tmp_path: Path) -> None:
    private = tmp_path / "home"
    (private / "env" / "bin").mkdir(parents=True)
    (private / "env" / "bin" / "python").write_text("")
    tmp_path.chmod(0o755)
    private.chmod(0o700)
    problems = hub_server.access_problems({"its Python": private / "env" / "bin" / "python",
                                           "the data": tmp_path / "nowhere"})
    assert problems == [f"its Python: {private / 'env' / 'bin' / 'python'} - other accounts cannot enter "
                        f"{private} (drwx------)", f"the data: {tmp_path / 'nowhere'} does not exist"]
    private.chmod(0o755)
    (private / "env" / "bin" / "python").chmod(0o640)  # the folders open, the file itself unreadable
    assert hub_server.blocked_by(private / "env" / "bin" / "python") == private / "env" / "bin" / "python"
    (private / "env" / "bin" / "python").chmod(0o755)
    assert hub_server.access_problems({"its Python": private / "env" / "bin" / "python"}) == []


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("runuser") is None, reason="needs root and runuser")
def test_the_access_check_agrees_with_an_account_that_is_not_root():
    # `nobody` is neither owner nor group of the course's files: what the check predicts for a learner
    problems = hub_server.access_problems(hub_server.learner_paths())
    result = subprocess.run(["runuser", "-u", "nobody", "--", sys.executable, "-c", "import capsedu"],
                            capture_output=True, text=True, cwd="/", check=False)
    assert (result.returncode == 0) == (not problems), f"check: {problems}; nobody: {result.stderr[-500:]}"


def test_prepare_folders_creates_what_is_absent_and_never_changes_what_exists(tmp_path):
    folders = {"state": tmp_path / "state", "exchange": tmp_path / "srv" / "exchange",
               "repos": tmp_path / "srv" / "repos"}
    assert hub_server.prepare_folders(folders) == list(folders.values())
    assert (tmp_path / "state").stat().st_mode & 0o7777 == 0o700
    assert (tmp_path / "srv" / "exchange").stat().st_mode & 0o7777 == 0o1777
    assert (tmp_path / "srv" / "repos").stat().st_mode & 0o7777 == 0o755
    assert hub_server.prepare_folders(folders) == []  # as it made them: nothing to do, nothing to say
    shared = tmp_path / "srv-like"  # `--state /srv`: an existing folder other accounts use
    shared.mkdir(mode=0o755)
    shared.chmod(0o755)
    (shared / "someone-elses").mkdir()
    with pytest.raises(SystemExit, match=rf"--state {shared} is drwxr-xr-x.*mode 700.*chmod 700 {shared}"):
        hub_server.prepare_folders({**folders, "state": shared})
    assert shared.stat().st_mode & 0o7777 == 0o755, "make hub changed a folder it did not create"
    folders["exchange"].chmod(0o755)
    with pytest.raises(SystemExit, match=r"--exchange .* mode 1777"):
        hub_server.prepare_folders(folders)
    assert folders["exchange"].stat().st_mode & 0o7777 == 0o755


def test_the_tamper_check_names_what_another_account_could_change():
    """What root runs must not lie where another account can write: a folder owned by someone else,
    or writable by group or others, on the way to it or inside it (a sticky folder such as /tmp
    protects what others do not own)."""
    with tempfile.TemporaryDirectory(dir="/tmp") as folder:  # /tmp: sticky and writable by all
        root = Path(folder)
        (root / "clone" / "coursetools").mkdir(parents=True)
        code = root / "clone" / "coursetools" / "hub_server.py"
        code.write_text("print('hub')\n")
        (root / "clone" / ".lock").write_text("")  # uv's lock file: 666 by design, never run
        (root / "clone" / ".lock").chmod(0o666)
        for path in (root, root / "clone", root / "clone" / "coursetools", code):
            path.chmod(0o755 if path.is_dir() else 0o644)
        assert hub_server.tamper_problems({"the clone": root / "clone"}) == []
        code.chmod(0o646)
        assert hub_server.tamper_problems({"the clone": root / "clone"}) == [
            f"the clone: {code} is writable by others (-rw-r--rw-)"]
        code.chmod(0o644)
        (root / "clone").chmod(0o775)
        assert hub_server.tamper_problems({"its Python": code}) == [
            f"its Python: {root / 'clone'} is writable by its group (drwxrwxr-x)"]
        (root / "clone").chmod(0o755)
        if os.geteuid() == 0:
            os.chown(code, 65534, -1)  # nobody's
            assert hub_server.tamper_problems({"the clone": root / "clone"}) == [
                f"the clone: {code} belongs to uid 65534"]


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("git") is None, reason="needs root and git")
def test_git_daemon_gives_up_root_and_still_serves_the_learner_repository():
    with tempfile.TemporaryDirectory(dir="/tmp") as folder:
        repos = Path(folder) / "repos"
        hub_server.prepare_folders({"repos": repos})
        Path(folder).chmod(0o755)
        subprocess.run(["git", "init", "--quiet", "--bare", str(repos / "r")], check=True)
        port = free_port()
        command = hub_server.git_daemon(repos, port, "nobody")
        assert command[:3] == ["git", "-c", "safe.directory=*"] and "--user=nobody" in command
        with running(command, Path(folder) / "daemon.log") as daemon:
            for _ in range(50):
                listed = subprocess.run(["git", "ls-remote", f"git://127.0.0.1:{port}/r"],
                                        capture_output=True, text=True, check=False)
                if listed.returncode == 0 or daemon.poll() is not None:
                    break
                time.sleep(0.1)
            owners = subprocess.run(["ps", "-o", "user=", "--ppid", str(daemon.pid)], capture_output=True,
                                    text=True, check=False).stdout.split()
        assert listed.returncode == 0, listed.stderr + (Path(folder) / "daemon.log").read_text()
        assert owners and set(owners) == {"nobody"}, f"git daemon serves as {owners}"


def test_the_proxy_is_installed_from_its_lockfile_with_integrity_checked(tmp_path):
    """configurable-http-proxy comes from classroom/proxy/package-lock.json by `npm ci
    --ignore-scripts` (never an unpinned `npm install` as root), and a lockfile whose hash does
    not match what the registry serves is refused."""
    if shutil.which("npm") is None or shutil.which("configurable-http-proxy"):
        pytest.skip("needs npm, and no configurable-http-proxy on PATH")
    lock = json.loads((hub_server.PROXY_LOCK / "package-lock.json").read_text())
    pinned = lock["packages"]["node_modules/configurable-http-proxy"]
    assert pinned["integrity"].startswith("sha512-") and all(
        "integrity" in entry for name, entry in lock["packages"].items() if name)
    try:
        command = hub_server.proxy_command(tmp_path / "cache")
    except RuntimeError as error:
        pytest.skip(f"the npm registry cannot be reached: {error}")
    installed = json.loads((tmp_path / "cache" / "node_modules" / "configurable-http-proxy" / "package.json").read_text())
    assert installed["version"] == pinned["version"] and Path(command).exists()
    assert (tmp_path / "cache" / "package-lock.json").read_bytes() == \
        (hub_server.PROXY_LOCK / "package-lock.json").read_bytes(), "not installed from the committed lockfile"
    assert hub_server.proxy_command(tmp_path / "cache") == command  # installed once
    forged = tmp_path / "forged"
    forged.mkdir()
    shutil.copyfile(hub_server.PROXY_LOCK / "package.json", forged / "package.json")
    lock["packages"]["node_modules/configurable-http-proxy"]["integrity"] = "sha512-" + "A" * 86 + "=="
    (forged / "package-lock.json").write_text(json.dumps(lock))
    with pytest.raises(RuntimeError, match="npm ci could not install"):
        hub_server.proxy_command(tmp_path / "cache2", lock=forged)

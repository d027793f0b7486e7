"""A class on a real JupyterHub: log in, pull the lessons, fetch, submit, get graded and feedback.

The test starts JupyterHub (``classroom/jupyterhub_config.py``, with configurable-http-proxy from
npm) on 127.0.0.1 with one instructor and two learners, a git daemon on loopback serving the
learner repository (``python -m coursetools.hub publish``), and nbgrader's exchange in a shared
folder. It then plays a class, the learners' side in headless Chromium (Playwright):

1. the instructor publishes the learner repository, lesson 01 withheld, and releases lesson 01 as
   an nbgrader assignment (``nbgrader generate_assignment`` / ``release_assignment``);
2. each learner logs in on the hub's login page, opens the nbgitpuller link (lessons with stubs
   and the worked lessons arrive in ``~/capsedu``; lesson 01 does not), edits lesson 00;
3. each learner fetches 01_squash in JupyterLab's *Assignments* list, types solutions into its
   exercise cells (ada both, grace the first), runs every cell, saves and submits;
4. the instructor collects, autogrades, generates and releases feedback: 2/2 and 1/2;
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
import shutil
import subprocess
import sys
import types
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import nbformat
import pytest
from conftest import REPO
from local_servers import CHROMIUM, free_port, headless_chromium, running, wait_for

from coursetools.grading import write_course
from coursetools.hub import TARGET, publish, pull_link
from coursetools.workspace import settle_lab_settings

pytestmark = pytest.mark.tools

CLASSROOM = REPO / "classroom"
SCREENSHOTS = REPO / "build" / "screenshots" / "hub"
LESSON = "01_squash"
PASSWORD = "capsedu-class"
EXERCISE_COUNT = 3  # lesson 01's: my_squash (Build it), input_length_for, votes_needed
LEARNERS = {"ada": EXERCISE_COUNT, "grace": 1}  # how many of them each one solves
CHP_CACHE = Path(os.environ.get("CAPSEDU_HUB_CACHE", Path.home() / ".cache" / "capsedu" / "hub"))
ENV_BIN = Path(sys.executable).parent
TEST_CONFIG = """
load_subconfig({classroom!r})
# what the test changes: ports and folders of its own, the proxy from npm, one system user with a
# fixed password (it cannot create system users), root allowed, and the notebook model exposed
c.JupyterHub.bind_url = "http://127.0.0.1:{port}"
c.JupyterHub.hub_bind_url = "http://127.0.0.1:{hub_port}"
c.ConfigurableHTTPProxy.api_url = "http://127.0.0.1:{api_port}"
c.ConfigurableHTTPProxy.command = [{chp!r}]
c.JupyterHub.authenticator_class = "dummy"
c.DummyAuthenticator.password = {password!r}
c.JupyterHub.spawner_class = "simple"
c.SimpleLocalProcessSpawner.home_dir_template = {homes!r} + "/{{username}}"
c.Spawner.args = ["--allow-root", "--LabApp.expose_app_in_browser=True"]
"""


def proxy_command() -> str:
    r"""configurable-http-proxy: on PATH, else installed once from npm into the cache folder."""
    found = shutil.which("configurable-http-proxy")
    local = CHP_CACHE / "node_modules" / ".bin" / "configurable-http-proxy"
    if found or local.exists():
        return found or str(local)
    if shutil.which("npm") is None:
        pytest.skip("npm is missing: it installs configurable-http-proxy (Debian: apt-get install -y npm)")
    CHP_CACHE.mkdir(parents=True, exist_ok=True)
    try:
        subprocess.run(["npm", "install", "--prefix", str(CHP_CACHE), "--no-audit", "--no-fund",
                        "configurable-http-proxy@4"], check=True, capture_output=True, text=True, timeout=300)
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as error:
        pytest.skip(f"npm could not install configurable-http-proxy: {getattr(error, 'stderr', '')[-500:]}")
    return str(local)


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
    r"""JupyterHub, a git daemon serving the learner repository, and the shared folders."""
    pytest.importorskip("jupyterhub")
    pytest.importorskip("nbgrader")
    if CHROMIUM is None:
        pytest.skip("Chromium is not installed (Debian: `apt-get install -y chromium`)")
    if shutil.which("git") is None:
        pytest.skip("git is missing (nbgitpuller needs it)")
    root = tmp_path_factory.mktemp("hub")
    folders = {name: root / name for name in ("state", "homes", "exchange", "repos", "course")}
    for folder in folders.values():
        folder.mkdir()
    folders["exchange"].chmod(0o1777)  # every learner writes into it, as nbgrader's docs ask
    publish(folders["repos"] / "capsedu-learner", withhold=[LESSON])
    settle_lab_settings()  # what `python -m coursetools.hub settle-lab` does: no news prompt
    port, hub_port, api_port, git_port = (free_port() for _ in range(4))
    config = root / "jupyterhub_config.py"
    config.write_text(TEST_CONFIG.format(
        classroom=str(CLASSROOM / "jupyterhub_config.py"), port=port, hub_port=hub_port,
        api_port=api_port, chp=proxy_command(), password=PASSWORD, homes=str(folders["homes"])))
    env = dict(os.environ, CAPSEDU_HUB_STATE=str(folders["state"]), CAPSEDU_EXCHANGE=str(folders["exchange"]),
               CAPSEDU_INSTRUCTORS="instructor", CAPSEDU_LEARNERS=" ".join(LEARNERS))
    daemon = ["git", "daemon", "--reuseaddr", "--listen=127.0.0.1", f"--port={git_port}",
              f"--base-path={folders['repos']}", "--export-all", str(folders["repos"])]
    with running(daemon, root / "git-daemon.log"), \
            running([str(ENV_BIN / "jupyterhub"), "-f", str(config)], root / "hub.log", cwd=root, env=env) as process:
        url = f"http://127.0.0.1:{port}"
        wait_for(f"{url}/hub/health", process, root / "hub.log", "JupyterHub")
        yield dict(folders, url=url, repo=f"git://127.0.0.1:{git_port}/capsedu-learner", log=root / "hub.log")


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


def solve(page, solutions: list[str], count: int) -> None:
    r"""Type the first ``count`` solutions into the exercise cells of the open notebook."""
    exercises = page.evaluate(EXERCISES)
    assert len(exercises) == len(solutions), f"exercise cells {exercises}, expected {len(solutions)}"
    for index, solution in zip(exercises[:count], solutions):
        type_into(page, index, solution)
    left = page.evaluate(EXERCISES)
    assert len(left) == len(solutions) - count, f"after typing, exercise cells still stubbed: {left}"


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


def fetch_solve_submit(page, user: str, solutions: list[str], count: int) -> str:
    r"""Fetch the assignment, solve ``count`` exercises, run, save and submit; the checks' output."""
    panel = assignment_list(page)
    panel.locator("#released_assignments_list button", has_text="Fetch").click()
    fetched = panel.locator("#fetched_assignments_list")
    fetched.locator("button", has_text="Submit").wait_for()
    shot(page, f"3-{user}-fetched")
    page.goto(page.url.split("/lab")[0] + f"/lab/tree/{LESSON}/{LESSON}.ipynb")
    open_notebook(page, f"{LESSON}.ipynb")
    solve(page, solutions, count)
    output = run_all_and_save(page)
    shot(page, f"3-{user}-solved")
    panel = assignment_list(page)
    panel.locator("#fetched_assignments_list button", has_text="Submit").click()
    panel.locator("#submitted_assignments_list", has_text=LESSON).wait_for()
    shot(page, f"3-{user}-submitted")
    return output


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
    publish(hub["repos"] / "capsedu-learner", lessons=lessons)


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
        output = fetch_solve_submit(page, user, solutions, count)
        # one ✅ for each solved exercise (the first is Build it's squash); a hint for the rest
        assert output.count("✅") == count, f"{user}'s checks:\n{output[-2000:]}"
        assert ("still the stub" in output) == (count < EXERCISE_COUNT), f"{user}'s checks:\n{output[-2000:]}"

    assert grade(hub) == {"ada": (3.0, 3.0), "grace": (1.0, 3.0)}
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

"""The lessons in a real JupyterLab: run all cells, move every slider, type, press reset.

JupyterLab starts from the project's environment on 127.0.0.1 (a free port, a random token,
``--expose-app-in-browser`` so the test can call JupyterLab's own commands) over a temporary copy
of the lessons, so that autosave can never touch the committed notebooks. Headless Debian
Chromium, driven by Playwright, opens every lesson whose widgets hold controls and:

* asserts that the kernel starts without a dialog (no "Select Kernel" prompt);
* runs all cells in the fast profile (``CAPSEDU_FAST=1``) and asserts that no cell shows an error;
* types a new index into every image-index box and asserts the picture changed;
* moves every slider by keyboard (one step right, or left for a slider at its maximum) and
  asserts that the explorer's picture changed;
* presses every reset button and asserts that its sliders are back at 0;
* runs axe-core's WCAG 2.0/2.1 A and AA rules and reports what the lesson's outputs violate apart
  from what JupyterLab itself does; the outputs may break only the rules that JupyterLab's image
  renderer and ipywidgets' sliders break whatever a lesson does (``UPSTREAM``);
* saves a screenshot per lesson to ``build/screenshots/``.

Skipped, with its reason, only where Chromium is missing (``.ci/run`` installs it).
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
from a11y import AXE_RUN, axe_script
from conftest import REPO
from local_servers import CHROMIUM, free_port, headless_chromium, running, wait_for

pytestmark = pytest.mark.browser

NOTEBOOKS = REPO / "notebooks"
SCREENSHOTS = REPO / "build" / "screenshots"
CONTROL = ("SliderModel", "ButtonModel", "IntTextModel")


def lessons_with_controls() -> list[str]:
    r"""Lessons whose stored widget state holds a slider, a button or a number box."""
    found = []
    for path in sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb")):
        state = json.loads(path.read_text(encoding="utf-8")).get("metadata", {}).get("widgets", {})
        models = state.get("application/vnd.jupyter.widget-state+json", {}).get("state", {})
        if any(m.get("model_name", "").endswith(CONTROL) for m in models.values()):
            found.append(path.stem)
    return found


@contextlib.contextmanager
def serve(command: list[str], env: dict[str, str], root) -> Iterator[str]:
    r"""Run JupyterLab ``command`` (``--port``/``--IdentityProvider.token`` added) until the block
    ends; yields its base URL and token as ``"URL|TOKEN"``."""
    port, token = free_port(), secrets.token_hex(16)
    command = [*command, "--no-browser", "--ip=127.0.0.1", f"--port={port}",
               f"--IdentityProvider.token={token}", "--expose-app-in-browser", "--allow-root"]
    log, base = root / "server.log", f"http://127.0.0.1:{port}"
    with running(command, log, cwd=root, env=env) as server:
        wait_for(f"{base}/api/status?token={token}", server, log, "JupyterLab")
        yield f"{base}|{token}"


@pytest.fixture(scope="module")
def lab(tmp_path_factory) -> Iterator[str]:
    r"""A running JupyterLab over a copy of the lessons; yields its base URL with the token."""
    if CHROMIUM is None:
        pytest.skip("Chromium is not installed (Debian: `apt-get install -y chromium`)")
    root = tmp_path_factory.mktemp("lab")
    for path in NOTEBOOKS.glob("*.ipynb"):
        shutil.copy(path, root / path.name)
    shutil.copytree(NOTEBOOKS / "src", root / "src")
    shutil.copy(NOTEBOOKS / "jupytext.toml", root / "jupytext.toml")
    command = [sys.executable, "-m", "jupyterlab", f"--ServerApp.root_dir={root}", "--LabApp.news_url="]
    env = dict(os.environ, CAPSEDU_FAST="1", JUPYTER_CONFIG_DIR=str(root / ".jupyter-config"))
    with serve(command, env, root) as url:
        yield url


@pytest.fixture(scope="module")
def browser(lab):
    with headless_chromium() as chromium:
        yield chromium


KERNEL_IDLE = """() => {
  const panel = window.jupyterapp && window.jupyterapp.shell.currentWidget;
  const kernel = panel && panel.sessionContext && panel.sessionContext.session
                 && panel.sessionContext.session.kernel;
  return !!kernel && kernel.status === 'idle' && panel.sessionContext.isReady;
}"""
ALL_RUN = """() => {
  const panel = window.jupyterapp.shell.currentWidget;
  const cells = panel.content.widgets.filter(c => c.model.type === 'code' && c.model.sharedModel.source.trim());
  const kernel = panel.sessionContext.session.kernel;
  return kernel.status === 'idle' && cells.every(c => c.model.executionCount !== null);
}"""
NEWS_SETTING = """async () => {
  await window.jupyterapp.restored;
  const plugin = await window.jupyterapp.serviceManager.settings.fetch(
    '@jupyterlab/apputils-extension:notification');
  const user = (plugin.settings || {}).fetchNews;
  return user !== undefined ? user : plugin.schema.properties.fetchNews.default;
}"""
ERRORS = """() => window.jupyterapp.shell.currentWidget.content.widgets
  .filter(c => c.model.type === 'code')
  .flatMap((c, i) => c.model.outputs.toJSON().filter(o => o.output_type === 'error')
                       .map(o => `cell ${i}: ${o.ename}: ${o.evalue}`))"""


def open_and_run(page, base: str, token: str, lesson: str) -> float:
    r"""Open ``lesson`` in JupyterLab, wait for its kernel, run all cells; return the seconds taken."""
    start = time.monotonic()
    page.goto(f"{base}/lab/tree/{lesson}.ipynb?token={token}&reset")
    page.wait_for_function("() => window.jupyterapp && window.jupyterapp.shell.currentWidget", timeout=60_000)
    page.wait_for_function(KERNEL_IDLE, timeout=60_000)
    dialogs = page.locator(".jp-Dialog").all_inner_texts()
    assert not dialogs, f"{lesson}: a dialog appeared when the lesson opened: {dialogs}"
    page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")
    page.wait_for_function(ALL_RUN, timeout=150_000, polling=500)
    errors = page.evaluate(ERRORS)
    assert not errors, f"{lesson}: cells with errors after Run All: {errors}"
    return time.monotonic() - start


def explorers(page):
    r"""Every explorer: a widget box that holds an image and at least one control."""
    boxes = page.locator(".jp-OutputArea-output .widget-vbox").filter(has=page.locator(".widget-image"))
    return [box for box in boxes.all() if box.locator(".widget-slider, button, input").count()]


def picture(box) -> str:
    return box.locator("img").first.get_attribute("src") or ""


def wait_for_new_picture(page, box, before: str, what: str) -> None:
    deadline = time.monotonic() + 15
    while picture(box) == before:
        assert time.monotonic() < deadline, f"the picture did not change after {what}"
        page.wait_for_timeout(100)


def move_every_slider(page, box) -> int:
    moved = 0
    for slider in box.locator(".widget-slider").all():
        name = slider.locator(".widget-label").inner_text()
        handle = slider.locator(".noUi-handle")
        at_max = handle.get_attribute("aria-valuenow") == handle.get_attribute("aria-valuemax")
        before = picture(box)
        handle.focus()
        handle.press("ArrowLeft" if at_max else "ArrowRight")
        wait_for_new_picture(page, box, before, f"moving slider {name!r}")
        moved += 1
    return moved


def type_every_index(page, box) -> None:
    for field in box.locator("input[type=number]").all():
        before, value = picture(box), int(field.input_value())
        field.fill(str(value + 1))
        field.press("Enter")
        wait_for_new_picture(page, box, before, f"typing image index {value + 1}")


def press_every_reset(page, box) -> None:
    for button in box.locator("button", has_text="reset").all():
        before = picture(box)
        button.click()
        wait_for_new_picture(page, box, before, "pressing reset")
        values = [h.get_attribute("aria-valuenow") for h in box.locator(".noUi-handle").all()]
        assert all(float(v) == 0 for v in values), f"sliders after reset: {values}"


# Where the course's outputs still fail axe-core in JupyterLab, for reasons outside the course: JupyterLab
# draws a notebook's images without alt (and reads none from the cell's metadata), and ipywidgets
# gives a slider's handle no name (on the site, book/_static/widget-a11y.js names it).
UPSTREAM = {"image-alt": "JupyterLab's image renderer", "aria-input-field-name": "ipywidgets' slider handle"}


def accessibility(page) -> tuple[dict[str, int], dict[str, int]]:
    r"""axe-core's WCAG 2.0/2.1 A and AA violations on the page: (in the lesson's outputs - what the
    course adds - , in JupyterLab itself), elements per rule."""
    page.add_script_tag(content=axe_script())
    ours, lab = {}, {}
    for violation in page.evaluate(AXE_RUN):
        for node in violation["nodes"]:
            side = ours if node["inOutput"] else lab
            side[violation["rule"]] = side.get(violation["rule"], 0) + 1
    return ours, lab


@pytest.mark.parametrize("lesson", lessons_with_controls())
def test_lesson_runs_and_its_controls_change_their_pictures(lab, browser, lesson):
    base, token = lab.split("|")
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    try:
        seconds = open_and_run(page, base, token, lesson)
        boxes = explorers(page)
        assert boxes, f"{lesson}: no explorer (image + controls) was drawn"
        sliders = 0
        for box in boxes:
            box.scroll_into_view_if_needed()
            type_every_index(page, box)
            sliders += move_every_slider(page, box)  # then reset must bring the picture back
            press_every_reset(page, box)
        assert sliders >= len(boxes), f"{lesson}: {sliders} sliders in {len(boxes)} explorers"
        questions = page.locator(".jp-OutputArea-output .capsedu-self-check details")
        assert questions.count() >= 6, f"{lesson}: the self-check questions were not drawn"
        questions.first.scroll_into_view_if_needed()
        questions.first.locator("summary").click()  # the first option of the first question
        assert questions.first.locator("p").is_visible(), f"{lesson}: a self-check option showed no feedback"
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        boxes[0].scroll_into_view_if_needed()
        page.screenshot(path=str(SCREENSHOTS / f"jupyterlab_{lesson}.png"))
        ours, jupyterlab = accessibility(page)
        print(f"{lesson}: ran in {seconds:.0f} s, {len(boxes)} explorers, {sliders} sliders moved; axe-core: "
              f"in the outputs {ours} (upstream: {UPSTREAM}), in JupyterLab itself {jupyterlab}")
        added = {rule: count for rule, count in ours.items() if rule not in UPSTREAM}
        assert not added, f"{lesson}: the lesson's outputs break WCAG 2.1 AA rules in JupyterLab: {added}"
    finally:
        page.close()


def tracked_lessons_status() -> str:
    return subprocess.run(["git", "status", "--porcelain", "--", "notebooks"], cwd=REPO,
                          capture_output=True, text=True, check=True).stdout


@pytest.fixture(scope="module")
def learner_lab(tmp_path_factory) -> Iterator[tuple[str, object]]:
    r"""JupyterLab as ``make lab`` opens it, over a fresh learner workspace."""
    if CHROMIUM is None:
        pytest.skip("Chromium is not installed (Debian: `apt-get install -y chromium`)")
    from coursetools import workspace

    root = tmp_path_factory.mktemp("learner") / "workspace"
    workspace.update(root)
    workspace.settle_lab_settings()  # what `make lab` does to the environment
    command, env = workspace.lab_command(root, [])
    env = dict(env, CAPSEDU_FAST="1", JUPYTER_CONFIG_DIR=str(root.parent / ".jupyter-config"))
    with serve(command, env, root.parent) as url:
        yield url, root


def test_learner_lab_opens_lesson_00_asks_nothing_and_saves_only_the_workspace(learner_lab, browser):
    url, root = learner_lab
    base, token = url.split("|")
    before = tracked_lessons_status()
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    try:
        page.goto(f"{base}/?token={token}")
        page.wait_for_function(KERNEL_IDLE, timeout=60_000)
        assert page.evaluate("() => window.jupyterapp.shell.currentWidget.context.path") == "00_start_here.ipynb"
        # JupyterLab asks about news, once restored, only while its fetchNews setting is "none"
        # (its default): `make lab` settles it, so the question can never come - no wait for it
        assert page.evaluate(NEWS_SETTING) == "false", "JupyterLab will ask about Jupyter news"
        assert page.get_by_text("Jupyter news").count() == 0, "the news prompt is on the first screen"
        assert not page.locator(".jp-Dialog").count(), "a dialog is on the first screen"
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SCREENSHOTS / "jupyterlab_learner_first_screen.png"))
        menus = page.locator(".lm-MenuBar-itemLabel").all_inner_texts()
        assert menus and not [m for m in menus if "nbgrader" in m.lower()], f"menus: {menus}"
        page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")
        page.wait_for_function(ALL_RUN, timeout=150_000, polling=500)
        errors = [e for e in page.evaluate(ERRORS) if "write your solution here" not in e]
        assert not errors, f"the learner's lesson 00 fails other than at its unwritten exercises: {errors}"
        page.evaluate("() => window.jupyterapp.commands.execute('docmanager:save')")
        page.wait_for_function("() => !window.jupyterapp.shell.currentWidget.context.model.dirty")
    finally:
        page.close()
    saved = json.loads((root / "00_start_here.ipynb").read_text())
    assert any(cell.get("execution_count") for cell in saved["cells"]), "the save did not reach the workspace"
    assert tracked_lessons_status() == before, "saving in the learner's lab changed the course's notebooks"

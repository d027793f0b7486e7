"""The learner's workspace (`make lab`): lessons to work in, worked lessons beside them, updates that
keep the learner's edits, and the course's own notebooks never touched."""

from __future__ import annotations

import json
import shutil
import stat
import subprocess

import nbformat
import pytest
from conftest import REPO

from coursetools import workspace
from coursetools.handouts import BEGIN

pytestmark = pytest.mark.lessons

COURSE = REPO / "notebooks"


@pytest.fixture
def course(tmp_path):
    r"""A copy of the course's lessons that a test may change (as a new course version would)."""
    folder = tmp_path / "course"
    folder.mkdir()
    for lesson in sorted(COURSE.glob("0[0-2]_*.ipynb")):
        shutil.copy(lesson, folder / lesson.name)
    return folder


def edit_first_markdown(path, text):
    notebook = nbformat.read(path, as_version=4)
    cell = next(c for c in notebook.cells if c.cell_type == "markdown")
    cell.source += text
    nbformat.write(notebook, path)


def tracked_lessons_status() -> str:
    return subprocess.run(["git", "status", "--porcelain", "--", "notebooks"], cwd=REPO,
                          capture_output=True, text=True, check=True).stdout


def test_first_use_gives_exercises_to_write_and_read_only_worked_lessons(tmp_path):
    before = tracked_lessons_status()
    report = workspace.update(tmp_path / "ws")
    lessons = sorted(p.name for p in COURSE.glob("[0-9][0-9]_*.ipynb"))
    assert report.added == lessons
    for name in lessons:
        mine = nbformat.read(tmp_path / "ws" / name, as_version=4)
        code = [c for c in mine.cells if c.cell_type == "code"]
        assert not any(BEGIN in c.source or c.outputs for c in code), f"{name}: answers in view"
        worked = tmp_path / "ws" / "worked" / name.replace(".ipynb", ".worked.ipynb")  # a tab of its own
        assert worked.read_bytes() == (COURSE / name).read_bytes()
        assert not worked.stat().st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH)
    stubbed = nbformat.read(tmp_path / "ws" / "01_squash.ipynb", as_version=4)
    assert any("NotImplementedError" in c.source for c in stubbed.cells), "no exercise to write"
    assert tracked_lessons_status() == before, "the update changed the course's own notebooks"


def test_update_keeps_the_learners_edits_and_delivers_the_new_version_beside(tmp_path, course):
    root = tmp_path / "ws"
    workspace.update(root, lessons=course)
    edit_first_markdown(root / "01_squash.ipynb", "\n\nMy own note.")
    edit_first_markdown(course / "01_squash.ipynb", "\n\nA correction from the course.")
    report = workspace.update(root, lessons=course)
    assert report.kept == ["01_squash.ipynb"]
    assert "My own note." in (root / "01_squash.ipynb").read_text()
    assert "A correction" in (root / "01_squash.updated.ipynb").read_text()
    assert "A correction" in (root / "worked" / "01_squash.worked.ipynb").read_text()


def test_worked_lessons_under_their_earlier_name_are_replaced(tmp_path, course):
    root = tmp_path / "ws"
    workspace.update(root, lessons=course)
    earlier = root / "worked" / "01_squash.ipynb"  # how worked copies were named before
    earlier.write_text((root / "worked" / "01_squash.worked.ipynb").read_text())
    workspace.update(root, lessons=course)
    assert not earlier.exists() and (root / "worked" / "01_squash.worked.ipynb").exists()


def test_update_replaces_a_lesson_the_learner_only_ran(tmp_path, course):
    root = tmp_path / "ws"
    workspace.update(root, lessons=course)
    ran = nbformat.read(root / "00_start_here.ipynb", as_version=4)
    cell = next(c for c in ran.cells if c.cell_type == "code")
    cell.outputs = [nbformat.v4.new_output("stream", text="an output the learner made\n")]
    cell.execution_count = 1
    nbformat.write(ran, root / "00_start_here.ipynb")
    edit_first_markdown(course / "00_start_here.ipynb", "\n\nNew in this version.")
    report = workspace.update(root, lessons=course)
    assert report.replaced == ["00_start_here.ipynb"]
    assert "New in this version." in (root / "00_start_here.ipynb").read_text()
    assert not (root / "00_start_here.updated.ipynb").exists()


def test_update_restores_a_deleted_lesson_and_adds_a_new_one(tmp_path, course):
    root = tmp_path / "ws"
    workspace.update(root, lessons=course)
    (root / "02_primary_capsules.ipynb").unlink()
    shutil.copy(COURSE / "03_dynamic_routing.ipynb", course / "03_dynamic_routing.ipynb")
    report = workspace.update(root, lessons=course)
    assert report.replaced == ["02_primary_capsules.ipynb"]
    assert report.added == ["03_dynamic_routing.ipynb"]
    assert report.unchanged == ["00_start_here.ipynb", "01_squash.ipynb"]
    delivered = json.loads((root / ".capsedu" / "delivered.json").read_text())
    assert sorted(delivered) == sorted(p.name for p in course.glob("*.ipynb"))


def test_update_names_a_folder_without_lessons(tmp_path):
    with pytest.raises(FileNotFoundError, match="lessons="):
        workspace.update(tmp_path / "ws", lessons=tmp_path)


def test_the_workspace_is_ignored_by_git():
    ignored = subprocess.run(["git", "check-ignore", "-q", "workspace/00_start_here.ipynb"], cwd=REPO)
    assert ignored.returncode == 0, "workspace/ must be in .gitignore"


def test_lab_settings_settle_the_news_prompt_in_the_environment(tmp_path):
    target = workspace.settle_lab_settings(prefix=tmp_path)
    settings = json.loads(target.read_text())
    assert settings["@jupyterlab/apputils-extension:notification"]["fetchNews"] == "false"
    assert target.parent.name == "overrides.d" and target.is_relative_to(tmp_path)


def test_lab_command_opens_lesson_00_with_nbgrader_hidden(tmp_path):
    workspace.update(tmp_path / "ws")
    command, env = workspace.lab_command(tmp_path / "ws", ["--no-browser"])
    assert "--LabApp.default_url=/lab/tree/00_start_here.ipynb" in command
    assert f"--ServerApp.root_dir={tmp_path / 'ws'}" in command and command[-1] == "--no-browser"
    config = env["JUPYTER_CONFIG_PATH"].split(":")[0]
    page = json.loads((workspace.LEARNER_CONFIG / "labconfig" / "page_config.json").read_text())
    assert config == str(workspace.LEARNER_CONFIG) and page["disabledExtensions"]["@jupyter/nbgrader"]

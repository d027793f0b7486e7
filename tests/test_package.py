"""The package: importing it is cheap and quiet, and the README's module map matches the tree."""

import json
import re
import subprocess
import sys

from conftest import REPO

COMMAND_LINES = ["capsedu.zoo.train", "capsedu.course.execute", "capsedu.course.handouts",
                 "capsedu.course.grading"]


def test_import_capsedu_loads_no_command_line_and_starts_no_thread():
    code = ("import json, sys, threading\n"
            "before = threading.active_count()\n"
            "import torch  # torch's own threads are not capsedu's\n"
            "after_torch = threading.active_count()\n"
            "import capsedu\n"
            "print(json.dumps({'threads': threading.active_count() - after_torch,\n"
            "                  'modules': sorted(m for m in sys.modules if m.startswith('capsedu')),\n"
            "                  'widgets': 'ipywidgets' in sys.modules}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    found = json.loads(out.stdout.strip().splitlines()[-1])
    assert found["threads"] == 0
    assert not set(COMMAND_LINES) & set(found["modules"]), found["modules"]
    assert not found["widgets"] and "capsedu.explore.widgets" not in found["modules"]
    for name in COMMAND_LINES:  # each command line really is one (python -m NAME --help works)
        help_text = subprocess.run([sys.executable, "-m", name, "--help"], capture_output=True,
                                   text=True, check=True, cwd=REPO).stdout
        assert "usage:" in help_text, name


def test_the_readme_module_map_lists_every_module_and_nothing_else():
    readme = (REPO / "README.md").read_text()
    mapped = set(re.findall(r"^\| `(capsedu/[\w/]+\.py)` \|", readme, flags=re.MULTILINE))
    tree = {str(p.relative_to(REPO)) for p in (REPO / "capsedu").rglob("*.py")
            if p.name != "__init__.py" or p.parent.name == "capsedu"}
    assert mapped == tree, f"only in README: {sorted(mapped - tree)}; only in the tree: {sorted(tree - mapped)}"


def test_the_folders_the_command_lines_default_to_are_the_repositorys():
    from capsedu.course import execute, fingerprint, handouts
    from capsedu.zoo import shipped

    assert handouts.LESSONS == execute.NOTEBOOKS == REPO / "notebooks"
    assert sorted(handouts.LESSONS.glob("[0-9][0-9]_*.ipynb")), "no lessons where handouts looks"
    assert fingerprint.PACKAGE == REPO / "capsedu"
    assert shipped.WEIGHTS_DIR == REPO / "capsedu" / "zoo" / "weights" and shipped.WEIGHTS_DIR.is_dir()
    assert shipped.STUDIES_DIR.is_dir()

"""Every lesson is a synced Jupytext pair with the course skeleton, exercises and stored outputs.

nbval executes the notebooks themselves (``make test`` passes ``notebooks`` to pytest); this file
checks their structure.
"""

import json
import re

import jupytext
import pytest
from conftest import REPO, lesson_numbers_follow_the_plan

pytestmark = pytest.mark.lessons

NOTEBOOKS = REPO / "notebooks"
SOURCES = NOTEBOOKS / "src"  # the py:percent sources, paired by notebooks/jupytext.toml
CORE_LESSONS = ["00_start_here", "01_squash", "02_primary_capsules", "03_dynamic_routing",
                "04_margin_loss", "05_decoder", "06_training"]
LESSONS = sorted(p.stem for p in SOURCES.glob("[0-9][0-9]_*.py"))
SKELETON = ["Learning objectives", "Prerequisites and time", "Build it", "Check it", "Use capsedu",
            "Explore", "Exercises", "Summary", "What's next"]


def markdown_headings(notebook) -> list[str]:
    return [line for cell in notebook.cells if cell.cell_type == "markdown"
            for line in cell.source.splitlines() if line.startswith("#")]


def test_the_core_lessons_exist_in_order():
    assert LESSONS[: len(CORE_LESSONS)] == CORE_LESSONS
    problem = lesson_numbers_follow_the_plan([int(name[:2]) for name in LESSONS])
    assert not problem, problem


def _without_version(text: str) -> str:
    return re.sub(r"^#\s+jupytext_version: .*$", "#   jupytext_version: -", text, count=1, flags=re.MULTILINE)


@pytest.mark.parametrize("lesson", LESSONS)
def test_pair_is_in_sync(lesson):
    ipynb = NOTEBOOKS / f"{lesson}.ipynb"
    assert ipynb.is_file(), f"src/{lesson}.py has no paired .ipynb: run `make sync`"
    source = [c.source.strip() for c in jupytext.read(SOURCES / f"{lesson}.py").cells]
    paired = [c.source.strip() for c in jupytext.read(ipynb).cells]
    assert source == paired, f"src/{lesson}.py and {lesson}.ipynb differ: run `make sync`"
    # byte for byte what Jupytext writes from the notebook (cell metadata in its order too): where
    # they differ, JupyterLab with Jupytext refuses to open the newer .ipynb ("File Load Error")
    # (the header's jupytext_version line says which Jupytext wrote it: a new release changes it alone)
    written = jupytext.writes(jupytext.read(ipynb), fmt="py:percent")
    assert _without_version(written) == _without_version((SOURCES / f"{lesson}.py").read_text()), \
        f"src/{lesson}.py is not what Jupytext writes from {lesson}.ipynb: run `jupytext --sync` on the notebook"


def test_the_file_browser_shows_each_lesson_once():
    assert not list(NOTEBOOKS.glob("*.py")), "lesson sources belong in notebooks/src/"
    assert sorted(p.stem for p in NOTEBOOKS.glob("[0-9][0-9]_*.ipynb")) == LESSONS


@pytest.mark.parametrize("lesson", LESSONS)
def test_skeleton_headings_in_order(lesson):
    headings = markdown_headings(jupytext.read(SOURCES / f"{lesson}.py"))
    assert re.match(rf"# Lesson {lesson[:2]} — \S", headings[0]), f"first heading is {headings[0]!r}"
    level2 = [h[3:].strip() for h in headings if h.startswith("## ")]
    positions = [level2.index(name) if name in level2 else -1 for name in SKELETON]
    missing = [name for name, pos in zip(SKELETON, positions) if pos < 0]
    assert not missing, f"{lesson} lacks the skeleton heading(s) {missing}"
    assert positions == sorted(positions), f"{lesson}: skeleton headings out of order: {level2}"


@pytest.mark.parametrize("lesson", LESSONS)
def test_exercises_have_solutions_followed_by_a_check(lesson):
    cells = jupytext.read(SOURCES / f"{lesson}.py").cells
    solution_cells = [i for i, c in enumerate(cells) if c.cell_type == "code"
                      and "### BEGIN SOLUTION" in c.source and "### END SOLUTION" in c.source]
    assert len(solution_cells) >= 2, f"{lesson} has {len(solution_cells)} exercise solution cells, expected >= 2"
    for i in solution_cells:
        following = next(c for c in cells[i + 1:] if c.cell_type == "code")
        assert re.search(r"\bcheck\w*\(", following.source) and "capsedu.course.checks" in "".join(
            c.source for c in cells), f"{lesson}: the solution in cell {i} is not followed by a capsedu.course.checks call"


@pytest.mark.parametrize("lesson", LESSONS)
def test_solutions_are_folded_away_in_jupyterlab_and_the_book(lesson):
    cells = jupytext.read(SOURCES / f"{lesson}.py").cells
    solutions = [c for c in cells if c.cell_type == "code" and "### BEGIN SOLUTION" in c.source]
    for cell in solutions:
        assert cell.metadata.get("jupyter", {}).get("source_hidden") is True, cell.source[:60]
        assert "hide-input" in cell.metadata.get("tags", []), cell.source[:60]
    folded = [c for c in cells if c.metadata.get("jupyter", {}).get("source_hidden")]
    assert len(folded) == len(solutions), f"{lesson}: only solution cells are folded"


@pytest.mark.parametrize("lesson", LESSONS)
def test_committed_with_outputs_and_checked_cells(lesson):
    raw = json.loads((NOTEBOOKS / f"{lesson}.ipynb").read_text())
    code = [c for c in raw["cells"] if c["cell_type"] == "code"]
    unexecuted = [i for i, c in enumerate(code) if c["source"] and c.get("execution_count") is None]
    assert not unexecuted, f"{lesson}.ipynb has unexecuted code cells {unexecuted}: execute it before committing"
    assert any("nbval-check-output" in c["metadata"].get("tags", []) and c["outputs"] for c in code), \
        f"{lesson} has no cell tagged 'nbval-check-output' with stored output for nbval to compare"
    markers = [i for i, c in enumerate(code) if "NBVAL_" in "".join(c["source"])]
    assert not markers, f"{lesson}: cells {markers} carry nbval comments; use the cell tag (learners see no tags)"
    errors = [o for c in code for o in c["outputs"] if o.get("output_type") == "error"]
    assert not errors, f"{lesson}.ipynb stores an error output: {errors[0].get('ename')}"


FILE_NAME_OR_PLACEHOLDER = re.compile(r"\.(png|jpe?g|svg)\b|^(figure|image|plot|picture)\b|\b(TODO|alt text)\b",
                                      re.IGNORECASE)


@pytest.mark.parametrize("lesson", LESSONS)
def test_every_figure_says_what_it_shows(lesson):
    # myst-nb puts the cell's mystnb.image.alt on the website's <img>; its numbers the prose guard checks
    from coursetools.prose import alt_text

    raw = json.loads((NOTEBOOKS / f"{lesson}.ipynb").read_text())
    figures = [(i, alt_text(c)) for i, c in enumerate(raw["cells"]) if c["cell_type"] == "code"
               and any("image/png" in o.get("data", {}) for o in c["outputs"])]
    missing = [i for i, alt in figures if len(alt.split()) < 20 or FILE_NAME_OR_PLACEHOLDER.search(alt)]
    assert not missing, (f"{lesson}: the figures of cells {missing} need an alt text (cell metadata "
                         "mystnb.image.alt, 20+ words) that says what they show")
    text = jupytext.read(SOURCES / f"{lesson}.py")
    assert [alt_text(text.cells[i]) for i, _ in figures] == [alt for _, alt in figures], \
        f"{lesson}: the alt texts of the .py source and the notebook differ (make sync)"


@pytest.mark.parametrize("lesson", LESSONS)
def test_readme_and_book_list_every_lesson(lesson):
    assert f"`{lesson}`" in (REPO / "README.md").read_text(), f"README.md's lesson table lacks {lesson}"
    assert f"notebooks/{lesson}\n" in (REPO / "book" / "_toc.yml").read_text(), \
        f"book/_toc.yml lacks notebooks/{lesson}"


def test_lesson_00s_map_lists_every_lesson_in_order():
    rows = re.findall(r"^# \| \*\*(\d\d) ", (SOURCES / "00_start_here.py").read_text(), re.MULTILINE)
    assert rows == [lesson[:2] for lesson in LESSONS], f"lesson 00's map lists {rows}"


@pytest.mark.parametrize("lesson", LESSONS)
def test_stored_progress_bars_are_finished_for_plain_viewers(lesson):
    """A viewer without the widget state (GitHub, nbviewer, a text diff) sees each bar's final
    text, as `make execute` leaves it, not the 0 % it was first displayed with."""
    raw = json.loads((NOTEBOOKS / f"{lesson}.ipynb").read_text())
    shown = [o["data"]["text/plain"] for c in raw["cells"] if c["cell_type"] == "code"
             for o in c["outputs"] if "application/vnd.jupyter.widget-view+json" in o.get("data", {})]
    bars = ["".join(text) for text in shown if re.search(r"\d+%\|", "".join(text))]
    unfinished = [bar for bar in bars if not re.search(r"100%\|", bar)]
    assert not unfinished, f"{lesson}: stored progress bars not finished: {unfinished[:3]}"


@pytest.mark.parametrize("lesson", sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb")), ids=lambda p: p.stem)
def test_stored_explorers_open_with_their_sliders_at_rest(lesson):
    """A slider that moves both ways (an offset, an angle, a shift) opens at 0: a later cell that
    drives an explorer from code must put it back (the reader of the book, or of a freshly opened
    lesson, would otherwise meet an explorer that someone else has already moved)."""
    state = json.loads(lesson.read_text()).get("metadata", {}).get("widgets", {})
    models = state.get("application/vnd.jupyter.widget-state+json", {}).get("state", {})
    moved = [(m["state"].get("description"), m["state"]["value"]) for m in models.values()
             if m.get("model_name") in ("FloatSliderModel", "IntSliderModel")
             and m["state"].get("min", 0) < 0 < m["state"].get("max", 0) and m["state"]["value"] != 0]
    assert not moved, f"{lesson.stem}: sliders stored away from 0: {moved}"

"""Each lesson ends with 3-5 self-check questions that answer instantly, with no kernel."""

from __future__ import annotations

import re

import nbformat
import pytest
from conftest import REPO

from capsedu.course.self_check import Question, questions_for, self_check

pytestmark = pytest.mark.lessons

LESSONS = sorted((REPO / "notebooks").glob("[0-9][0-9]_*.ipynb"))


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda p: p.stem)
def test_each_lesson_shows_its_own_questions_near_its_end(lesson):
    number = lesson.stem[:2]
    questions = questions_for(number)
    assert 3 <= len(questions) <= 5, f"{lesson.stem}: {len(questions)} questions"
    notebook = nbformat.read(lesson, as_version=4)
    cells = [i for i, c in enumerate(notebook.cells)
             if c.cell_type == "code" and re.search(rf"self_check\(\s*['\"]{number}['\"]\s*\)", c.source)]
    assert len(cells) == 1, f"{lesson.stem}: expected one cell calling self_check({number!r})"
    headings = [i for i, c in enumerate(notebook.cells) if c.cell_type == "markdown"
                and any(line.strip() == "## Self-check" for line in c.source.splitlines())]
    exercises = [i for i, c in enumerate(notebook.cells) if c.cell_type == "markdown"
                 and any(line.strip() == "## Exercises" for line in c.source.splitlines())]
    assert headings and headings[0] < cells[0], f"{lesson.stem}: put the questions under '## Self-check'"
    assert not exercises or exercises[0] < headings[0], f"{lesson.stem}: self-check after the exercises"
    html = "".join(o.get("data", {}).get("text/html", "") for o in notebook.cells[cells[0]].outputs)
    assert html.count("<details") == sum(len(q.options) for q in questions), lesson.stem


@pytest.mark.unit
def test_every_option_answers_and_only_the_right_one_says_right():
    question = Question("How long is squash(0)?", ("0", "1", "NaN"), answer=0,
                        explanation="The zero vector squashes to itself.", feedback={2: "ε prevents it."})
    assert question.reply(0).startswith("✅ Right. The zero vector")
    assert question.reply(1).startswith("❌") and "Right" not in question.reply(1)
    assert "ε prevents it." in question.reply(2)
    html = self_check("01")._repr_html_()
    assert html.count("<summary") == html.count("<details") > 0 and "✅ Right." in html


@pytest.mark.unit
@pytest.mark.parametrize(("kwargs", "message"), [
    ({"options": ("only one",)}, "at least 2"),
    ({"answer": 3}, "answer must index options"),
    ({"explanation": " "}, "explanation must say why"),
    ({"feedback": {0: "the right one"}}, "wrong options only"),
])
def test_a_malformed_question_names_what_is_wrong(kwargs, message):
    arguments = {"prompt": "p", "options": ("a", "b"), "answer": 0, "explanation": "e", **kwargs}
    with pytest.raises(ValueError, match=message):
        Question(**arguments)


@pytest.mark.unit
@pytest.mark.parametrize("bad", ["1", "001", 1, "xx"])
def test_a_bad_lesson_number_is_refused(bad):
    with pytest.raises(ValueError, match="two-digit number"):
        questions_for(bad)

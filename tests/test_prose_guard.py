"""The prose guard: every measured number a lesson states is printed by its outputs, set by its
code, or quoted with its source in the same clause (coursetools/prose.py)."""

import copy
import json

import pytest
from conftest import REPO

from coursetools import prose

pytestmark = pytest.mark.lessons

LESSONS = sorted((REPO / "notebooks").glob("[0-9][0-9]_*.ipynb"))


@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.stem)
def test_every_number_in_the_text_is_printed_beside_it_or_quoted(path):
    problems = prose.unsupported(json.loads(path.read_text()))
    report = "\n".join(f"  cell {index}: {number} <- {clause[:140]}" for index, number, clause in problems)
    assert not problems, f"{path.stem}: numbers no output prints and no source is named for:\n{report}"


def _lesson(markdown: str, printed: str) -> dict:
    return {"cells": [{"cell_type": "markdown", "source": [markdown]},
                      {"cell_type": "code", "source": ["print(x)"],
                       "outputs": [{"output_type": "stream", "name": "stdout", "text": [printed]}]}]}


def test_a_number_changed_by_hand_is_caught():
    fine = _lesson("The network names **98.8 %** of the test digits in 3.4 min.", "accuracy 0.98762, 3.41 min\n")
    assert prose.unsupported(fine) == []  # within the precision the prose gives
    edited = copy.deepcopy(fine)
    edited["cells"][0]["source"] = ["The network names **98.9 %** of the test digits in 3.4 min."]
    assert [number for _, number, _ in prose.unsupported(edited)] == ["98.9"]


def test_quoted_numbers_need_their_source_in_the_same_clause():
    quoted = _lesson("The paper reports 99.75 %; ours reaches 98.8 %.", "0.9876\n")
    assert prose.unsupported(quoted) == []
    unsourced = _lesson("The CapsNet reaches 99.75 %; ours reaches 98.8 %.", "0.9876\n")
    assert [number for _, number, _ in prose.unsupported(unsourced)] == ["99.75"]


def test_code_spans_formulas_sizes_and_planned_times_are_not_measurements():
    text = ("About 40 minutes. A 28×28 digit, `lr=2e-3`, $0.9^2 \\approx 0.81$, 4,000 images, "
            "lesson 05, Eq. 4.")
    assert prose.unsupported(_lesson(text, "")) == []


def test_a_decimal_that_ends_a_sentence_is_checked_and_a_version_is_not():
    text = "Its lengths sit near 0.57. Built with torch 2.15.0 on Python 3.11.2."
    assert [number for _, number, _ in prose.unsupported(_lesson(text, "0.4\n"))] == ["0.57"]


@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.stem)
def test_a_lesson_reads_as_teaching_not_as_a_lab_notebook(path):
    notebook = json.loads(path.read_text())
    long, history = prose.long_sentences(notebook), prose.history_words(notebook)
    report = "\n".join([f"  cell {i}: {n} words <- {s[:120]}" for i, n, s in long]
                       + [f"  cell {i}: {w!r} <- {s[:120]}" for i, w, s in history])
    assert len(long) <= 1 and not history, (
        f"{path.stem}: at most one sentence over {prose.LONG} words and no production history "
        f"(it belongs in the training record):\n{report}")


def test_the_style_guard_counts_sentences_and_history_words():
    words = " ".join(["word"] * 46)
    lesson = _lesson(f"Short one. {words.capitalize()}.\n\n- A list item. Trained on an H200 lent for one session.",
                     "")
    assert [n for _, n, _ in prose.long_sentences(lesson)] == [46]
    assert [w for _, w, _ in prose.history_words(lesson)] == ["H200", "lent", "one session"]
    assert prose.long_sentences(_lesson("Short.\n\n" + " ".join(["w"] * 45) + ".", "")) == []

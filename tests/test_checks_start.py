"""Tests for capsedu.course.checks.start: right answers pass, typical mistakes get their own hint."""

import re

import pytest
import torch

from capsedu.course.checks._kit import STUB_HINT
from capsedu.course.checks.start import (
    check_choose_threshold,
    check_moved_spread,
)

pytestmark = pytest.mark.unit


# --- Exercise 1: the face with one part moved; Exercise 2: a threshold on the spread -----------

def face_machinery():
    """The lesson's face scene: templates, drawing, detection, predicted centres, spread."""
    from conftest import REPO

    # the percent-format source's cells (not jupytext: importing it starts a process, pandoc --version)
    text = (REPO / "notebooks" / "src" / "00_start_here.py").read_text()
    cells = re.split(r"^# %%.*$", text, flags=re.MULTILINE)
    source = next(c for c in cells if "def part_templates" in c)
    summary = next(c for c in cells if "def summarise" in c)
    namespace = {"torch": torch, "np": __import__("numpy")}
    exec(source, namespace)  # noqa: S102 - the lesson's own cell
    exec(summary.split("summaries = ")[0], namespace)  # noqa: S102
    return namespace


def moved_spread(ns, part, shift, places=None):
    places = dict(ns["face_places"] if places is None else places)
    row, col = places[part]
    places[part] = (row + shift[0], col + shift[1])
    return ns["spread"](ns["summarise"](ns["draw"](ns["parts"], places)))


def test_moved_spread_passes_with_the_lessons_own_scene(capsys):
    ns = face_machinery()
    result = check_moved_spread(lambda part, shift: moved_spread(ns, part, shift))
    assert result.passed and result.message in capsys.readouterr().out
    assert check_moved_spread(lambda part, shift: torch.tensor(moved_spread(ns, part, shift)))


def test_moved_spread_hints():
    ns = face_machinery()

    def mutates(part, shift):  # moves the part in face_places itself
        places = ns["face_places"]
        row, col = places[part]
        places[part] = (row + shift[0], col + shift[1])
        return ns["spread"](ns["summarise"](ns["draw"](ns["parts"], places)))

    def moved_prediction(part, shift):  # how far the moved part's prediction went
        return float(torch.tensor(shift, dtype=torch.float32).norm())

    cases = {
        "moved the part in face_places itself": mutates,
        "nothing moved": lambda part, shift: moved_spread(ns, part, (0, 0)),
        "how far one prediction went": moved_prediction,
        "not scrambled_places": lambda part, shift: moved_spread(ns, part, shift, ns["scrambled_places"]),
        "must return one number": lambda part, shift: ns["summarise"](ns["draw"](ns["parts"], ns["face_places"])),
        "is not the spread of the face": lambda part, shift: 2 * moved_spread(ns, part, shift),
        STUB_HINT: stub,
    }
    for hint, fn in cases.items():
        ns["face_places"] = {"eyes": (12, 13), "nose": (18, 18), "mouth": (25, 15)}
        result = check_moved_spread(fn, quiet=True)
        assert not result.passed and result.message.startswith("❌"), hint
        assert hint in result.message, (hint, result.message)


def stub(*args):
    raise NotImplementedError("write your solution here, then run the check below")


def test_choose_threshold_passes_halfway_across_the_gap(capsys):
    result = check_choose_threshold(lambda faces, scrambled: (max(faces) + min(scrambled)) / 2)
    assert result.passed and result.message in capsys.readouterr().out
    assert check_choose_threshold(lambda faces, scrambled: torch.tensor((max(faces) + min(scrambled)) / 2))


def test_choose_threshold_hints():
    cases = {
        "would count as scrambled": lambda faces, scrambled: sum(faces) / len(faces),
        "would count as a face": lambda faces, scrambled: sum(faces + scrambled) / len(faces + scrambled),
        "hugs the largest face's spread": lambda faces, scrambled: max(faces) + 0.01,
        "hugs the smallest scrambled face's spread": lambda faces, scrambled: min(scrambled),
        "a fixed number cannot suit": lambda faces, scrambled: 5.0,
        "must return one number": lambda faces, scrambled: [max(faces), min(scrambled)],
        STUB_HINT: stub,
    }
    for hint, fn in cases.items():
        result = check_choose_threshold(fn, quiet=True)
        assert not result.passed and result.message.startswith("❌"), hint
        assert hint in result.message, (hint, result.message)

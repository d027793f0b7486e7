r"""Checks for lesson 00 (start here): agreement between parts.

The lesson's exercises: :func:`check_moved_spread` (move one part of the hand-drawn face, measure
how far the parts' predictions of the face's centre spread) and :func:`check_choose_threshold`
(a threshold on that spread that tells faces from scrambled faces).

Shape legend: none (no tensor shapes of its own).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from capsedu.course.checks._kit import CheckResult, call_learner, mistake, other, verdict

# --- Exercise 1: move one part of the face, measure the spread of the predicted centres -------

MOVES = (("nose", (0, 3)), ("mouth", (2, -1)), ("eyes", (-3, 1)))  # each clears the other parts
MOVED_HINT = ("copy the places first (places = dict(face_places)), move the part in the copy, "
              "then spread(summarise(draw(parts, places)))")


def _spread_of(fn: Callable[[str, tuple[int, int]], float], part: str,
               shift: tuple[int, int]) -> tuple[float | None, str]:
    r"""``fn(part, shift)`` as a float, or a hint."""
    call = f"spread_after_moving({part!r}, {shift})"
    out, hint = call_learner(fn, part, shift, what=call)
    if hint:
        return None, hint
    if isinstance(out, torch.Tensor) and out.numel() == 1:
        out = out.item()
    if isinstance(out, bool) or not isinstance(out, (int, float)):
        return None, other("type",
                           f"{call} must return one number, the spread in pixels, got "
                           f"{type(out).__name__}")
    return float(out), ""


def _moved_hint(fn: Callable[[str, tuple[int, int]], float]) -> str:
    first, hint = _spread_of(fn, *MOVES[0])
    if hint:
        return hint
    again, hint = _spread_of(fn, *MOVES[0])
    if hint:
        return hint
    if not math.isclose(first, again, rel_tol=1e-4, abs_tol=1e-4):
        return mistake("face-places-changed",
                       f"the same call gave {first:.2f} and then {again:.2f} px: your function moved "
                       "the part in face_places itself, so every call starts from a face that was "
                       "already changed. Run the cell that defines face_places again, and " + MOVED_HINT)
    for part, shift in MOVES:
        spread, hint = _spread_of(fn, part, shift)
        if hint:
            return hint
        distance = math.hypot(*shift)
        expected = 4 * distance / 9  # one of three agreeing predictions moved by `distance`
        if math.isclose(spread, expected, rel_tol=1e-3, abs_tol=1e-3):
            continue
        call = f"spread_after_moving({part!r}, {shift})"
        if abs(spread) < 1e-6:
            return mistake("nothing-moved",
                           f"{call} = 0: the predictions still agree, so nothing moved (or "
                           "everything did: moving every part moves the whole face, still a face); "
                           f"{MOVED_HINT}")
        if any(math.isclose(spread, f * distance, rel_tol=1e-3) for f in (1.0, 2 / 3)):
            return mistake("one-prediction-not-spread",
                           f"{call} = {spread:.2f}: that is how far one prediction went, not the "
                           "spread; the spread is the mean distance of all three predicted centres "
                           "from their average, which is what spread(...) measures")
        if spread > 5.0:
            return mistake("started-from-scrambled",
                           f"{call} = {spread:.2f}, as large as a scrambled face's: start from "
                           "face_places (the real face), not scrambled_places")
        return other("values",
                     f"{call} = {spread:.2f} is not the spread of the face with that part moved: "
                     f"{MOVED_HINT}")
    return ""


def check_moved_spread(fn: Callable[[str, tuple[int, int]], float], *, quiet: bool = False) -> CheckResult:
    r"""Check ``fn(part, shift)``: the spread of the face's predicted centres with one part moved."""
    return verdict(_moved_hint(fn), "right: moving one part of the face by d pixels spreads the "
                   "three predicted centres by 4d/9 on average", quiet=quiet)


# --- Exercise 2: a threshold on the spread that tells faces from scrambled faces --------------

# (faces' spreads, scrambled faces' spreads, held-out faces, held-out scrambled faces): the
# threshold is chosen on the first two lists, then must also sort the held-out ones right
THRESHOLD_CASES = (
    ((0.0, 0.4, 0.9, 1.3, 1.8), (7.5, 9.1, 11.0, 14.2), (3.0,), (6.0,)),
    ((0.2, 0.5, 1.0, 1.5, 2.0, 2.4), (9.0, 25.0, 40.0), (3.6,), (7.0,)),
    ((0.5, 1.6, 2.9, 4.0), (16.0, 19.0, 24.0), (6.5,), (13.5,)),
)


def _threshold_hint(fn: Callable[[list[float], list[float]], float]) -> str:
    answers = []
    for faces, scrambled, _, _ in THRESHOLD_CASES:
        call = f"choose_threshold({list(faces)}, {list(scrambled)})"
        out, hint = call_learner(fn, list(faces), list(scrambled), what=call)
        if hint:
            return hint
        if isinstance(out, torch.Tensor) and out.numel() == 1:
            out = out.item()
        if isinstance(out, bool) or not isinstance(out, (int, float)):
            return other("type",
                         f"{call} must return one number, the threshold in pixels, got "
                         f"{type(out).__name__}")
        answers.append(float(out))
    if len(set(answers)) == 1:
        return mistake("fixed-threshold",
                       f"you return {answers[0]:.2f} whatever the spreads: a fixed number cannot "
                       "suit every set of faces; compute the threshold from the two lists")
    for (faces, scrambled, new_faces, new_scrambled), threshold in zip(THRESHOLD_CASES, answers):
        call = f"choose_threshold({list(faces)}, {list(scrambled)}) = {threshold:.2f}"
        rejected = [f for f in faces if not f < threshold]
        if rejected:
            return mistake("rejects-a-face",
                           f"{call}: a face with spread {max(rejected)} would count as scrambled; "
                           "every face's spread must fall below the threshold")
        accepted = [s for s in scrambled if s < threshold]
        if accepted:
            return mistake("accepts-a-scrambled-face",
                           f"{call}: a scrambled face with spread {min(accepted)} would count as a "
                           "face; the threshold must stay at or below every scrambled face's "
                           "spread")
        if not all(f < threshold for f in new_faces):
            return mistake("hugs-largest-face",
                           f"{call} hugs the largest face's spread: a slightly more displaced face "
                           f"(spread {max(new_faces)}) would be rejected. Leave room on both sides "
                           "of the gap between the two groups")
        if not all(threshold <= s for s in new_scrambled):
            return mistake("hugs-smallest-scrambled",
                           f"{call} hugs the smallest scrambled face's spread: a scrambled face a "
                           f"little closer to a face (spread {min(new_scrambled)}) would pass. "
                           "Leave room on both sides of the gap between the two groups")
    return ""


def check_choose_threshold(fn: Callable[[list[float], list[float]], float], *,
                           quiet: bool = False) -> CheckResult:
    r"""Check ``fn(face_spreads, scrambled_spreads)``: a threshold with room on both sides."""
    return verdict(_threshold_hint(fn), "right: the threshold sits in the gap between the two "
                   "groups, with room on both sides for examples not seen yet", quiet=quiet)

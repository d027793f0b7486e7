r"""The small vocabulary every exercise check is written in.

* :func:`passed` / :func:`failed` - the one way a check answers: it prints ``✅ ok - message`` or
  ``❌ not yet - hint`` (unless ``quiet``; the words carry the verdict where no emoji font draws
  the marks) and returns a :class:`CheckResult`, truthy when passed. In
  grading mode (``CAPSEDU_GRADING=1`` in the kernel's environment, as the nbgrader course sets
  it) a failed check also raises :class:`CheckFailed`, so an autograder counts the failure.
* :func:`call_learner` - runs the learner's function and turns whatever it raises into a hint;
  an unfinished handout stub (``raise NotImplementedError``) gets "still the stub";
  :func:`learner_tensor` - the same, for a function that must return a tensor;
* :func:`close`, :func:`shape_of` - comparisons and descriptions for hints;
* :func:`diagnose` - a learner's tensor against the right one and the known mistakes;
* :func:`mistake`, :func:`other` - a hint with the stable id of the mistake it names (a
  :class:`Hint`), so that a program can count mistakes: in grading mode every verdict is shown
  with its check's name and the mistake's id in the output's metadata (:data:`TRACE_KEY`), which
  ``python -m coursetools.class_report`` reads from nbgrader's autograded notebooks.

Mistake ids are kebab-case and stable: a new named mistake gets a new id, an old one keeps its id
when its wording changes. Besides the named ones, every check has ``passed``, ``stub`` (the
handout's unfinished stub), ``raised`` (the learner's code raised), ``not-a-function`` and
``other-<kind>`` for a wrong answer that matches no named mistake, ``<kind>`` one of
:data:`OTHER_KINDS` (what differs).

The checks that need a network to probe the learner's code take it from :mod:`._probe`, so that
a lesson whose checks need none does not depend on the CapsNet's code.

Shape legend: none of its own (the shapes are those of the check that calls these helpers).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import torch

from capsedu.training.profile import env_flag

GRADING_ENV = "CAPSEDU_GRADING"
PASSED = "✅ ok —"
FAILED = "❌ not yet —"
TRACE_KEY = "capsedu_check"  # the output metadata's key for a verdict: {"check": ..., "mistake": ...}
OTHER_KINDS = ("shape", "type", "values", "gradient", "mutation", "dtype")
MISTAKE_ID = re.compile(r"[a-z0-9]+(-[a-z0-9]+)*")
CHECKS_PACKAGE = __name__.rsplit(".", 1)[0]  # capsedu.course.checks


class Hint(str):
    r"""A hint (the text the learner reads) that names a known mistake by a stable id."""

    mistake: str

    def __new__(cls, text: str, mistake: str) -> Hint:
        hint = super().__new__(cls, text)
        hint.mistake = mistake
        return hint


STUB_HINT = Hint("still the stub: replace `raise NotImplementedError(...)` (between the "
                 "`# YOUR CODE HERE` lines) with your code, then run this check again", "stub")


def mistake(mistake_id: str, text: str) -> Hint:
    r"""The hint ``text`` of the named mistake ``mistake_id`` (kebab-case, unique within its module)."""
    if not isinstance(mistake_id, str) or not MISTAKE_ID.fullmatch(mistake_id):
        raise ValueError(f"mistake_id must be kebab-case like 'eps-outside-root', got {mistake_id!r}")
    if mistake_id in ("passed", "stub", "raised", "not-a-function") or mistake_id.startswith("other-"):
        raise ValueError(f"mistake_id {mistake_id!r} is reserved for the kit's own verdicts")
    return Hint(text, mistake_id)


def other(kind: str, text: str) -> Hint:
    r"""The hint ``text`` of a wrong answer that matches no named mistake; ``kind`` says what differs."""
    if kind not in OTHER_KINDS:
        raise ValueError(f"kind must be one of {OTHER_KINDS}, got {kind!r}")
    return Hint(text, f"other-{kind}")


def reworded(hint: str, text: str) -> str:
    r"""``text`` (a hint built around ``hint``) naming the same mistake as ``hint``."""
    return Hint(text, hint.mistake) if isinstance(hint, Hint) else text


def _mistake_of(hint: str) -> str:
    r"""The id of the mistake ``hint`` names; ``other-values`` for a hint without one."""
    return hint.mistake if isinstance(hint, Hint) else "other-values"


def _check_name() -> str:
    r"""The outermost ``check_*`` function of this package on the stack (the one a lesson called),
    as ``module.check_name``; '' when none is."""
    name, frame = "", sys._getframe(1)
    while frame is not None:
        module = frame.f_globals.get("__name__", "")
        if frame.f_code.co_name.startswith("check_") and module.startswith(CHECKS_PACKAGE + "."):
            name = f"{module.rsplit('.', 1)[1]}.{frame.f_code.co_name}"
        frame = frame.f_back
    return name


def _show(message: str, check: str, mistake_id: str) -> None:
    r"""Print ``message``; in grading mode under IPython, show it as text with the verdict in its
    metadata (what the learner sees is the same line)."""
    shell = None
    if grading() and "IPython" in sys.modules:
        from IPython import get_ipython

        shell = get_ipython()
    if shell is None:
        print(message)
        return
    from IPython.display import display

    sys.stdout.flush()  # the line comes after what the learner's code printed
    display({"text/plain": message}, raw=True,
            metadata={TRACE_KEY: {"check": check, "mistake": mistake_id}})


class CheckFailed(AssertionError):
    r"""Raised by a failed check in grading mode; its message is the hint."""


@dataclass(frozen=True)
class CheckResult:
    r"""Outcome of an exercise check: ``passed``, the message shown to the learner, the check's
    name (``module.check_name``) and the id of its verdict (``passed`` or the mistake's)."""

    passed: bool
    message: str
    check: str = ""
    mistake: str = ""

    def __bool__(self) -> bool:
        return self.passed

    def __repr__(self) -> str:
        return self.message

    def _ipython_display_(self) -> None:
        r"""Show nothing as a cell's last value: the message was already printed once."""


def grading() -> bool:
    r"""True when ``CAPSEDU_GRADING`` is set to 1/true/yes: failed checks raise."""
    return env_flag(GRADING_ENV)


def passed(message: str, *, quiet: bool = False) -> CheckResult:
    r"""Print ``✅ ok — message`` and return a passing result."""
    result = CheckResult(True, f"{PASSED} {message}", _check_name(), "passed")
    if not quiet:
        _show(result.message, result.check, result.mistake)
    return result


def failed(hint: str, *, quiet: bool = False) -> CheckResult:
    r"""Print ``❌ not yet — hint`` and return a failing result; in grading mode raise :class:`CheckFailed`.

    ``hint`` names its mistake when it is a :class:`Hint` (:func:`mistake`, :func:`other`)."""
    result = CheckResult(False, f"{FAILED} {hint}", _check_name(), _mistake_of(hint))
    if not quiet:
        _show(result.message, result.check, result.mistake)
    if grading():
        raise CheckFailed(hint)
    return result


def verdict(hint: str | None, success: str, *, quiet: bool = False) -> CheckResult:
    r""":func:`passed` when ``hint`` is empty, else :func:`failed` with it."""
    return failed(hint, quiet=quiet) if hint else passed(success, quiet=quiet)


def call_learner(fn: Callable, *args: object, what: str = "your function") -> tuple[object, str]:
    r"""``(fn(*args), "")``, or ``(None, hint)`` when ``fn`` is not callable or raises."""
    if not callable(fn):
        return None, Hint(f"pass your function itself (not its result), got {type(fn).__name__}",
                          "not-a-function")
    try:
        return fn(*args), ""
    except NotImplementedError:
        return None, STUB_HINT
    except Exception as error:  # noqa: BLE001 - the learner's code may raise anything
        return None, Hint(f"{what} raised {type(error).__name__}: {error}", "raised")


def learner_tensor(fn: Callable, *args: object) -> tuple[torch.Tensor | None, str]:
    r"""``(fn(*args) detached, "")``, or ``(None, hint)`` when it raises or returns no tensor."""
    out, hint = call_learner(fn, *args)
    if not hint and not isinstance(out, torch.Tensor):
        hint = other("type", f"return a torch.Tensor, got {shape_of(out)}")
    return (None, hint) if hint else (out.detach(), "")


def close(a: object, b: torch.Tensor, *, rtol: float = 1e-4, atol: float = 1e-6) -> bool:
    r"""True when ``a`` is a tensor of ``b``'s shape with values close to ``b``'s."""
    return (isinstance(a, torch.Tensor) and a.shape == b.shape
            and torch.allclose(a.detach().double().cpu(), b.double().cpu(), rtol=rtol, atol=atol))


def shape_of(x: object) -> str:
    r"""``x``'s shape as a tuple string, or its type name when it is not a tensor."""
    return str(tuple(x.shape)) if isinstance(x, torch.Tensor) else type(x).__name__


def diagnose(result: object, expected: torch.Tensor, mistakes: Iterable[tuple[Callable[[], torch.Tensor], str]],
             otherwise: str, *, what: str = "a tensor", rtol: float = 1e-5, atol: float = 1e-8) -> str:
    r"""'' when ``result`` is close to ``expected``; else the hint of the first known mistake
    (``(make_wrong_answer, hint)``, made only when needed) that it matches, the shape it should
    have, or ``otherwise`` (a plain text is marked ``other-values``)."""
    if not isinstance(result, torch.Tensor) or result.shape != expected.shape:
        return other("shape", f"return {what} of shape {tuple(expected.shape)}, got {shape_of(result)}")
    if close(result, expected, rtol=rtol, atol=atol):
        return ""
    return next((hint for make, hint in mistakes if close(result, make(), rtol=rtol, atol=atol)),
                otherwise if isinstance(otherwise, Hint) else other("values", otherwise))


def yours_or_reference(check: Callable[..., CheckResult], yours: Callable, reference: Callable,
                       *, name: str) -> Callable:
    r"""``yours`` when it passes ``check`` (run quietly), else ``reference``; prints which, in one line.

    After a Build-it check the lesson goes on with this choice, so that "Run all" on an untouched
    handout finishes (the cells below use ``capsedu``'s version) and a learner whose function
    passes sees the rest of the lesson made by their own code. ``name`` is what the line calls
    the learner's function, e.g. ``"my_squash"``.
    """
    if not callable(yours):
        raise TypeError(f"yours must be the learner's function, got {type(yours).__name__}")
    if not callable(reference):
        raise TypeError(f"reference must be capsedu's function, got {type(reference).__name__}")
    try:
        ok = bool(check(yours, quiet=True))
    except CheckFailed:  # grading mode: a failed check raises even when quiet
        ok = False
    label = getattr(reference, "__qualname__", type(reference).__name__)
    if ok:
        print(f"→ from here on this lesson uses your {name}")
        return yours
    print(f"→ from here on this lesson uses capsedu's {label} in place of your {name} "
          "(yours does not pass its check yet)")
    return reference

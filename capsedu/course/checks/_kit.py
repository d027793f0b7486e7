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
* :func:`diagnose` - a learner's tensor against the right one and the known mistakes.

The checks that need a network to probe the learner's code take it from :mod:`._probe`, so that
a lesson whose checks need none does not depend on the CapsNet's code.

Shape legend: none of its own (the shapes are those of the check that calls these helpers).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import torch

from capsedu.training.profile import env_flag

GRADING_ENV = "CAPSEDU_GRADING"
PASSED = "✅ ok —"
FAILED = "❌ not yet —"
STUB_HINT = ("still the stub: replace `raise NotImplementedError(...)` (between the "
             "`# YOUR CODE HERE` lines) with your code, then run this check again")


class CheckFailed(AssertionError):
    r"""Raised by a failed check in grading mode; its message is the hint."""


@dataclass(frozen=True)
class CheckResult:
    r"""Outcome of an exercise check: ``passed`` and the message shown to the learner."""

    passed: bool
    message: str

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
    if not quiet:
        print(f"{PASSED} {message}")
    return CheckResult(True, f"{PASSED} {message}")


def failed(hint: str, *, quiet: bool = False) -> CheckResult:
    r"""Print ``❌ not yet — hint`` and return a failing result; in grading mode raise :class:`CheckFailed`."""
    if not quiet:
        print(f"{FAILED} {hint}")
    if grading():
        raise CheckFailed(hint)
    return CheckResult(False, f"{FAILED} {hint}")


def verdict(hint: str | None, success: str, *, quiet: bool = False) -> CheckResult:
    r""":func:`passed` when ``hint`` is empty, else :func:`failed` with it."""
    return failed(hint, quiet=quiet) if hint else passed(success, quiet=quiet)


def call_learner(fn: Callable, *args: object, what: str = "your function") -> tuple[object, str]:
    r"""``(fn(*args), "")``, or ``(None, hint)`` when ``fn`` is not callable or raises."""
    if not callable(fn):
        return None, f"pass your function itself (not its result), got {type(fn).__name__}"
    try:
        return fn(*args), ""
    except NotImplementedError:
        return None, STUB_HINT
    except Exception as error:  # noqa: BLE001 - the learner's code may raise anything
        return None, f"{what} raised {type(error).__name__}: {error}"


def learner_tensor(fn: Callable, *args: object) -> tuple[torch.Tensor | None, str]:
    r"""``(fn(*args) detached, "")``, or ``(None, hint)`` when it raises or returns no tensor."""
    out, hint = call_learner(fn, *args)
    if not hint and not isinstance(out, torch.Tensor):
        hint = f"return a torch.Tensor, got {shape_of(out)}"
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
    have, or ``otherwise``."""
    if not isinstance(result, torch.Tensor) or result.shape != expected.shape:
        return f"return {what} of shape {tuple(expected.shape)}, got {shape_of(result)}"
    if close(result, expected, rtol=rtol, atol=atol):
        return ""
    return next((hint for make, hint in mistakes if close(result, make(), rtol=rtol, atol=atol)), otherwise)


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

r"""The small vocabulary every exercise check is written in.

* :func:`passed` / :func:`failed` - the one way a check answers: it prints ``✅ message`` or
  ``❌ hint`` (unless ``quiet``) and returns a :class:`CheckResult`, truthy when passed. In
  grading mode (``CAPSEDU_GRADING=1`` in the kernel's environment, as the nbgrader course sets
  it) a failed check also raises :class:`CheckFailed`, so an autograder counts the failure.
* :func:`call_learner` - runs the learner's function and turns whatever it raises into a hint;
  an unfinished handout stub (``raise NotImplementedError``) gets "not written yet".
* :func:`close`, :func:`shape_of` - comparisons and descriptions for hints.
* :func:`probe_capsnet` - a tiny seeded CapsNet with long capsules, made without touching the
  learner's random state.

Shape legend: shapes are those of the check that calls these helpers.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

import torch

GRADING_ENV = "CAPSEDU_GRADING"
STUB_HINT = ("not written yet: replace `raise NotImplementedError(...)` (between the "
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
    return os.environ.get(GRADING_ENV, "").strip().lower() in {"1", "true", "yes", "on"}


def passed(message: str, *, quiet: bool = False) -> CheckResult:
    r"""Print ``✅ message`` and return a passing result."""
    if not quiet:
        print(f"✅ {message}")
    return CheckResult(True, f"✅ {message}")


def failed(hint: str, *, quiet: bool = False) -> CheckResult:
    r"""Print ``❌ hint`` and return a failing result; in grading mode raise :class:`CheckFailed`."""
    if not quiet:
        print(f"❌ {hint}")
    if grading():
        raise CheckFailed(hint)
    return CheckResult(False, f"❌ {hint}")


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


def close(a: object, b: torch.Tensor, *, rtol: float = 1e-4, atol: float = 1e-6) -> bool:
    r"""True when ``a`` is a tensor of ``b``'s shape with values close to ``b``'s."""
    return (isinstance(a, torch.Tensor) and a.shape == b.shape
            and torch.allclose(a.detach().double().cpu(), b.double().cpu(), rtol=rtol, atol=atol))


def shape_of(x: object) -> str:
    r"""``x``'s shape as a tuple string, or its type name when it is not a tensor."""
    return str(tuple(x.shape)) if isinstance(x, torch.Tensor) else type(x).__name__


def probe_capsnet(seed: int):
    r"""A tiny CapsNet (8 conv1 channels, 4 primary types, a 32-unit decoder), eval mode.

    Its weights are drawn with standard deviation 0.1 (larger than at initialisation) so that its
    capsules are long (0.2-0.3) and the decoder's input, and so its gradients, depend on which
    capsule the mask keeps. The learner's global random state is left untouched.
    """
    from capsedu.nets.capsnet import CapsNet, CapsNetConfig

    with torch.random.fork_rng(devices=[]):
        model = CapsNet(CapsNetConfig(conv1_channels=8, primary_types=4, decoder_hidden=(32,)))
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.copy_(0.1 * torch.randn(parameter.shape, generator=generator))
    return model.eval()

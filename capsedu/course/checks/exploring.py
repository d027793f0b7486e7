r"""Checks for lesson 07 (exploring a trained CapsNet): perturbing capsules, ranking what each
dimension does, and laying routing couplings out on the primary-capsule grid.

Each check runs the learner's function, compares it with :mod:`capsedu.explore`, and prints a
pass or a hint that names the most likely mistake.

Shape legend:
    I      primary capsules = T * G * G, J digit capsules, D_out digit capsule dimension (16)
    T      primary capsule types, G the side of their grid
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from capsedu.course.checks._kit import CheckResult, call_learner, verdict
from capsedu.course.checks._kit import close as _strict_close
from capsedu.explore.probes import couplings_on_grid, perturbation_sweep
from capsedu.nets.capsnet import CapsNet


def _close(a: object, b: torch.Tensor) -> bool:
    return _strict_close(a, b, rtol=0.0, atol=1e-5)


def _matching_hint(result: object, wrong: list[tuple[torch.Tensor, str]], default: str) -> str:
    r"""The hint of the first typical mistake whose output ``result`` equals, else ``default``."""
    return next((text for candidate, text in wrong if _close(result, candidate)), default)


def _shape_hint(result: object, expected: tuple[int, ...], what: str) -> str | None:
    if result is None:
        return "your function returned None: did you forget the `return`?"
    if not isinstance(result, torch.Tensor):
        return f"expected a torch.Tensor {what}, got {type(result).__name__}"
    if tuple(result.shape) != expected:
        return f"expected shape {expected} {what}, got {tuple(result.shape)}"
    return None


def check_perturb_dimension(fn: Callable[..., torch.Tensor], *, quiet: bool = False) -> CheckResult:
    r"""``fn(capsules, label, dim, delta)`` must return a copy of (J, D_out) ``capsules`` with ``delta``
    added to dimension ``dim`` of capsule ``label`` only."""
    generator = torch.Generator().manual_seed(7)
    capsules = torch.rand(10, 16, generator=generator) - 0.5  # (J, D_out)
    label, dim, delta = 3, 7, 0.2
    original = capsules.clone()
    result, stub = call_learner(fn, capsules, label, dim, delta)
    if stub:
        return verdict(stub, "", quiet=quiet)
    expected = original.clone()
    expected[label, dim] += delta
    wrong = {"row": (lambda e: e.__setitem__(label, e[label] + delta)),
             "column": (lambda e: e.__setitem__((slice(None), dim), e[:, dim] + delta)),
             "swapped": (lambda e: e.__setitem__((dim, label), e[dim, label] + delta)),
             "scaled": (lambda e: e.__setitem__((label, dim), e[label, dim] * delta))}
    hints = {"row": f"you added delta to every dimension of capsule {label}: index one entry, [label, dim]",
             "column": f"you moved dimension {dim} of every capsule: only the capsule of class `label` "
                       "is perturbed, [label, dim]",
             "swapped": "you indexed [dim, label]: capsules are (J, D_out), class first, so use [label, dim]",
             "scaled": "you multiplied by delta: the paper ADDS the offset to the dimension"}
    hint = _shape_hint(result, tuple(original.shape), "(J, D_out)")
    if hint is None and not torch.equal(capsules, original):
        hint = "you changed the input capsules in place: work on capsules.clone() and return the copy"
    if hint is None and not _close(result, expected):
        hint = "the values differ from capsules with capsules[label, dim] += delta"
        for name, make in wrong.items():
            candidate = original.clone()
            make(candidate)
            if _close(result, candidate):
                hint = hints[name]
                break
    return verdict(hint, "perturb_dimension moves exactly one dimension of one capsule.", quiet=quiet)


def reference_dimension_effects(model: CapsNet, image: torch.Tensor) -> torch.Tensor:
    r"""Mean absolute pixel change between the -0.25 and +0.25 reconstructions, per dimension (D_out,)."""
    images, _ = perturbation_sweep(model, image)  # (D_out, V, H, W)
    return (images[:, -1] - images[:, 0]).abs().mean(dim=(1, 2))  # (D_out,)


def check_dimension_effects(fn: Callable[[CapsNet, torch.Tensor], torch.Tensor], model: CapsNet,
                            image: torch.Tensor, *, quiet: bool = False) -> CheckResult:
    r"""``fn(model, image)`` must return, per dimension, the mean |pixel change| from -0.25 to +0.25."""
    result, stub = call_learner(fn, model, image)
    if stub:
        return verdict(stub, "", quiet=quiet)
    expected = reference_dimension_effects(model, image)
    hint = _shape_hint(result, tuple(expected.shape), "(D_out,): one number per dimension")
    if hint is None and not _close(result, expected):
        images, _ = perturbation_sweep(model, image)  # (D_out, V, H, W)
        middle = images.shape[1] // 2
        diff = images[:, -1] - images[:, 0]  # (D_out, H, W)
        wrong = [(diff.mean(dim=(1, 2)), ("positive and negative pixel changes cancel out: take "
                                          ".abs() of the difference before averaging")),
                 ((images[:, -1] - images[:, middle]).abs().mean(dim=(1, 2)),
                  ("you compared +0.25 with the unperturbed column: compare the two extremes, -0.25 "
                   "(column 0) and +0.25 (column -1)")),
                 (diff.abs().sum(dim=(1, 2)), "you summed over the pixels: take the mean")]
        hint = _matching_hint(result, wrong, "the numbers differ from the mean "
                                             "|image(+0.25) - image(-0.25)| over the pixels")
    return verdict(hint, "dimension_effects ranks the capsule's dimensions correctly.", quiet=quiet)


def _names_hint(names: object, effects: torch.Tensor, at_least: int) -> str | None:
    median = float(effects.median())
    if not isinstance(names, dict) or len(names) < at_least:
        return f"return a dict with at least {at_least} entries, e.g. {{4: 'stroke width', ...}}"
    if bad := [k for k in names if isinstance(k, bool) or not isinstance(k, int)
               or not 0 <= k < len(effects)]:
        return f"keys must be dimension numbers 0..{len(effects) - 1}, got {bad}"
    if blank := [k for k, v in names.items() if not isinstance(v, str) or len(v.strip(" .")) < 3]:
        return f"describe what dimension(s) {blank} do in a few words (e.g. 'slant to the right')"
    if weak := [k for k in names if float(effects[k]) < median]:
        return (f"dimension(s) {weak} barely change the reconstruction (effect "
                f"{float(effects[weak[0]]):.3f}, median {median:.3f}): pick ones from the top of the ranking")
    return None


def check_dimension_names(fn: Callable[[torch.Tensor], dict], model: CapsNet, image: torch.Tensor,
                          *, at_least: int = 3, quiet: bool = False) -> CheckResult:
    r"""``fn(effects)`` names at least three dimensions ``{dim: "what it does"}``; each must matter.

    ``effects`` is the reference :func:`reference_dimension_effects` of ``model`` on ``image``. A
    dimension "visibly matters" when its effect is at least the median effect of all dimensions;
    what the words say is for the learner (and a teacher) to judge.
    """
    effects = reference_dimension_effects(model, image)
    names, stub = call_learner(fn, effects.clone())
    hint = stub or _names_hint(names, effects, at_least)
    count = len(names) if isinstance(names, dict) else 0
    return verdict(hint, f"you named {count} dimensions that really change the digit.", quiet=quiet)


def check_couplings_for_class(fn: Callable[[torch.Tensor, int, int], torch.Tensor], *,
                              quiet: bool = False) -> CheckResult:
    r"""``fn(c, label, num_types)`` must lay c[:, label] (I, J) out as (T, G, G), type-major."""
    types, side, classes, label = 4, 6, 10, 2
    c = torch.softmax(torch.randn(types * side * side, classes,
                                  generator=torch.Generator().manual_seed(3)), dim=1)  # (I, J)
    result, stub = call_learner(fn, c, label, types)
    if stub:
        return verdict(stub, "", quiet=quiet)
    expected = couplings_on_grid(c, label, types)  # (T, G, G)
    hint = _shape_hint(result, tuple(expected.shape), "(T, G, G)")
    if hint is None and not _close(result, expected):
        column = c[:, label]
        wrong = [(column.reshape(side, side, types).permute(2, 0, 1),
                  ("primary capsules are ordered type-major (i = t*G*G + y*G + x): reshape to "
                   "(T, G, G) directly, no permute")),
                 (expected.transpose(1, 2), ("rows and columns are swapped: i = t*G*G + y*G + x, so "
                                             "y (the row) comes before x")),
                 (c[:, (label + 1) % classes].reshape(types, side, side),
                  "wrong class column: take c[:, label]")]
        hint = _matching_hint(result, wrong, "the values differ from c[:, label] laid out as (T, G, G)")
    return verdict(hint, "couplings_for_class puts every primary capsule in its place.", quiet=quiet)

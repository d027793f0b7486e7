r"""Checks for lesson 01: the squashing non-linearity (Sabour et al. 2017, Eq. 1).

Shape legend:
    B      batch size
    J      output capsules per item
    D      capsule dimension (the learner's squash works along the last dimension)

.. math::

    \mathbf v = \frac{\lVert\mathbf s\rVert^2}{1 + \lVert\mathbf s\rVert^2}
                \frac{\mathbf s}{\lVert\mathbf s\rVert}
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from capsedu.course.checks._kit import (
    CheckResult,
    call_learner,
    failed,
    mistake,
    other,
    reworded,
    verdict,
)
from capsedu.nets.squash import squash

SquashFn = Callable[[torch.Tensor], torch.Tensor]
PROBE_LENGTHS = (0.01, 0.1, 0.3, 0.5, 1.0, 2.0, 3.0, 10.0, 30.0, 100.0)
EPS_HINT = "put ε inside the square root: ||s|| = sqrt(sum(s²) + ε)"
WRONG_DIM_HINT = ("each capsule has its own norm, over its D numbers: sum over dim=-1 with "
                  "keepdim=True, a (B, J, 1) tensor")
KEEPDIM_HINT = ("the norm lost its last dimension, so (B, J) does not broadcast against (B, J, D): "
                "sum with keepdim=True")


def _probe_inputs() -> torch.Tensor:
    r"""Random directions with the lengths of ``PROBE_LENGTHS`` along J, (B, J, D) = (3, 10, 8)."""
    generator = torch.Generator().manual_seed(0)
    s = torch.randn(3, len(PROBE_LENGTHS), 8, generator=generator)  # (B, J, D)
    lengths = torch.tensor(PROBE_LENGTHS).view(1, -1, 1)  # (1, J, 1)
    return s / s.norm(dim=-1, keepdim=True) * lengths  # (B, J, D)


def _value_problem(s: torch.Tensor, v: object) -> str:
    r"""A hint about the squashed values of non-zero inputs, or '' when they are right."""
    if not isinstance(v, torch.Tensor):
        return other("type", f"return a torch.Tensor, got {type(v).__name__}")
    if v.shape != s.shape:
        return other("shape",
                     f"the shape changed from {tuple(s.shape)} to {tuple(v.shape)}: squash must keep "
                     "the shape; sum over the last dimension with keepdim=True")
    v = v.detach().float()
    if not torch.isfinite(v).all():
        return mistake("nan-for-nonzero-inputs",
                       "your output holds NaN or inf for ordinary non-zero inputs: check every division")
    for dim in (0, 1):  # the batch or the capsules, instead of each capsule's own numbers
        if torch.allclose(v, squash(s, dim=dim), rtol=1e-4, atol=1e-6):
            return mistake("squashed-along-wrong-dim",
                           f"you squashed along dim={dim}, across {'images' if dim == 0 else 'capsules'}: "
                           f"{WRONG_DIM_HINT}")
    lengths = v.norm(dim=-1)  # (B, J)
    cosine = (v * s).sum(dim=-1) / (lengths * s.norm(dim=-1)).clamp_min(1e-30)  # (B, J)
    if (cosine < 1 - 1e-4).any():
        return mistake("direction-changed",
                       "direction changed: multiply each whole vector s by one positive number per "
                       "capsule (the norm is taken over the last dimension, keepdim=True); do not squash "
                       "each component separately")
    if (lengths > 1 + 1e-5).any():
        return mistake("lengths-above-one",
                       f"norms above 1 (an input of length 100 gives {lengths[0, -1]:.4g}): did you scale "
                       "by ||s||²/(1+||s||²) and divide s by ||s||?")
    expected = squash(s).norm(dim=-1)  # (B, J)
    if torch.allclose(lengths, torch.ones_like(lengths), atol=1e-4):
        return mistake("unit-vector-only",
                       "every output has length 1: that is the bare unit vector s/||s||; multiply it by "
                       "the new length ||s||²/(1+||s||²), so that short vectors come out short")
    if not torch.allclose(lengths, expected, rtol=1e-4, atol=1e-6):
        norm = s.norm(dim=-1)
        if torch.allclose(lengths, norm / (1 + norm), rtol=1e-4, atol=1e-6):
            return mistake("norm-not-squared",
                           "lengths are ||s||/(1+||s||): Eq. 1 uses the squared norm, ||s||²/(1+||s||²)")
        ratio = lengths / norm  # (B, J) the factor each capsule was scaled by
        if ratio.max() - ratio.min() <= 1e-5 * ratio.max():
            return mistake("one-norm-for-whole-tensor",
                           "every capsule was scaled by the same number: you took one norm over the "
                           f"whole tensor; {WRONG_DIM_HINT}")
        at_one = PROBE_LENGTHS.index(1.0)
        return other("values",
                     f"lengths are wrong: an input of length 1 must give 1²/(1+1²) = 0.5, yours "
                     f"gives {lengths[0, at_one]:.4f}")
    return ""


def _zero_problem(fn: SquashFn) -> str:
    r"""A hint about the zero vector (value and gradient), or '' when both are fine."""
    zero = torch.zeros(2, 3, 8, requires_grad=True)  # (B, J, D)
    v, hint = call_learner(fn, zero, what="the zero vector made your function raise: it")
    if hint:
        return hint
    if not isinstance(v, torch.Tensor):
        return other("type",
                     f"return a torch.Tensor for the zero vector too, got {type(v).__name__}")
    if not torch.isfinite(v.detach()).all():
        return mistake("nan-at-zero", f"NaN at the zero vector: s/||s|| divides 0 by 0; {EPS_HINT}")
    if v.detach().abs().max() > 1e-6:
        return mistake("zero-not-kept",
                       "the zero vector must squash to the zero vector (a length-0 capsule stays absent)")
    if not v.requires_grad:
        return mistake("no-gradient",
                       "no gradient flows to s: keep the computation in torch (no .detach(), .item(), "
                       "numpy or math.sqrt on tensors)")
    weights = torch.linspace(-1, 1, v.numel()).view_as(v)
    (grad,) = torch.autograd.grad((v * weights).sum(), zero)
    if not torch.isfinite(grad).all():
        return mistake("eps-outside-root",
                       f"NaN gradient at zero: {EPS_HINT}, not sqrt(sum(s²)) + ε "
                       "(the slope of sqrt at 0 is infinite, and 0·∞ = NaN)")
    return ""


def _gradient_problem(fn: SquashFn, s: torch.Tensor) -> str:
    r"""A hint when values match capsedu.squash but gradients do not, or ''."""
    mine = s.clone().requires_grad_(True)
    ref = s.clone().requires_grad_(True)
    weights = torch.linspace(-1, 1, s.numel()).view_as(s)
    (grad,) = torch.autograd.grad((fn(mine) * weights).sum(), mine)
    (expected,) = torch.autograd.grad((squash(ref) * weights).sum(), ref)
    if not torch.allclose(grad, expected, rtol=1e-3, atol=1e-5):
        return mistake("gradient-cut",
                       "the values are right but the gradients are not: part of your computation is "
                       "cut from autograd (.detach(), .item(), numpy or no_grad?)")
    return ""


def check_squash(fn: SquashFn, *, quiet: bool = False) -> CheckResult:
    r"""Check the learner's ``fn(s)`` against :func:`capsedu.squash` along the last dimension."""
    s = _probe_inputs()  # (B, J, D)
    v, hint = call_learner(fn, s.clone())
    if hint and "must match the size of tensor" in hint:
        return failed(mistake("norm-without-keepdim", f"{KEEPDIM_HINT} ({hint})"), quiet=quiet)
    if hint:
        return failed(reworded(hint, f"{hint} (it gets s of shape {tuple(s.shape)} and returns the "
                                     "same shape)") if "raised" in hint else hint, quiet=quiet)
    for problem in (lambda: _value_problem(s, v), lambda: _zero_problem(fn),
                    lambda: _gradient_problem(fn, s)):
        hint = problem()
        if hint:
            return failed(hint, quiet=quiet)
    return verdict("", "squash matches capsedu.squash: lengths in [0, 1), directions kept, "
                       "finite gradient at the zero vector", quiet=quiet)


def _input_length_hint(fn: Callable[[float], float]) -> str:
    for p in (0.1, 0.5, 0.9, 0.99):
        n, hint = call_learner(fn, p, what=f"input_length_for({p})")
        if hint:
            return hint
        try:
            n = float(n)
        except (TypeError, ValueError):
            return other("type",
                         f"input_length_for({p}) must return one number, got {type(n).__name__}")
        if math.isclose(n, math.sqrt(p / (1 - p)), rel_tol=1e-6):
            continue
        if math.isclose(n, p / (1 - p), rel_tol=1e-6):
            return mistake("squared-length",
                           f"for p = {p} you returned p/(1-p) = {n:.4g}: that is ||s||², the squared "
                           "length; take its square root")
        return other("values",
                     f"an input of length {n:.4g} squashes to {n * n / (1 + n * n):.4g}, not p = {p}: "
                     "solve p = n²/(1+n²) for n")
    return ""


def check_input_length_for(fn: Callable[[float], float], *, quiet: bool = False) -> CheckResult:
    r"""Check ``fn(p)`` is the input length whose squashed length is ``p`` (inverse of Eq. 1)."""
    return verdict(_input_length_hint(fn),
                   "right: n = sqrt(p/(1-p)), so a length of 0.9 needs an input of length 3", quiet=quiet)


def _votes_reference(p: float, vote_length: float, agree: bool) -> int:
    r"""The fewest votes of length ``vote_length`` whose squashed sum is at least ``p`` long."""
    needed = math.sqrt(p / (1 - p))  # the input length that squashes to p
    ratio = needed / vote_length  # agreeing lengths add: K a >= n
    return math.ceil((ratio if agree else ratio ** 2) - 1e-9)  # at right angles: sqrt(K) a >= n


VOTE_CASES = ((0.9, 0.4), (0.5, 0.3), (0.8, 0.3), (0.3, 0.1))  # no case sits on a whole number


def _votes_hint(fn: Callable[[float, float, bool], int]) -> str:
    for (p, a), agree in ((case, agree) for case in VOTE_CASES for agree in (True, False)):
        call = f"votes_needed({p}, {a}, agree={agree})"
        k, hint = call_learner(fn, p, a, agree, what=call)
        if hint:
            return hint
        if isinstance(k, torch.Tensor) and k.numel() == 1:
            k = k.item()
        if isinstance(k, float) and k.is_integer():
            k = int(k)
        if not isinstance(k, int) or isinstance(k, bool):
            return other("type", f"{call} must return a whole number of votes, got {k!r}")
        expected = _votes_reference(p, a, agree)
        if k == expected:
            continue
        n = math.sqrt(p / (1 - p))
        if k == math.ceil(p / a if agree else (p / a) ** 2):
            return mistake("sum-reaches-p-not-its-root",
                           f"{call} = {k}: a sum of length {p} squashes to less than {p}; the summed votes "
                           "must reach the input length whose squash is p (Exercise 1)")
        if not agree and k == _votes_reference(p, a, True):
            return mistake("right-angles-add-lengths",
                           f"{call} = {k}: votes at right angles do not add their lengths (that is only "
                           "true when they point the same way); think of Pythagoras for their sum")
        if agree and k == _votes_reference(p, a, False):
            return mistake("agreeing-votes-pythagoras",
                           f"{call} = {k}: agreeing votes point the same way, so their lengths simply add; "
                           "you used the rule for votes at right angles")
        if k in (expected - 1, math.floor(n / a if agree else (n / a) ** 2)):
            return mistake("rounded-down",
                           f"{call} = {k}: that many votes fall just short of {p}; return the smallest "
                           "number that reaches it (round up)")
        return other("values", f"{call} = {k}: {k} votes of length {a} squash to a capsule "
                     f"{_squashed_sum(k, a, agree):.3f} long, and {expected} is the fewest that reach {p}")
    return ""


def _squashed_sum(k: int, a: float, agree: bool) -> float:
    r"""The length of squash(sum of k votes of length a), all agreeing or at right angles."""
    n = k * a if agree else math.sqrt(max(k, 0)) * a
    return n * n / (1 + n * n)


def check_votes_needed(fn: Callable[[float, float, bool], int], *, quiet: bool = False) -> CheckResult:
    r"""Check ``fn(p, vote_length, agree)``: the fewest votes whose squashed sum reaches length ``p``."""
    return verdict(_votes_hint(fn), "right: agreeing votes add their lengths, votes at right "
                   "angles only their squared lengths", quiet=quiet)

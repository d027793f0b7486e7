r"""Checks for lesson 12 (Efficient-CapsNet): its squash and the self-attention couplings.

Each check runs the learner's function on seeded inputs, compares it with
:mod:`capsedu.nets.self_attention`, and when it differs recomputes the step with the likely
mistakes (Eq. 1's squash, a softmax over the wrong axis, a missing 1/sqrt(D), the diagonal of
the attention matrix only ...) to name the one that was made.

Shape legend (the lesson's layout):
    B      images;  I  input capsules;  J  output capsules;  D  capsule dimension
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from capsedu.course.checks._kit import CheckResult, call_learner, diagnose, verdict


def squash_variant(s: torch.Tensor, *, kind: str = "efficient") -> torch.Tensor:
    r"""Efficient-CapsNet's squash of (..., D) vectors, or one of its usual mistakes."""
    norm = torch.sqrt((s * s).sum(dim=-1, keepdim=True) + 1e-8)  # (..., 1)
    if kind == "eq1":  # Sabour et al.'s squash
        return norm ** 2 / (1 + norm ** 2) * s / norm
    if kind == "no_direction":  # the length factor times s, not times s / |s|
        return (1 - torch.exp(-norm)) * s
    if kind == "exp_plus":  # 1 - e^{+|s|}
        return (1 - torch.exp(norm)) * s / norm
    return (1 - torch.exp(-norm)) * s / norm


_SQUASH_MISTAKES = [
    ("eq1", "that is Eq. 1 of 2017 (|s|^2 / (1 + |s|^2)); Efficient-CapsNet's squash scales the "
     "unit vector s / |s| by 1 - exp(-|s|)"),
    ("no_direction", "you multiplied s itself by 1 - exp(-|s|): multiply the unit vector s / |s|, "
     "so that the length is 1 - exp(-|s|)"),
    ("exp_plus", "the exponent's sign: 1 - exp(-|s|) lies in [0, 1); 1 - exp(+|s|) is negative"),
]


def check_efficient_squash(fn: Callable, *, quiet: bool = False) -> CheckResult:
    r"""``fn(s)`` must squash (B, J, D) vectors along the last axis as Efficient-CapsNet does,
    and give the zero vector 0 (not NaN)."""
    generator = torch.Generator().manual_seed(12)
    s = torch.randn(3, 4, 5, generator=generator, dtype=torch.float64) * torch.tensor([0.05, 0.5, 2.0, 8.0],
                                                                                    dtype=torch.float64)[:, None]
    result, hint = call_learner(fn, s.clone(), what="your efficient_squash")
    hint = hint or diagnose(result, squash_variant(s),
                            [(lambda kind=kind: squash_variant(s, kind=kind), h) for kind, h in _SQUASH_MISTAKES],
                            "v = (1 - exp(-|s|)) * s / |s|, with |s| the length over the last axis (dim=-1)",
                            what="v, the input's shape,", atol=1e-7)
    if not hint:
        zero, _ = call_learner(fn, torch.zeros(2, 3, dtype=torch.float64), what="your efficient_squash")
        if not isinstance(zero, torch.Tensor) or not torch.isfinite(zero).all():
            hint = ("the zero vector gives NaN (0 / 0): add a small eps inside the square root, "
                    "|s| = sqrt(sum(s^2) + 1e-8), as capsedu's squash does")
    return verdict(hint, "efficient_squash keeps the direction and maps the length to 1 - exp(-|s|).",
                   quiet=quiet)


def couplings_variant(u_hat: torch.Tensor, *, softmax_dim: int = 2, scaled: bool = True,
                      diagonal_only: bool = False) -> torch.Tensor:
    r"""The self-attention couplings c (B, I, J) of predictions u_hat (B, I, J, D), or a mistake."""
    if diagonal_only:  # each prediction with itself: A_{j,ii} only
        logits = (u_hat * u_hat).sum(dim=-1)  # (B, I, J)
    else:
        logits = torch.einsum("bijd,bkjd->bij", u_hat, u_hat)  # (B, I, J) = sum_k A_{j,ik}
    if scaled:
        logits = logits / math.sqrt(u_hat.shape[-1])
    return torch.softmax(logits, dim=softmax_dim)


_COUPLING_MISTAKES = [
    ({"softmax_dim": 1}, "you normalised over the input capsules i: the softmax runs over the "
     "output capsules j (dim=2 of (B, I, J)), so that each input capsule shares itself among them"),
    ({"scaled": False}, "divide the agreements by sqrt(D) before the softmax, as in scaled "
     "dot-product attention"),
    ({"diagonal_only": True}, "you compared each prediction only with itself (|u_hat|^2): sum its "
     "agreement with every prediction k for the same output, sum_k u_hat_{j|i} . u_hat_{j|k}"),
]


def check_attention_couplings(fn: Callable, *, quiet: bool = False) -> CheckResult:
    r"""``fn(u_hat)`` must return the coupling coefficients (B, I, J) of self-attention routing
    for predictions u_hat (B, I, J, D)."""
    generator = torch.Generator().manual_seed(21)
    u_hat = torch.randn(2, 5, 3, 4, generator=generator, dtype=torch.float64)
    result, hint = call_learner(fn, u_hat.clone(), what="your attention_couplings")
    hint = hint or diagnose(result, couplings_variant(u_hat),
                            [(lambda o=options: couplings_variant(u_hat, **o), h) for options, h in _COUPLING_MISTAKES],
                            "c = softmax over j of (sum_k u_hat_{j|i} . u_hat_{j|k}) / sqrt(D)",
                            what="c (B, I, J)")
    return verdict(hint, "attention_couplings gives each prediction a share that grows with its "
                   "agreement with all the others - in one pass.", quiet=quiet)

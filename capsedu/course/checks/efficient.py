r"""Checks for lesson 12 (Efficient-CapsNet): its class layer with the attention switched off,
and how much a routing's couplings depend on the image.

Each check runs the learner's function on seeded inputs, compares it with the right answer,
and when it differs recomputes the step with the likely mistakes to name the one that was made.

Shape legend (the lesson's layout):
    B      batch size (images)
    I      input capsules
    J      output capsules
    D      capsule dimension
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from capsedu.course.checks._kit import CheckResult, call_learner, diagnose, verdict
from capsedu.explore.critique import coupling_spread
from capsedu.nets.self_attention import efficient_squash
from capsedu.nets.squash import squash


def uniform_variant(u_hat: torch.Tensor, prior: torch.Tensor, *, kind: str = "right") -> torch.Tensor:
    r"""Class capsules (B, J, D) with every coupling 1/J plus the learned ``prior`` (I, J), the
    paper's :math:`b_{ij}`, as Efficient-CapsNet's class layer would compute them without
    attention - or a usual mistake."""
    num_out = u_hat.shape[2]
    weights = {"no_prior": torch.full_like(prior, 1 / num_out),
               "over_inputs": 1 / u_hat.shape[1] + prior,
               "softmax_prior": torch.softmax(prior, dim=1)}.get(kind, 1 / num_out + prior)
    s = torch.einsum("ij,bijd->bjd", weights.to(u_hat), u_hat)  # (B, J, D)
    if kind == "eq1":
        return squash(s)
    return efficient_squash(s)


_UNIFORM_MISTAKES = [
    ("no_prior", "the learned prior is missing: Efficient-CapsNet adds b_ij to every coupling, so "
     "a uniform coupling is 1/J + b_ij"),
    ("over_inputs", "you shared each OUTPUT among the inputs (1/I): a coupling shares each input "
     "among the J outputs, 1/J"),
    ("softmax_prior", "with attention switched off there is no softmax: the weights are 1/J + b_ij"),
    ("eq1", "that is Eq. 1's squash: Efficient-CapsNet squashes with 1 - exp(-|s|)"),
]


def check_uniform_couplings(fn: Callable[[torch.Tensor, torch.Tensor], object], *,
                            quiet: bool = False) -> CheckResult:
    r"""Check ``fn(u_hat (B, I, J, D), prior (I, J)) -> (B, J, D)``: Efficient-CapsNet's class
    capsules with the attention replaced by uniform couplings 1/J (the prior b_ij still added)."""
    generator = torch.Generator().manual_seed(23)
    u_hat = torch.randn(2, 6, 4, 5, generator=generator, dtype=torch.float64)  # (B, I, J, D)
    prior = 0.1 * torch.randn(6, 4, generator=generator, dtype=torch.float64)  # (I, J)
    result, hint = call_learner(fn, u_hat.clone(), prior.clone(), what="your uniform_capsules")
    mistakes = [(lambda kind=kind: uniform_variant(u_hat, prior, kind=kind), text) for kind, text in _UNIFORM_MISTAKES]
    hint = hint or diagnose(result, uniform_variant(u_hat, prior), mistakes,
                            "s_j = sum_i (1/J + b_ij) u_hat_{j|i}, v_j = efficient_squash(s_j)",
                            what="class capsules v (B, J, D)", atol=1e-7)
    return verdict(hint, "uniform_capsules: the same class layer with the attention switched off.",
                   quiet=quiet)


def check_coupling_spread(fn: Callable[[torch.Tensor], object], *, quiet: bool = False) -> CheckResult:
    r"""Check ``fn(c (N, I, J)) -> one number``: the mean over (i, j) of c_ij's standard deviation
    across the N images."""
    generator = torch.Generator().manual_seed(31)
    c = torch.softmax(torch.randn(12, 5, 4, generator=generator, dtype=torch.float64)
                      + torch.randn(1, 5, 4, generator=generator, dtype=torch.float64), dim=2)  # (N, I, J)
    result, hint = call_learner(fn, c.clone(), what="your coupling_spread")
    try:
        result = torch.tensor(float(result), dtype=torch.float64)  # one number
    except (TypeError, ValueError, RuntimeError):
        pass  # diagnose names what came back instead
    mistakes = [(lambda: c.std(dim=1, correction=0).mean(), "that spread is across the input capsules "
                 "i: take it across the IMAGES (dim 0), one spread per coupling c_ij"),
                (lambda: c.std(dim=0).mean(), "use the population standard deviation (correction=0): "
                 "the spread of these images, not an estimate for others"),
                (lambda: c.var(dim=0, correction=0).mean(), "that is the variance: take the standard "
                 "deviation (its square root) before averaging"),
                (lambda: c.std(correction=0), "that mixes the couplings of different i and j: take "
                 "each c_ij's spread across the images, then average those")]
    hint = hint or diagnose(result, coupling_spread(c), mistakes,
                            "c.std(dim=0, correction=0).mean(): each coupling's spread across the "
                            "images, averaged over i and j", what="one number", atol=1e-9)
    return verdict(hint, "coupling_spread measures how much routing depends on the image.", quiet=quiet)

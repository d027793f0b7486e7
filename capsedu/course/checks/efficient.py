r"""Checks for lesson 12 (Efficient-CapsNet): self-attention routing and its class layer with the
attention switched off.

:func:`uniform_layer` is the class layer with uniform couplings: what the lesson trains with when
the learner's version does not pass its check yet. Its check also asks for the gradients of the
layer's W and prior: the network trains with it.

Each check runs the learner's function on seeded inputs, compares it with the right answer,
and when it differs recomputes the step with the likely mistakes to name the one that was made.

Shape legend (the lesson's layout):
    B      batch size (images)
    I      input capsules
    J      output capsules
    D      capsule dimension
    D_in   primary capsule dimension
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import nn

from capsedu.course.checks._kit import (
    CheckResult,
    call_learner,
    close,
    diagnose,
    mistake,
    other,
    shape_of,
    verdict,
)
from capsedu.nets.efficient_capsnet import SelfAttentionCaps
from capsedu.nets.self_attention import efficient_squash
from capsedu.nets.squash import squash


def attention_variant(u_hat: torch.Tensor, prior: torch.Tensor, *, kind: str = "right"
                      ) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Self-attention routing ``(v (B, J, D), c (B, I, J))`` of predictions ``u_hat`` (B, I, J, D)
    with priors ``prior`` (I, J), or one of its usual mistakes."""
    scale = 1.0 if kind == "no_scale" else math.sqrt(u_hat.shape[-1])
    A = torch.einsum("bijd,bkjd->bjik", u_hat, u_hat) / scale  # (B, J, I, I)
    logits = A.sum(dim=-1).transpose(1, 2)  # (B, I, J)
    if kind == "prior_in_logits":
        logits = logits + prior
    c = torch.softmax(logits, dim=1 if kind == "softmax_inputs" else 2)  # (B, I, J)
    weights = c if kind in ("no_prior", "prior_in_logits") else c + prior  # (B, I, J)
    if kind == "squash_first":
        return torch.einsum("bij,bijd->bjd", weights, efficient_squash(u_hat)), c  # (B, J, D)
    s = torch.einsum("bij,bijd->bjd", weights, u_hat)  # (B, J, D)
    return (squash(s) if kind == "eq1" else efficient_squash(s)), c


_ATTENTION_MISTAKES = [
    ("softmax_inputs", mistake(
        "softmax-over-inputs", "your couplings sum to 1 over the input capsules i: the softmax runs "
        "over the OUTPUT capsules j (dim=2 of (B, I, J)), so each input divides itself among the "
        "outputs")),
    ("no_scale", mistake(
        "agreement-not-scaled", "the agreements are not scaled: divide u_hat_{j|i} . u_hat_{j|k} by "
        "sqrt(D), D the capsule dimension (u_hat.shape[-1])")),
    ("no_prior", mistake(
        "prior-missing", "the prior b_ij is missing: s_j = sum_i (c_ij + b_ij) u_hat_{j|i} (c itself, "
        "returned, stays without it)")),
    ("prior_in_logits", mistake(
        "prior-in-logits", "the prior is added to the couplings AFTER the softmax, c_ij + b_ij, not "
        "to the logits before it")),
    ("squash_first", mistake(
        "squashed-before-sum", "you squashed the predictions before summing: sum first, s_j = sum_i "
        "(c_ij + b_ij) u_hat_{j|i}, then squash s_j")),
    ("eq1", mistake(
        "eq1-squash", "that is Eq. 1's squash: Efficient-CapsNet squashes with (1 - exp(-|s|)) s / |s| "
        "(efficient_squash)")),
]


def check_self_attention(fn: Callable[[torch.Tensor, torch.Tensor], object], *,
                         quiet: bool = False) -> CheckResult:
    r"""Check ``fn(u_hat (B, I, J, D), prior (I, J)) -> (v (B, J, D), c (B, I, J))``: self-attention
    routing of Efficient-CapsNet."""
    generator = torch.Generator().manual_seed(17)
    u_hat = torch.randn(2, 5, 3, 4, generator=generator, dtype=torch.float64)  # (B, I, J, D)
    prior = 0.2 * torch.randn(5, 3, generator=generator, dtype=torch.float64)  # (I, J)
    result, hint = call_learner(fn, u_hat.clone(), prior.clone(), what="your self-attention routing")
    expected = attention_variant(u_hat, prior)
    if not hint:
        if not isinstance(result, tuple) or len(result) != 2:
            hint = other("type", f"return a tuple (v, c), got {type(result).__name__}")
        elif not all(isinstance(got, torch.Tensor) and got.shape == want.shape
                     for got, want in zip(result, expected)):
            hint = other("shape", f"v must have shape {tuple(expected[0].shape)} (B, J, D) and c "
                         f"{tuple(expected[1].shape)} (B, I, J), got {shape_of(result[0])} and "
                         f"{shape_of(result[1])}")
    if not hint and not all(close(got, want, rtol=1e-5, atol=1e-8) for got, want in zip(result, expected)):
        hint = next((text for kind, text in _ATTENTION_MISTAKES
                     if all(close(got, want, rtol=1e-5, atol=1e-8)
                            for got, want in zip(result, attention_variant(u_hat, prior, kind=kind)))), "")
        if not hint:
            right_c = close(result[1], expected[1], rtol=1e-5, atol=1e-8)
            hint = other("values", "c is right, v is not: s_j = sum_i (c_ij + b_ij) u_hat_{j|i}, "
                         "v_j = efficient_squash(s_j)" if right_c else "c differs: A_j = u_hat_j "
                         "u_hat_j^T / sqrt(D), c_ij = softmax over j of sum_k A_{j,ik}")
    return verdict(hint, "self-attention routing: each prediction's agreement with the others, one pass.",
                   quiet=quiet)


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
    return efficient_squash(s)  # (B, J, D)


_UNIFORM_MISTAKES = [
    ("no_prior", mistake(
        "prior-missing", "the learned prior is missing: Efficient-CapsNet adds b_ij to every "
        "coupling, so a uniform coupling is 1/J + b_ij")),
    ("over_inputs", mistake(
        "shared-over-inputs", "you shared each OUTPUT among the inputs (1/I): a coupling shares "
        "each input among the J outputs, 1/J")),
    ("softmax_prior", mistake(
        "softmax-of-prior",
        "with attention switched off there is no softmax: the weights are 1/J + b_ij")),
    ("eq1", mistake("eq1-squash", "that is Eq. 1's squash: Efficient-CapsNet squashes with 1 - exp(-|s|)")),
]


def uniform_layer(layer: nn.Module, u: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Efficient-CapsNet's class ``layer`` (:class:`~capsedu.nets.efficient_capsnet.SelfAttentionCaps`)
    with its attention switched off: primary capsules u (B, I, D_in) -> class capsules v (B, J, D)
    and couplings c (B, I, J), every one 1/J; the learned prior b_ij is added to them in the sum and,
    as the layer's own couplings, c is returned without it."""
    u_hat = layer.prediction_vectors(u)  # (B, I, J, D)
    c = u_hat.new_full(u_hat.shape[:3], 1 / u_hat.shape[2])  # (B, I, J)
    return uniform_variant(u_hat, layer.prior), c


def _probe_layer() -> tuple[nn.Module, torch.Tensor]:
    r"""A small class layer (6 inputs of 3 dimensions, 4 classes of 5) with seeded weights and prior,
    and primary capsules u (2, 6, 3), in float32 as in the network; the learner's random state is
    left alone."""
    generator = torch.Generator().manual_seed(29)
    with torch.random.fork_rng(devices=[]):
        layer = SelfAttentionCaps(6, 3, 4, 5)
    with torch.no_grad():
        for parameter in layer.parameters():
            parameter.copy_(0.3 * torch.randn(parameter.shape, generator=generator))
    return layer, torch.randn(2, 6, 3, generator=generator)


def _uniform_layer_hint(result: object, layer: nn.Module, u: torch.Tensor) -> str:
    if not (isinstance(result, tuple) and len(result) == 2):
        return other("type", f"return (v, c), the class capsules and the couplings, got {type(result).__name__}")
    with torch.no_grad():
        u_hat = layer.prediction_vectors(u)  # (B, I, J, D)
        v, c = uniform_layer(layer, u)
    mistakes = [(lambda kind=kind: uniform_variant(u_hat, layer.prior, kind=kind), text)
                for kind, text in _UNIFORM_MISTAKES]
    attention = (lambda: layer(u)[0], mistake("attention-left-on", "those are the layer's own capsules, "
                                              "with its attention: every coupling is 1/J, and the sum adds b_ij"))
    hint = diagnose(result[0], v, [*mistakes, attention],
                    other("values", "v differs: each class sums its predictions weighted by coupling plus "
                                    "prior, then Efficient-CapsNet's squash"), what="class capsules v (B, J, D)",
                    rtol=1e-4, atol=1e-6)
    with_prior = (1 / c.shape[2] + layer.prior).expand(c.shape).detach()  # (B, I, J)
    return hint or diagnose(result[1], c, [(lambda: with_prior, mistake(
        "couplings-with-prior", "the couplings you return include the prior: like the layer's own c, they are "
                                "1/J each; b_ij is added to them only in the sum"))],
        other("values", "c differs from 1/J for every image and pair"), what="couplings c (B, I, J)", atol=1e-6)


def _gradient_hint(result: tuple, layer: nn.Module, u: torch.Tensor) -> str:
    r"""The network trains with this layer: W and the prior must get the reference's gradients."""
    if not result[0].requires_grad:
        return mistake("no-gradient", "your capsules carry no gradient: the network could not learn W or the "
                                      "prior through them (torch.no_grad() or .detach()?)")
    layer.zero_grad()
    result[0].square().sum().backward()
    mine = {name: parameter.grad for name, parameter in layer.named_parameters()}
    layer.zero_grad()
    uniform_layer(layer, u)[0].square().sum().backward()
    for name, parameter in layer.named_parameters():
        if mine[name] is None or not bool(mine[name].abs().sum() > 0):
            return mistake("parameter-without-gradient", f"no gradient reached the layer's {name}: the network "
                                                         "learns it while training, so it must enter your sum "
                                                         "as a tensor that tracks gradients")
        if not close(mine[name], parameter.grad, rtol=1e-4, atol=1e-6):
            return other("gradient", f"the gradient for the layer's {name} differs from the reference's")
    return ""


def check_uniform_layer(fn: Callable[[nn.Module, torch.Tensor], object], *, quiet: bool = False) -> CheckResult:
    r"""Check ``fn(layer, u) -> (v, c)``: Efficient-CapsNet's class layer with its attention switched off
    (every coupling 1/J plus the learned prior), values and gradients for W and the prior."""
    layer, u = _probe_layer()
    result, hint = call_learner(fn, layer, u.clone(), what="your uniform_class_layer")
    hint = hint or _uniform_layer_hint(result, layer, u) or _gradient_hint(result, layer, u)
    return verdict(hint, "uniform_class_layer: the same class layer with the attention switched off; W and the "
                         "prior get their gradients.", quiet=quiet)

r"""Checks of lesson 03's exercises: the prediction vectors, the wrong softmax axis predicted, and
how much the routing logits still change per iteration (the paper's mean |Δb|).

Shape legend:
    B      batch size
    I      input capsules
    J      output capsules
    D_in   input capsule dimension
    D_out  output capsule dimension (D inside routing)

The inputs are the seeded probes of :mod:`.routing` (:func:`~.routing.random_u_hat`).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

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
from capsedu.course.checks.routing import PROBE_SEED, random_u_hat
from capsedu.nets.routing import dynamic_routing
from capsedu.nets.squash import squash


def _first_iteration_over_inputs(u_hat: torch.Tensor) -> torch.Tensor:
    r"""v (B, J, D) of the first iteration when c is a softmax over the inputs (every c_ij = 1/I)."""
    return squash(u_hat.mean(dim=1), dim=-1)  # (B, J, D)


def _wrong_axis_hint(v: object, u_hat: torch.Tensor) -> str:
    r"""'' when ``v`` is the first iteration's output with the softmax over the inputs, else a hint."""
    mean_vote = u_hat.mean(dim=1)  # (B, J, D)
    return diagnose(v, _first_iteration_over_inputs(u_hat), [
        (lambda: squash(u_hat.sum(dim=1) / u_hat.shape[2]),
         mistake("softmax-over-outputs",
                 "that is the right axis's first iteration, c = 1/J: with the softmax over the "
                 "inputs, the I couplings of one output j share the unit - what is each when b = "
                 "0?")),
        (lambda: squash(u_hat.sum(dim=1)),
         mistake("couplings-all-one",
                 "every c_ij = 1 is no softmax: a softmax of zeros over I gives each of the I "
                 "inputs an equal share of 1")),
        (lambda: mean_vote,
         mistake("v-not-squashed", "v is an output capsule: squash s_j (Eq. 1) before returning "
                 "it")),
        (lambda: squash(mean_vote, dim=1),
         mistake("squash-wrong-axis",
                 "squash runs over the wrong axis: each s_j is a vector along the last dimension "
                 "D")),
        (lambda: dynamic_routing(u_hat, 3)[0],
         mistake("routed-three-iterations",
                 "that is the right routing after 3 iterations: the task is the first iteration "
                 "with the softmax over the inputs")),
    ], other("values", "not the first iteration's v with the softmax over the inputs: write c for "
             "b = 0, then Eq. 2 and Eq. 1 - no loop and no softmax call are needed"),
        what="v (B, J, D)", rtol=1e-4, atol=1e-7)


def check_wrong_axis_output(predict_fn: Callable[[torch.Tensor], torch.Tensor],
                            *, quiet: bool = False) -> CheckResult:
    r"""Check ``predict_fn(u_hat) -> v``: the first iteration's output with the softmax over the inputs.

    ``u_hat`` is (B, I, J, D) and ``v`` must be (B, J, D). Tried with two numbers of input and
    output capsules, so that no number of the lesson's network can be built in.
    """
    hint = ""
    generator = torch.Generator().manual_seed(PROBE_SEED)
    for caps_in, caps_out in ((12, 4), (7, 3)):
        u_hat = 0.6 * torch.randn(2, caps_in, caps_out, 5, generator=generator)  # (B, I, J, D)
        v, hint = call_learner(predict_fn, u_hat.clone(),
                               what=f"with u_hat of shape {tuple(u_hat.shape)}, your function")
        hint = hint or _wrong_axis_hint(v, u_hat)
        if hint:
            break
    return verdict(hint, "that is v after the first iteration with the softmax over the inputs",
                   quiet=quiet)


def _updates(u_hat: torch.Tensor, routing_iterations: int) -> list[dict[str, torch.Tensor]]:
    r"""The r - 1 updates of b in Procedure 1: each as the logits after it, its Δb and c around it."""
    b = torch.zeros(u_hat.shape[:3], dtype=u_hat.dtype)  # (B, I, J)
    updates = []
    for _ in range(routing_iterations - 1):
        c = torch.softmax(b, dim=2)  # (B, I, J)
        v = squash((c.unsqueeze(-1) * u_hat).sum(dim=1), dim=-1)  # (B, J, D)
        delta = (u_hat * v.unsqueeze(1)).sum(dim=-1)  # (B, I, J)  agreement
        b = b + delta
        updates.append({"b": b, "delta": delta, "c_before": c, "c_after": torch.softmax(b, dim=2)})
    return updates


def logit_changes_reference(u_hat: torch.Tensor, routing_iterations: int) -> torch.Tensor:
    r"""Mean |Δb| over images, inputs and outputs for each of the r - 1 updates of b, (r - 1,)."""
    return torch.stack([update["delta"].abs().mean() for update in _updates(u_hat, routing_iterations)])


def check_logit_changes(changes_fn: Callable[[torch.Tensor, int], torch.Tensor],
                        *, quiet: bool = False) -> CheckResult:
    r"""Check ``changes_fn(u_hat, routing_iterations) -> (r - 1,)``: mean |Δb| of each update of b.

    Entry k is the mean over images, inputs i and outputs j of |b^(k+1) - b^(k)|, the change
    Procedure 1 makes to the routing logits after iteration k, k = 1 .. r - 1.
    """
    u_hat, r = random_u_hat(batch=3), 5
    changes, hint = call_learner(changes_fn, u_hat.clone(), r)
    if not hint and isinstance(changes, (list, tuple)):
        try:
            changes = torch.tensor([float(x) for x in changes])
        except (TypeError, ValueError, RuntimeError):
            hint = other("type", "return one number per update of b (a tensor or a list of "
                         "numbers)")
    if not hint and isinstance(changes, torch.Tensor) and changes.shape == (r,):
        hint = mistake("one-value-per-iteration",
                       f"one value per update of b: r = {r} iterations update b {r - 1} times "
                       "(between iterations), so return r - 1 values")
    if not hint:
        updates = _updates(u_hat, r)

        def per_update(measure: Callable[[dict[str, torch.Tensor]], torch.Tensor]) -> Callable[[], torch.Tensor]:
            return lambda: torch.stack([measure(update) for update in updates])  # (r - 1,)

        hint = diagnose(changes, logit_changes_reference(u_hat, r), [
            (per_update(lambda x: x["b"].abs().mean()),
             mistake("logits-not-changes",
                     "these are the logits b themselves: record the change b_new - b of each "
                     "update, not the running total")),
            (per_update(lambda x: x["delta"].mean()),
             mistake("signed-mean",
                     "take |Δb| before averaging: changes of both signs cancel in a plain mean")),
            (per_update(lambda x: x["delta"].abs().max()),
             mistake("max-not-mean", "the largest change is not the mean: average |Δb| over "
                     "images, inputs i and outputs j")),
            (per_update(lambda x: (x["c_after"] - x["c_before"]).abs().mean()),
             mistake("coupling-change",
                     "that is the change of the couplings c: measure the change of the logits b")),
        ], other("values", "not the mean |Δb| of each update: for each update, average |Δb| over "
                 "all images, inputs i and outputs j"),
            what="one value per update, a tensor", rtol=1e-4, atol=1e-7)
    return verdict(hint, f"the mean |Δb| of each of the {r - 1} updates matches", quiet=quiet)


def _prediction_hint(u_hat: object, W: torch.Tensor, u: torch.Tensor) -> str:
    r"""Specific hint for wrong prediction vectors ``u_hat`` given ``W`` and ``u``."""
    ref = torch.einsum("ijdk,bik->bijd", W, u)  # (B, I, J, D_out)
    if not isinstance(u_hat, torch.Tensor):
        return other("type", f"return a tensor (B, I, J, D_out), got {type(u_hat).__name__}")
    if u_hat.shape == ref.shape + (1,):
        return mistake("trailing-singleton-dim",
                       "u_hat has a trailing dimension of size 1: squeeze(-1) after the matmul")
    if close(u_hat, ref.transpose(1, 2)):
        return mistake("axes-swapped",
                       "axes in the wrong order: you returned (B, J, I, D_out); expected (B, I, J, "
                       "D_out)")
    square = W.shape[-1] == W.shape[-2]
    if square and close(u_hat, torch.einsum("ijkd,bik->bijd", W, u)):
        return mistake("w-transposed",
                       "you multiplied by W_ij transposed: W is (I, J, D_out, D_in), so "
                       "u_hat_j|i = W[i, j] @ u_i with u_i as a column (D_in, 1)")
    if u_hat.shape != ref.shape:
        return other("shape",
                     f"u_hat must have shape (B, I, J, D_out) = {tuple(ref.shape)}, got "
                     f"{shape_of(u_hat)}")
    return other("values",
                 "the values differ from W_ij u_i: check which axis of W multiplies u_i (the last, "
                 "D_in)")


def check_predictions(predict_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
                      *, quiet: bool = False) -> CheckResult:
    r"""Check ``predict_fn(W, u) -> u_hat`` (Eq. 2's prediction vectors).

    W is (I, J, D_out, D_in), u is (B, I, D_in) and u_hat must be (B, I, J, D_out).

    Tried with D_out != D_in (like the paper's 8 -> 16) and with a square W, where using W
    transposed would go unnoticed by shapes alone.
    """
    generator = torch.Generator().manual_seed(PROBE_SEED)
    hint = ""
    for d_out, d_in in ((6, 3), (4, 4)):
        W = torch.randn(5, 3, d_out, d_in, generator=generator)  # (I, J, D_out, D_in)
        u = torch.randn(2, 5, d_in, generator=generator)  # (B, I, D_in)
        u_hat, hint = call_learner(predict_fn, W.clone(), u.clone(),
                                   what=f"with W {tuple(W.shape)} and u {tuple(u.shape)}, your function")
        if not hint and not close(u_hat, torch.einsum("ijdk,bik->bijd", W, u)):
            hint = _prediction_hint(u_hat, W, u)
        if hint:
            break
    return verdict(hint, "prediction vectors match u_hat_j|i = W_ij u_i, shape (B, I, J, D_out)",
                   quiet=quiet)

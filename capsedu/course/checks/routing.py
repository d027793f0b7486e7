r"""Checks for lesson 03 (dynamic routing, Procedure 1 and Eqs. 2-3).

Shape legend:
    B      batch size
    I      input capsules
    J      output capsules
    D_in   input capsule dimension
    D_out  output capsule dimension (D inside routing)

Each check runs the learner's function on small random inputs and compares it with
:func:`capsedu.dynamic_routing`, the one Procedure 1 of the package; when it differs, the hint names
the likely bug, read off the learner's own output (couplings that sum to 1 over the inputs, a
``v`` that is the unsquashed sum of the learner's own couplings, logits never or wrongly updated,
an iteration too many or too few, ...), so no second, deliberately broken, Procedure 1 is needed.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from capsedu.course.checks._kit import CheckResult, call_learner, close, shape_of, verdict
from capsedu.nets.routing import dynamic_routing
from capsedu.nets.squash import squash

_SEED = 20171026  # the paper's arXiv date: fixed inputs, independent of the global RNG


def _random_u_hat(batch: int = 2, caps_in: int = 12, caps_out: int = 4, dim: int = 5,
                  scale: float = 0.6) -> torch.Tensor:
    generator = torch.Generator().manual_seed(_SEED)
    return scale * torch.randn(batch, caps_in, caps_out, dim, generator=generator)  # (B, I, J, D)


SOFTMAX_OVER_INPUTS = ("c is a softmax over the input capsules I (dim=1); Eq. 3 takes it over "
                       "the output capsules J (dim=2), so each c_i sums to 1 over j")
NOT_SQUASHED = "v is not squashed: apply squash(s, dim=-1) (Eq. 1) to s_j"
SQUASH_AXIS = ("squash runs over the wrong axis: each capsule vector s_j lies along the "
               "last dimension D, so use squash(s, dim=-1)")
NEVER_UPDATED = ("the logits b never change, so c stays uniform: add the agreement "
                 "u_hat . v to b after each iteration")
REPLACED = "b is replaced by the agreement instead of accumulated: use b = b + (u_hat * v).sum(-1)"


def _sums_over_inputs(c: torch.Tensor) -> bool:
    r"""True when the couplings (B, I, J) sum to 1 over the inputs I and not over the outputs J."""
    return close(c.sum(dim=1), torch.ones_like(c[:, 0])) and not close(c.sum(dim=2), torch.ones_like(c[..., 0]))


def _weighted_sum(c: torch.Tensor, u_hat: torch.Tensor) -> torch.Tensor:
    r"""Eq. 2 with the learner's own couplings: s (B, J, D)."""
    return (c.detach().unsqueeze(-1) * u_hat).sum(dim=1)  # (B, J, D)


def _replaced(u_hat: torch.Tensor, v_before: torch.Tensor) -> torch.Tensor:
    r"""The couplings (B, I, J) when b holds only the agreement with the previous output v (B, J, D)."""
    return torch.softmax((u_hat * v_before.unsqueeze(1)).sum(dim=-1), dim=2)  # (B, I, J)


def _mistake(v: torch.Tensor, c: torch.Tensor, u_hat: torch.Tensor, r: int) -> str:
    r"""The typical bug that the learner's ``(v, c)`` after ``r`` iterations shows, or "".

    With the logits replaced instead of accumulated, iteration 2 is still right (b starts at 0),
    so after r = 3 iterations c is the softmax of the agreement with the right second v.
    """
    if _sums_over_inputs(c):
        return SOFTMAX_OVER_INPUTS
    s = _weighted_sum(c, u_hat)  # (B, J, D)
    if close(v, s):
        return NOT_SQUASHED
    if close(v, squash(s, dim=1)):
        return SQUASH_AXIS
    if r > 1 and close(c, torch.full_like(c, 1 / c.shape[2])):
        return NEVER_UPDATED
    if r == 3 and close(c, _replaced(u_hat, dynamic_routing(u_hat, 2)[0])):
        return REPLACED
    return ""


def _diagnose(v: object, c: object, u_hat: torch.Tensor, r: int) -> str:
    r"""Name the typical bug that explains ``(v, c)``, or describe what is off."""
    ref_v, ref_c = dynamic_routing(u_hat, r)
    if not isinstance(v, torch.Tensor) or v.shape != ref_v.shape:
        return f"v must have shape (B, J, D) = {tuple(ref_v.shape)}, got {shape_of(v)}"
    if not isinstance(c, torch.Tensor) or c.shape != ref_c.shape:
        return f"c must have shape (B, I, J) = {tuple(ref_c.shape)}, got {shape_of(c)}"
    mistake = _mistake(v, c, u_hat, r)
    if mistake:
        return mistake
    for other in (r - 1, r + 1):
        if other >= 1 and close(v, dynamic_routing(u_hat, other)[0]):
            return (f"your routing ran {other} iterations when asked for {r}: loop exactly "
                    f"routing_iterations times and update b only between iterations")
    if close(v, ref_v):
        return ("v is right but c is not: return the coupling coefficients used for the last v, "
                "not softmax(b) after a further update of b")
    return ("v and c differ from capsedu.dynamic_routing; go through Procedure 1 line by line: "
            "c = softmax(b, dim=J), s = sum_i c u_hat, v = squash(s), b += u_hat . v")


def _routing_hint(routing_fn: Callable, u_hat: torch.Tensor) -> str:
    for r in (3, 2, 1):
        result, hint = call_learner(routing_fn, u_hat.clone(), r)
        if hint:
            return hint
        if not (isinstance(result, tuple) and len(result) == 2):
            return f"return a tuple (v, c), got {type(result).__name__}"
        v, c = result
        ref_v, ref_c = dynamic_routing(u_hat, r)
        if not (close(v, ref_v) and close(c, ref_c)):
            return f"with {r} iteration(s): {_diagnose(v, c, u_hat, r)}"
    return ""


def check_routing(routing_fn: Callable[[torch.Tensor, int], tuple[torch.Tensor, torch.Tensor]],
                  *, quiet: bool = False) -> CheckResult:
    r"""Check ``routing_fn(u_hat, routing_iterations) -> (v, c)`` against Procedure 1.

    ``u_hat`` is (B, I, J, D); ``v`` must be (B, J, D) and ``c`` (B, I, J), the coupling
    coefficients of the last iteration, for 1, 2 and 3 iterations.
    """
    return verdict(_routing_hint(routing_fn, _random_u_hat()),
                   "routing matches capsedu.dynamic_routing for 1, 2 and 3 iterations", quiet=quiet)


def _history_hint(history: list, reference: list[torch.Tensor], u_hat: torch.Tensor) -> str:
    r"""Specific hint for a wrong list of coupling coefficients, one (B, I, J) per iteration."""
    if len(history) != len(reference):
        return (f"expected one c per iteration ({len(reference)} tensors), got {len(history)}: "
                f"append c right after the softmax, once per iteration")
    if any(not isinstance(c, torch.Tensor) or c.shape != reference[0].shape for c in history):
        return f"each entry must be a (B, I, J) = {tuple(reference[0].shape)} tensor of c"
    if close(history[0], reference[1]):
        return ("your history is shifted by one iteration: the first entry must be the uniform "
                "c = softmax(0) = 1/J, recorded before b is updated")
    if all(_sums_over_inputs(c) for c in history):
        return SOFTMAX_OVER_INPUTS
    if all(close(c, torch.full_like(c, 1 / c.shape[2])) for c in history):
        return NEVER_UPDATED
    if all(close(c, _replaced(u_hat, squash(_weighted_sum(c_before, u_hat))))
           for c_before, c in zip(history, history[1:])):
        return REPLACED
    if all(close(c, reference[-1]) for c in history):
        return ("every entry holds the last iteration's c: the list holds one tensor updated in "
                "place (c.copy_ or c[...] =); append the new tensor softmax(b) returns each time")
    return "the coupling coefficients differ from capsedu.dynamic_routing(u_hat, k) for some k"


def check_routing_history(history_fn: Callable[[torch.Tensor, int], list[torch.Tensor]],
                          *, quiet: bool = False) -> CheckResult:
    r"""Check ``history_fn(u_hat, routing_iterations) -> [c_1, ..., c_r]``, each (B, I, J).

    Entry ``k`` must equal the coupling coefficients of ``dynamic_routing(u_hat, k)``.
    """
    u_hat, r = _random_u_hat(), 4
    history, hint = call_learner(history_fn, u_hat.clone(), r)
    if not hint and not isinstance(history, (list, tuple)):
        hint = f"return a list of r tensors, got {type(history).__name__}"
    if not hint:
        reference = [dynamic_routing(u_hat, k)[1] for k in range(1, r + 1)]
        if not (len(history) == r and all(close(c, ref) for c, ref in zip(history, reference))):
            hint = _history_hint(list(history), reference, u_hat)
    return verdict(hint, f"all {r} coupling-coefficient snapshots match capsedu", quiet=quiet)


def _prediction_hint(u_hat: object, W: torch.Tensor, u: torch.Tensor) -> str:
    r"""Specific hint for wrong prediction vectors ``u_hat`` given ``W`` and ``u``."""
    ref = torch.einsum("ijdk,bik->bijd", W, u)  # (B, I, J, D_out)
    if not isinstance(u_hat, torch.Tensor):
        return f"return a tensor (B, I, J, D_out), got {type(u_hat).__name__}"
    if u_hat.shape == ref.shape + (1,):
        return "u_hat has a trailing dimension of size 1: squeeze(-1) after the matmul"
    if close(u_hat, ref.transpose(1, 2)):
        return "axes in the wrong order: you returned (B, J, I, D_out); expected (B, I, J, D_out)"
    square = W.shape[-1] == W.shape[-2]
    if square and close(u_hat, torch.einsum("ijkd,bik->bijd", W, u)):
        return ("you multiplied by W_ij transposed: W is (I, J, D_out, D_in), so "
                "u_hat_j|i = W[i, j] @ u_i with u_i as a column (D_in, 1)")
    if u_hat.shape != ref.shape:
        return f"u_hat must have shape (B, I, J, D_out) = {tuple(ref.shape)}, got {shape_of(u_hat)}"
    return "the values differ from W_ij u_i: check which axis of W multiplies u_i (the last, D_in)"


def check_predictions(predict_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
                      *, quiet: bool = False) -> CheckResult:
    r"""Check ``predict_fn(W, u) -> u_hat`` (Eq. 2's prediction vectors).

    W is (I, J, D_out, D_in), u is (B, I, D_in) and u_hat must be (B, I, J, D_out).

    Tried with D_out != D_in (like the paper's 8 -> 16) and with a square W, where using W
    transposed would go unnoticed by shapes alone.
    """
    generator = torch.Generator().manual_seed(_SEED)
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

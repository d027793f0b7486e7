r"""Checks for lesson 03 (dynamic routing, Procedure 1 and Eqs. 2-3).

Shape legend:
    B      batch size
    I      input capsules
    J      output capsules
    D_in   input capsule dimension
    D_out  output capsule dimension (D inside routing)

Each check runs the learner's function on small random inputs and compares it with
:func:`capsedu.dynamic_routing`, the one Procedure 1 of the package; when it differs, the hint names
the likely bug. Most bugs are read off the learner's own output (couplings that sum to 1 over the
inputs, a ``v`` that is the unsquashed sum of the learner's own couplings, couplings that are the
same for every image of the batch, ...); the others are recognised by comparing with
:func:`routing_with_mistake`, Procedure 1 with one named mistake of the kind the course's sources
and well-known ports make (the softmax over the inputs, logits shared and averaged over the batch,
logits replaced instead of accumulated, ...). The lesson also uses it to show what a mistake does.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from capsedu.course.checks._kit import CheckResult, call_learner, close, diagnose, shape_of, verdict
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
NONZERO_START = ("with 1 iteration c is not uniform: b must start at 0 for every image (the "
                 "uniform prior, c = 1/J), e.g. torch.zeros - not torch.empty or torch.randn")
SHARED_OVER_BATCH = ("every image of the batch gets the same couplings: b must hold one (I, J) "
                     "block per image, shape (B, I, J) - do not average or sum the agreement over "
                     "the batch; each image is routed on its own votes")
CARRIED_OVER = ("the first image is routed right but the next ones are not: b carries over from "
                "one image to the next; start b at 0 again for every image")
AGREEMENT_WITH_S = ("b is updated with the agreement between u_hat and s, the unsquashed sum: "
                    "agreement is u_hat_j|i . v_j with v = squash(s)")
WRONG_SIGN = ("b moves away from agreement: a vote that agrees with v_j must gain coupling, so "
              "add u_hat . v to b (you subtracted it)")

MISTAKES = ("softmax over inputs", "batch mean", "replace", "agreement with s", "subtract",
            "no update")


def routing_with_mistake(u_hat: torch.Tensor, routing_iterations: int,
                         mistake: str) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Procedure 1 with one typical mistake: ``(v, c)``, (B, J, D) and (B, I, J), like the right one.

    ``mistake`` is one of :data:`MISTAKES`:

    * ``"softmax over inputs"`` - c is a softmax over the I inputs (dim=1), not over the J outputs
      (the labml annotated implementation; pyCapsNet's ``F.softmax(b)`` without ``dim`` too);
    * ``"batch mean"`` - one b of shape (1, I, J) for the whole batch, moved by the batch mean
      of the agreements (pyCapsNet);
    * ``"replace"`` - each iteration's logits are the agreement with the latest v alone, not the
      running sum (the MultiMNIST blog post adds each round's agreement to the initial scores);
    * ``"agreement with s"`` - b grows by u_hat . s, the sum before squashing;
    * ``"subtract"`` - b shrinks by the agreement instead of growing;
    * ``"no update"`` - b stays 0, so c stays uniform.
    """
    if mistake not in MISTAKES:
        raise ValueError(f"mistake must be one of {MISTAKES}, got {mistake!r}")
    softmax_dim = 1 if mistake == "softmax over inputs" else 2
    b = torch.zeros(u_hat.shape[:3], dtype=u_hat.dtype)  # (B, I, J)
    if mistake == "batch mean":
        b = b[:1]  # (1, I, J): one set of logits for the whole batch
    for iteration in range(routing_iterations):
        c = torch.softmax(b, dim=softmax_dim).expand(u_hat.shape[:3])  # (B, I, J)
        s = (c.unsqueeze(-1) * u_hat).sum(dim=1)  # (B, J, D)
        v = squash(s, dim=-1)  # (B, J, D)
        if iteration == routing_iterations - 1:
            break
        agreement = (u_hat * (s if mistake == "agreement with s" else v).unsqueeze(1)).sum(-1)  # (B, I, J)
        if mistake == "batch mean":
            b = b + agreement.mean(dim=0, keepdim=True)  # (1, I, J)
        elif mistake == "replace":
            b = agreement
        elif mistake == "subtract":
            b = b - agreement
        elif mistake != "no update":
            b = b + agreement
    return v, c.contiguous()


def _sums_over_inputs(c: torch.Tensor) -> bool:
    r"""True when the couplings (B, I, J) sum to 1 over the inputs I and not over the outputs J."""
    return close(c.sum(dim=1), torch.ones_like(c[:, 0])) and not close(c.sum(dim=2), torch.ones_like(c[..., 0]))


def _weighted_sum(c: torch.Tensor, u_hat: torch.Tensor) -> torch.Tensor:
    r"""Eq. 2 with the learner's own couplings: s (B, J, D)."""
    return (c.detach().unsqueeze(-1) * u_hat).sum(dim=1)  # (B, J, D)


def _same_for_every_image(c: torch.Tensor) -> bool:
    r"""True when all images of the batch got the same couplings (B, I, J)."""
    return all(close(c[n], c[0]) for n in range(1, len(c)))


def _mistake(v: torch.Tensor, c: torch.Tensor, u_hat: torch.Tensor, r: int) -> str:
    r"""The typical bug that the learner's ``(v, c)`` after ``r`` iterations shows, or "".

    With the logits replaced instead of accumulated, iteration 2 is still right (b starts at 0),
    so the replaced logits show from r = 3 on, which is the first r the check tries.
    """
    if _sums_over_inputs(c):
        return SOFTMAX_OVER_INPUTS
    s = _weighted_sum(c, u_hat)  # (B, J, D)
    if close(v, s):
        return NOT_SQUASHED
    if close(v, squash(s, dim=1)):
        return SQUASH_AXIS
    ref_v, ref_c = dynamic_routing(u_hat, r)
    if r > 1 and close(c, torch.full_like(c, 1 / c.shape[2])):
        return NEVER_UPDATED
    if r > 1 and len(c) > 1 and _same_for_every_image(c) and not _same_for_every_image(ref_c):
        return SHARED_OVER_BATCH
    if len(c) > 1 and close(v[:1], ref_v[:1]) and close(c[:1], ref_c[:1]):
        return CARRIED_OVER
    for mistake, hint in (("replace", REPLACED), ("agreement with s", AGREEMENT_WITH_S),
                          ("subtract", WRONG_SIGN)):
        if r > 1 and close(v, routing_with_mistake(u_hat, r, mistake)[0]):
            return hint
    return ""


def _diagnose(routing_fn: Callable, v: object, c: object, u_hat: torch.Tensor, r: int) -> str:
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
    first, _ = call_learner(routing_fn, u_hat.clone(), 1)
    if isinstance(first, tuple) and len(first) == 2 and isinstance(first[1], torch.Tensor):
        c_first = first[1]
        uniform = torch.full_like(ref_c, 1 / ref_c.shape[2])
        if (c_first.shape == ref_c.shape and torch.isfinite(c_first).all() and not close(c_first, uniform)
                and close(c_first.sum(dim=2), torch.ones_like(ref_c[..., 0]))):
            return NONZERO_START
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
            return f"with {r} iteration(s): {_diagnose(routing_fn, v, c, u_hat, r)}"
    return ""


def check_routing(routing_fn: Callable[[torch.Tensor, int], tuple[torch.Tensor, torch.Tensor]],
                  *, quiet: bool = False) -> CheckResult:
    r"""Check ``routing_fn(u_hat, routing_iterations) -> (v, c)`` against Procedure 1.

    ``u_hat`` is (B, I, J, D); ``v`` must be (B, J, D) and ``c`` (B, I, J), the coupling
    coefficients of the last iteration, for 3, 2 and 1 iterations. The same check serves the
    loop and the vectorised version.
    """
    return verdict(_routing_hint(routing_fn, _random_u_hat()),
                   "routing matches capsedu.dynamic_routing for 1, 2 and 3 iterations", quiet=quiet)


def _first_iteration_over_inputs(u_hat: torch.Tensor) -> torch.Tensor:
    r"""v (B, J, D) of the first iteration when c is a softmax over the inputs (every c_ij = 1/I)."""
    return squash(u_hat.mean(dim=1), dim=-1)  # (B, J, D)


def _wrong_axis_hint(v: object, u_hat: torch.Tensor) -> str:
    r"""'' when ``v`` is the first iteration's output with the softmax over the inputs, else a hint."""
    mean_vote = u_hat.mean(dim=1)  # (B, J, D)
    return diagnose(v, _first_iteration_over_inputs(u_hat), [
        (lambda: squash(u_hat.sum(dim=1) / u_hat.shape[2]),
         "that is the right axis's first iteration, c = 1/J: with the softmax over the inputs, "
         "the I couplings of one output j share the unit - what is each when b = 0?"),
        (lambda: squash(u_hat.sum(dim=1)),
         "every c_ij = 1 is no softmax: a softmax of zeros over I gives each of the I inputs an "
         "equal share of 1"),
        (lambda: mean_vote, "v is an output capsule: squash s_j (Eq. 1) before returning it"),
        (lambda: squash(mean_vote, dim=1),
         "squash runs over the wrong axis: each s_j is a vector along the last dimension D"),
        (lambda: dynamic_routing(u_hat, 3)[0],
         "that is the right routing after 3 iterations: the task is the first iteration with the "
         "softmax over the inputs"),
    ], "not the first iteration's v with the softmax over the inputs: write c for b = 0, then "
       "Eq. 2 and Eq. 1 - no loop and no softmax call are needed", what="v (B, J, D)",
        rtol=1e-4, atol=1e-7)


def check_wrong_axis_output(predict_fn: Callable[[torch.Tensor], torch.Tensor],
                            *, quiet: bool = False) -> CheckResult:
    r"""Check ``predict_fn(u_hat) -> v``: the first iteration's output with the softmax over the inputs.

    ``u_hat`` is (B, I, J, D) and ``v`` must be (B, J, D). Tried with two numbers of input and
    output capsules, so that no number of the lesson's network can be built in.
    """
    hint = ""
    generator = torch.Generator().manual_seed(_SEED)
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
    u_hat, r = _random_u_hat(batch=3), 5
    changes, hint = call_learner(changes_fn, u_hat.clone(), r)
    if not hint and isinstance(changes, (list, tuple)):
        try:
            changes = torch.tensor([float(x) for x in changes])
        except (TypeError, ValueError, RuntimeError):
            hint = "return one number per update of b (a tensor or a list of numbers)"
    if not hint and isinstance(changes, torch.Tensor) and changes.shape == (r,):
        hint = (f"one value per update of b: r = {r} iterations update b {r - 1} times "
                "(between iterations), so return r - 1 values")
    if not hint:
        updates = _updates(u_hat, r)

        def per_update(measure: Callable[[dict[str, torch.Tensor]], torch.Tensor]) -> Callable[[], torch.Tensor]:
            return lambda: torch.stack([measure(update) for update in updates])  # (r - 1,)

        hint = diagnose(changes, logit_changes_reference(u_hat, r), [
            (per_update(lambda x: x["b"].abs().mean()),
             "these are the logits b themselves: record the change b_new - b of each update, not "
             "the running total"),
            (per_update(lambda x: x["delta"].mean()),
             "take |Δb| before averaging: changes of both signs cancel in a plain mean"),
            (per_update(lambda x: x["delta"].abs().max()),
             "the largest change is not the mean: average |Δb| over images, inputs i and outputs j"),
            (per_update(lambda x: (x["c_after"] - x["c_before"]).abs().mean()),
             "that is the change of the couplings c: measure the change of the logits b"),
        ], "not the mean |Δb| of each update: for each update, average |Δb| over all images, "
           "inputs i and outputs j", what="one value per update, a tensor", rtol=1e-4, atol=1e-7)
    return verdict(hint, f"the mean |Δb| of each of the {r - 1} updates matches", quiet=quiet)


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

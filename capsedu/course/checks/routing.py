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
The lesson's exercises around routing are checked in :mod:`.routing_exercises`.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from capsedu.course.checks._kit import (
    CheckResult,
    call_learner,
    close,
    mistake,
    other,
    reworded,
    shape_of,
    verdict,
)
from capsedu.nets.routing import dynamic_routing
from capsedu.nets.squash import squash

PROBE_SEED = 20171026  # the paper's arXiv date: fixed inputs, independent of the global RNG


def random_u_hat(batch: int = 2, caps_in: int = 12, caps_out: int = 4, dim: int = 5,
                  scale: float = 0.6) -> torch.Tensor:
    generator = torch.Generator().manual_seed(PROBE_SEED)
    return scale * torch.randn(batch, caps_in, caps_out, dim, generator=generator)  # (B, I, J, D)


SOFTMAX_OVER_INPUTS = mistake("softmax-over-inputs",
                              "c is a softmax over the input capsules I (dim=1); Eq. 3 takes it "
                              "over the output capsules J (dim=2), so each c_i sums to 1 over j")
NOT_SQUASHED = mistake("v-not-squashed", "v is not squashed: apply squash(s, dim=-1) (Eq. 1) to "
                       "s_j")
SQUASH_AXIS = mistake("squash-wrong-axis",
                      "squash runs over the wrong axis: each capsule vector s_j lies along the "
                      "last dimension D, so use squash(s, dim=-1)")
NEVER_UPDATED = mistake("logits-never-updated",
                        "the logits b never change, so c stays uniform: add the agreement "
                        "u_hat . v to b after each iteration")
REPLACED = mistake("logits-replaced",
                   "b is replaced by the agreement instead of accumulated: use b = b + (u_hat * "
                   "v).sum(-1)")
NONZERO_START = mistake("logits-nonzero-start",
                        "with 1 iteration c is not uniform: b must start at 0 for every image (the "
                        "uniform prior, c = 1/J), e.g. torch.zeros - not torch.empty or "
                        "torch.randn")
SHARED_OVER_BATCH = mistake("logits-shared-over-batch",
                            "every image of the batch gets the same couplings: b must hold one (I, "
                            "J) block per image, shape (B, I, J) - do not average or sum the "
                            "agreement over the batch; each image is routed on its own votes")
CARRIED_OVER = mistake("logits-carried-over",
                       "the first image is routed right but the next ones are not: b carries over "
                       "from one image to the next; start b at 0 again for every image")
AGREEMENT_WITH_S = mistake("agreement-with-s",
                           "b is updated with the agreement between u_hat and s, the unsquashed "
                           "sum: agreement is u_hat_j|i . v_j with v = squash(s)")
WRONG_SIGN = mistake("agreement-subtracted",
                     "b moves away from agreement: a vote that agrees with v_j must gain coupling, "
                     "so add u_hat . v to b (you subtracted it)")

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
    for name, hint in (("replace", REPLACED), ("agreement with s", AGREEMENT_WITH_S),
                       ("subtract", WRONG_SIGN)):
        if r > 1 and close(v, routing_with_mistake(u_hat, r, name)[0]):
            return hint
    return ""


def _diagnose(routing_fn: Callable, v: object, c: object, u_hat: torch.Tensor, r: int) -> str:
    r"""Name the typical bug that explains ``(v, c)``, or describe what is off."""
    ref_v, ref_c = dynamic_routing(u_hat, r)
    if not isinstance(v, torch.Tensor) or v.shape != ref_v.shape:
        return other("shape",
                     f"v must have shape (B, J, D) = {tuple(ref_v.shape)}, got {shape_of(v)}")
    if not isinstance(c, torch.Tensor) or c.shape != ref_c.shape:
        return other("shape",
                     f"c must have shape (B, I, J) = {tuple(ref_c.shape)}, got {shape_of(c)}")
    named = _mistake(v, c, u_hat, r)
    if named:
        return named
    for iterations in (r - 1, r + 1):
        if iterations >= 1 and close(v, dynamic_routing(u_hat, iterations)[0]):
            return mistake("wrong-iteration-count",
                           f"your routing ran {iterations} iterations when asked for {r}: loop "
                           "exactly routing_iterations times and update b only between iterations")
    if close(v, ref_v):
        return mistake("c-after-extra-update",
                       "v is right but c is not: return the coupling coefficients used for the "
                       "last v, not softmax(b) after a further update of b")
    first, _ = call_learner(routing_fn, u_hat.clone(), 1)
    if isinstance(first, tuple) and len(first) == 2 and isinstance(first[1], torch.Tensor):
        c_first = first[1]
        uniform = torch.full_like(ref_c, 1 / ref_c.shape[2])
        if (c_first.shape == ref_c.shape and torch.isfinite(c_first).all() and not close(c_first, uniform)
                and close(c_first.sum(dim=2), torch.ones_like(ref_c[..., 0]))):
            return NONZERO_START
    return other("values",
                 "v and c differ from capsedu.dynamic_routing; go through Procedure 1 line by "
                 "line: c = softmax(b, dim=J), s = sum_i c u_hat, v = squash(s), b += u_hat . v")


def _routing_hint(routing_fn: Callable, u_hat: torch.Tensor) -> str:
    for r in (3, 2, 1):
        result, hint = call_learner(routing_fn, u_hat.clone(), r)
        if hint:
            return hint
        if not (isinstance(result, tuple) and len(result) == 2):
            return other("type", f"return a tuple (v, c), got {type(result).__name__}")
        v, c = result
        ref_v, ref_c = dynamic_routing(u_hat, r)
        if not (close(v, ref_v) and close(c, ref_c)):
            hint = _diagnose(routing_fn, v, c, u_hat, r)
            return reworded(hint, f"with {r} iteration(s): {hint}")
    return ""


def check_routing(routing_fn: Callable[[torch.Tensor, int], tuple[torch.Tensor, torch.Tensor]],
                  *, quiet: bool = False) -> CheckResult:
    r"""Check ``routing_fn(u_hat, routing_iterations) -> (v, c)`` against Procedure 1.

    ``u_hat`` is (B, I, J, D); ``v`` must be (B, J, D) and ``c`` (B, I, J), the coupling
    coefficients of the last iteration, for 3, 2 and 1 iterations. The same check serves the
    loop and the vectorised version.
    """
    return verdict(_routing_hint(routing_fn, random_u_hat()),
                   "routing matches capsedu.dynamic_routing for 1, 2 and 3 iterations", quiet=quiet)

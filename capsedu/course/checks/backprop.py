r"""Checks for lesson 10: backward passes written by hand in NumPy, proved against autograd.

* :func:`check_squash_backward` - the learner's gradient through Eq. 1;
* :func:`check_routing_backward` - the learner's gradient through every iteration of Procedure 1
  (``detach_inner=False``);
* :func:`check_batch_test`, :func:`check_coupling_test` - the learner's black-box tests of a routing
  function, run on Procedure 1 and on routings with pyCapsNet's forward departures
  (:func:`departed_routing`: logits averaged over the batch, softmax over the input capsules);
* :func:`torch_gradients` - the NumPy classifier of :mod:`capsedu.nets.numpy_classifier` rebuilt
  from ``capsedu``'s torch pieces, its gradients by autograd (what the lesson compares with).

Each check runs a central-difference gradient check (:func:`capsedu.nets.numpy_caps.grad_check`)
and, when it fails, compares the learner's result with the gradient one forgotten or wrong term
would give, so that the hint names that term.

Shape legend:
    B      batch size
    I      input capsules
    J      output capsules
    D      output capsule dimension
    D_in   primary capsule dimension
    P      pixels per image
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from capsedu.course.checks._kit import (
    CheckResult,
    Hint,
    call_learner,
    mistake,
    other,
    reworded,
    verdict,
)
from capsedu.nets import numpy_caps as nc
from capsedu.nets.losses import margin_loss
from capsedu.nets.routing import dynamic_routing
from capsedu.nets.squash import squash

TOLERANCE = 1e-6


def _same(a: object, b: np.ndarray) -> bool:
    return isinstance(a, np.ndarray) and a.shape == b.shape and np.allclose(a, b, rtol=1e-5, atol=1e-8)


def _form_problem(result: object, expected: np.ndarray, what: str) -> str:
    if not isinstance(result, np.ndarray):
        return other("type", f"return a numpy.ndarray {what}, got {type(result).__name__}")
    if result.shape != expected.shape:
        return other("shape",
                     f"{what} must have the shape of its input {expected.shape}, got {result.shape}")
    if not np.isfinite(result).all():
        return mistake("divided-by-bare-root", f"{what} holds NaN or inf: divide by the cached root "
                       "sqrt(q + eps), never by sqrt(q)")
    return ""


# --- squash -------------------------------------------------------------------------------------

def _squash_variants(dv: np.ndarray, cache: dict) -> dict[Hint, np.ndarray]:
    r"""Gradients with one term wrong, each named by the hint it deserves."""
    s, q, root, scale, eps = cache["s"], cache["q"], cache["root"], cache["scale"], cache["eps"]
    dscale_dq = (q + 2 * eps - q * q) / (2 * root ** 3 * (1 + q) ** 2)  # (..., 1)
    dot = (dv * s).sum(axis=-1, keepdims=True)  # (..., 1)
    return {
        mistake("product-rule-missing", "you kept only scale·dv: the scale depends on s as well, so add "
                "2·(d scale/dq)·(dv·s)·s (the product rule)"): scale * dv,
        mistake("missing-factor-two",
                "the second term lacks the factor 2 of dq/ds = 2s"): scale * dv + dscale_dq * dot * s,
        mistake("dot-not-summed", "(dv·s) must be one number per capsule: sum dv * s over the last "
                "axis (keepdims=True) before multiplying by s"):
            scale * dv + 2 * dscale_dq * (dv * s) * s,
        mistake("second-term-sign-flipped",
                "the sign of the second term is flipped"): scale * dv - 2 * dscale_dq * dot * s,
    }


def check_squash_backward(fn: Callable, *, quiet: bool = False) -> CheckResult:
    r"""``fn(dv, cache)`` must return ds for the cache of :func:`capsedu.nets.numpy_caps.squash`."""
    rng = np.random.default_rng(10)
    s = rng.normal(size=(3, 4, 5)) * np.array([0.1, 0.5, 1.0, 3.0])[None, :, None]  # (B, J, D)
    dv = rng.normal(size=s.shape)
    _, cache = nc.squash(s)
    ds, hint = call_learner(fn, dv, cache, what="your squash_backward")
    expected = nc.squash_backward(dv, cache)
    hint = hint or _form_problem(ds, expected, "ds")
    if not hint and not _same(ds, expected):
        named = [name for name, wrong in _squash_variants(dv, cache).items() if _same(ds, wrong)]
        check = nc.grad_check(lambda: float((nc.squash(s)[0] * dv).sum()), {"s": s}, {"s": ds})
        hint = (named[0] if named else other(
            "values", "derive d scale/dq again (the quotient rule on scale(q) = q / "
            "((1 + q) sqrt(q + ε))) and compare it with a central difference of scale(q)"))
        hint = reworded(hint, hint + f" (gradient check: largest relative error "
                        f"{check.max_relative_error:.2g} at {check.worst})")
    if not hint:
        zero = np.zeros((1, 2, 5))
        ds0, hint = call_learner(fn, np.ones_like(zero), nc.squash(zero)[1], what="at s = 0 your squash_backward")
        hint = hint or _form_problem(ds0, zero, "ds at s = 0")
    return verdict(hint, "squash_backward matches central differences (relative error < 1e-6) "
                   "and stays finite at s = 0", quiet=quiet)


# --- routing --------------------------------------------------------------------------------------

def _routing_backward(dv: np.ndarray, cache: dict, wrong: str = "") -> np.ndarray:
    r"""Gradient through every iteration, or with the term named by ``wrong`` broken (for hints)."""
    u_hat, steps = cache["u_hat"], cache["steps"]
    du_hat, db = np.zeros_like(u_hat), np.zeros(u_hat.shape[:3])  # (B, I, J, D), (B, I, J)
    for t in reversed(range(len(steps))):
        if t < len(steps) - 1:
            dv = np.einsum("bij,bijd->bjd", db, u_hat) if wrong != "v_agreement" else 0 * dv
            du_hat += db[..., None] * steps[t]["v"][:, None] if wrong != "u_agreement" else 0
        ds = nc.squash_backward(dv, steps[t]["squash"])  # (B, J, D)
        du_hat += steps[t]["c"][..., None] * ds[:, None]
        if wrong == "last_only":
            break
        dc = np.einsum("bjd,bijd->bij", ds, u_hat)  # (B, I, J)
        step_db = {"no_softmax": dc, "softmax_axis": nc.softmax_backward(steps[t]["c"], dc, axis=1)}
        db = (0 if wrong == "db_not_carried" else db) + step_db.get(wrong, nc.softmax_backward(steps[t]["c"], dc, axis=2))
    return du_hat


ROUTING_HINTS = {
    "last_only": mistake(
        "last-iteration-only", "your gradient is the detached one (only s of the last iteration, "
        "its couplings held fixed); with detach_inner=False the votes also reached every coupling "
        "through the agreements: walk back through all iterations and add every contribution"),
    "u_agreement": mistake(
        "votes-agreement-term-missing", "the votes are used in every agreement û·v: add "
        "db[..., None] * v[:, None] of the earlier iteration to du_hat"),
    "v_agreement": mistake(
        "output-agreement-term-missing", "the output v of an earlier iteration fed the next "
        "agreement: its gradient is sum over i of db_ij û_j|i, and it must go back through that "
        "iteration's squash"),
    "no_softmax": mistake(
        "softmax-backward-missing",
        "from dc to db you need the softmax's backward, c * (dc − sum_j c dc)"),
    "softmax_axis": mistake(
        "softmax-backward-wrong-axis",
        "the softmax runs over the output capsules J (axis 2): its backward sums over axis 2"),
    "db_not_carried": mistake(
        "db-not-carried", "b of iteration t feeds c of iteration t and b of iteration t + 1: add "
        "the gradient reaching b from the later iteration to db instead of replacing it"),
}


def _routing_problem(fn: Callable, r: int) -> str:
    rng = np.random.default_rng(20 + r)
    u_hat, dv = rng.normal(0, 0.5, (2, 5, 3, 4)), rng.normal(size=(2, 3, 4))  # (B, I, J, D), (B, J, D)
    _, _, cache = nc.dynamic_routing(u_hat, r, detach_inner=False)
    du_hat, hint = call_learner(fn, dv, cache, what="your routing_backward")
    expected = nc.dynamic_routing_backward(dv, cache)
    hint = hint or _form_problem(du_hat, expected, "du_hat")
    if hint or _same(du_hat, expected):
        return hint
    named = [ROUTING_HINTS[w] for w in ROUTING_HINTS if _same(du_hat, _routing_backward(dv, cache, w))]
    check = nc.grad_check(lambda: float((nc.dynamic_routing(u_hat, r, False)[0] * dv).sum()),
                          {"u_hat": u_hat}, {"u_hat": du_hat}, max_entries=60)
    where = f"with {r} iteration{'s' * (r > 1)}"
    hint = named[0] if named else other("values", "the gradient is wrong")
    return reworded(hint, f"{where}: " + hint + f" (gradient check: largest relative error "
                    f"{check.max_relative_error:.2g} at {check.worst})")


def check_routing_backward(fn: Callable, *, quiet: bool = False) -> CheckResult:
    r"""``fn(dv, cache)`` must return du_hat through all iterations of Procedure 1 (1, 2 and 3)."""
    hint = next((h for h in (_routing_problem(fn, r) for r in (1, 2, 3)) if h), "")
    return verdict(hint, "routing_backward matches central differences through 1, 2 and 3 "
                   "iterations (relative error < 1e-6)", quiet=quiet)


# --- black-box tests of a routing function ---------------------------------------------------------

def departed_routing(u_hat, routing_iterations: int = 3, *, softmax_axis: int = 2,
                     batch_mean: bool = False, flat_softmax: bool = False):
    r"""Procedure 1 on ``u_hat`` (B, I, J, D), or with a departure in its forward pass: ``(v, c)``.

    ``softmax_axis=1`` normalises the couplings over the input capsules I (pyCapsNet, labml);
    ``batch_mean=True`` adds the agreement averaged over the batch to every image's logits
    (pyCapsNet); ``flat_softmax=True`` normalises each image's I x J couplings jointly (times I, so
    that they sum to I per image as Procedure 1's do). A torch tensor in gives tensors out (autograd
    differentiates the departed forward exactly); a NumPy array in gives NumPy arrays out.
    """
    as_numpy = isinstance(u_hat, np.ndarray)
    votes = torch.as_tensor(u_hat, dtype=torch.float64) if as_numpy else u_hat  # (B, I, J, D)
    b = torch.zeros(votes.shape[:3], dtype=votes.dtype)  # (B, I, J)
    for t in range(routing_iterations):
        if flat_softmax:
            flat = torch.softmax(b.flatten(1), dim=1) * votes.shape[1]  # (B, I*J)
            c = flat.view_as(b)  # (B, I, J)
        else:
            c = torch.softmax(b, dim=softmax_axis)  # (B, I, J)
        v = squash(torch.einsum("bij,bijd->bjd", c, votes))  # (B, J, D)
        if t < routing_iterations - 1:
            agreement = torch.einsum("bijd,bjd->bij", votes, v)  # (B, I, J)
            b = b + (agreement.mean(dim=0, keepdim=True) if batch_mean else agreement)
    return (v.numpy(), c.numpy()) if as_numpy else (v, c)


def procedure_1(u_hat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    r"""Procedure 1 as the paper writes it, 3 iterations: ``(v (B, J, D), c (B, I, J))``."""
    v, c, _ = nc.dynamic_routing(u_hat, 3)
    return v, c


ROUTINGS = {  # name -> (routing(u_hat) -> (v, c), batch-independent?, couplings sum to 1 over j?)
    "Procedure 1": (procedure_1, True, True),
    "logits averaged over the batch": (lambda u: departed_routing(u, batch_mean=True), False, True),
    "softmax over the input capsules": (lambda u: departed_routing(u, softmax_axis=1), True, False),
    "both of pyCapsNet's departures": (lambda u: departed_routing(u, softmax_axis=1, batch_mean=True),
                                       False, False),
    "couplings normalised over all I x J at once": (lambda u: departed_routing(u, flat_softmax=True),
                                                    True, False),
}


def _verdicts(test: Callable, what: str) -> tuple[dict[str, bool], str]:
    r"""The learner's ``test`` run on every routing in :data:`ROUTINGS`: answers and a form hint."""
    answers = {}
    for name, entry in ROUTINGS.items():
        answer, hint = call_learner(test, entry[0], what=f"your {what}")
        if hint:
            return answers, hint
        if not isinstance(answer, bool | np.bool_):
            return answers, other("type", "return True (the routing passes your test) or False, "
                                  f"got {type(answer).__name__}")
        answers[name] = bool(answer)
    return answers, ""


BATCH_HINTS = {
    "Procedure 1": mistake(
        "batch-test-rejects-procedure-1", "your test rejects Procedure 1 itself: one image's output "
        "must not move when ANOTHER image's votes change (compare with a tolerance such as "
        "np.allclose, not ==, and do not look at the image you changed)"),
    "logits averaged over the batch": mistake(
        "batch-test-misses-batch-mean", "your test passes the routing that averages the logits over "
        "the batch: use a batch of at least two images, change one image's votes clearly (not by "
        "1e-12) and look at another's v"),
    "softmax over the input capsules": mistake(
        "batch-test-rejects-softmax-axis", "your test rejects a routing whose images are "
        "independent (its only fault is the softmax axis): test only whether images influence "
        "each other"),
}
COUPLING_HINTS = {
    "Procedure 1": mistake(
        "coupling-test-rejects-procedure-1", "your test rejects Procedure 1 itself: over which axis "
        "of c (B, I, J) does its softmax normalise, and did you compare with a tolerance "
        "(np.allclose)?"),
    "softmax over the input capsules": mistake(
        "coupling-test-misses-softmax-over-i", "your test passes a softmax over the input capsules "
        "i: each lower capsule i shares its vote among the parents j"),
    "couplings normalised over all I x J at once": mistake(
        "coupling-test-checks-total-only", "your test passes couplings that sum to the right total "
        "but not row by row: check every (image, i) row of c, not the sum of all of them"),
    "logits averaged over the batch": mistake(
        "coupling-test-rejects-batch-mean", "your test rejects a routing whose couplings are a "
        "proper softmax over j (its fault is elsewhere): test only how c is normalised"),
}


def _routing_test_check(test: Callable, column: int, hints: dict[str, str], what: str,
                        success: str, quiet: bool) -> CheckResult:
    answers, hint = _verdicts(test, what)
    if not hint:
        wrong = [name for name, entry in ROUTINGS.items() if answers[name] != entry[column]]
        hint = next((hints[name] for name in hints if name in wrong), "")
        if wrong and not hint:
            hint = other("values", f"your test answers wrongly for the routing with {wrong[0]}")
    return verdict(hint, success, quiet=quiet)


def check_batch_test(test: Callable, *, quiet: bool = False) -> CheckResult:
    r"""``test(routing)`` must return True exactly for the routings whose images do not influence
    each other; ``routing(u_hat)`` takes votes (B, I, J, D) and returns ``(v, c)``."""
    return _routing_test_check(test, 1, BATCH_HINTS, "batch test",
                               "your batch test passes Procedure 1 and catches the batch-mean logits", quiet)


def check_coupling_test(test: Callable, *, quiet: bool = False) -> CheckResult:
    r"""``test(routing)`` must return True exactly for the routings whose couplings c (B, I, J) sum
    to 1 over the output capsules j for every image and input capsule."""
    return _routing_test_check(test, 2, COUPLING_HINTS, "coupling test",
                               "your coupling test passes Procedure 1 and catches both wrong "
                               "normalisations", quiet)


# --- the whole classifier, by autograd ------------------------------------------------------------

def torch_gradients(params: dict[str, np.ndarray], images: np.ndarray, targets: np.ndarray,
                    routing_iterations: int = 3, detach_inner: bool = True) -> tuple[float, dict[str, np.ndarray]]:
    r"""The loss and ``{"A", "a", "W"}`` gradients of the NumPy classifier, computed in float64 by
    autograd through ``capsedu``'s torch pieces (squash, Procedure 1, the margin loss)."""
    weights = {name: torch.tensor(p, dtype=torch.float64, requires_grad=True) for name, p in params.items()}
    x = torch.tensor(images.reshape(len(images), -1), dtype=torch.float64)  # (B, P)
    num_caps, _, _, caps_dim = params["W"].shape
    h = x @ weights["A"] + weights["a"]  # (B, I*D_in)
    u = squash(h.view(len(x), num_caps, caps_dim))  # (B, I, D_in)
    u_hat = torch.einsum("ijdk,bik->bijd", weights["W"], u)  # (B, I, J, D)
    v, _ = dynamic_routing(u_hat, routing_iterations, detach_inner=detach_inner)  # (B, J, D)
    lengths = torch.sqrt((v * v).sum(dim=-1) + 1e-8)  # (B, J)
    loss = margin_loss(lengths, torch.as_tensor(targets))
    loss.backward()
    return float(loss.detach()), {name: w.grad.numpy() for name, w in weights.items()}

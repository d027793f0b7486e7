r"""Checks for lesson 10: backward passes written by hand in NumPy, proved against autograd.

* :func:`check_squash_backward` - the learner's gradient through Eq. 1;
* :func:`check_routing_backward` - the learner's gradient through every iteration of Procedure 1
  (``detach_inner=False``);
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

from capsedu.course.checks._kit import CheckResult, call_learner, verdict
from capsedu.nets import numpy_caps as nc
from capsedu.nets.losses import margin_loss
from capsedu.nets.routing import dynamic_routing
from capsedu.nets.squash import squash

TOLERANCE = 1e-6


def _same(a: object, b: np.ndarray) -> bool:
    return isinstance(a, np.ndarray) and a.shape == b.shape and np.allclose(a, b, rtol=1e-5, atol=1e-8)


def _form_problem(result: object, expected: np.ndarray, what: str) -> str:
    if not isinstance(result, np.ndarray):
        return f"return a numpy.ndarray {what}, got {type(result).__name__}"
    if result.shape != expected.shape:
        return f"{what} must have the shape of its input {expected.shape}, got {result.shape}"
    if not np.isfinite(result).all():
        return f"{what} holds NaN or inf: divide by the cached root sqrt(q + eps), never by sqrt(q)"
    return ""


# --- squash -------------------------------------------------------------------------------------

def _squash_variants(dv: np.ndarray, cache: dict) -> dict[str, np.ndarray]:
    r"""Gradients with one term wrong, each named by the hint it deserves."""
    s, q, root, scale, eps = cache["s"], cache["q"], cache["root"], cache["scale"], cache["eps"]
    dscale_dq = (q + 2 * eps - q * q) / (2 * root ** 3 * (1 + q) ** 2)  # (..., 1)
    dot = (dv * s).sum(axis=-1, keepdims=True)  # (..., 1)
    return {
        "you kept only scale·dv: the scale depends on s as well, so add "
        "2·(d scale/dq)·(dv·s)·s (the product rule)": scale * dv,
        "the second term lacks the factor 2 of dq/ds = 2s": scale * dv + dscale_dq * dot * s,
        "(dv·s) must be one number per capsule: sum dv * s over the last axis (keepdims=True) "
        "before multiplying by s": scale * dv + 2 * dscale_dq * (dv * s) * s,
        "the sign of the second term is flipped": scale * dv - 2 * dscale_dq * dot * s,
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
        hint = (named[0] if named else "check d scale/dq = (q + 2ε − q²) / (2 r³ (1 + q)²), r = sqrt(q + ε)")
        hint += f" (gradient check: largest relative error {check.max_relative_error:.2g} at {check.worst})"
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
    "last_only": "your gradient is the detached one (only s of the last iteration, its couplings held "
                 "fixed); with detach_inner=False the votes also reached every coupling through the "
                 "agreements: walk back through all iterations and add every contribution",
    "u_agreement": "the votes are used in every agreement û·v: add db[..., None] * v[:, None] of the "
                   "earlier iteration to du_hat",
    "v_agreement": "the output v of an earlier iteration fed the next agreement: its gradient is "
                   "sum over i of db_ij û_j|i, and it must go back through that iteration's squash",
    "no_softmax": "from dc to db you need the softmax's backward, c * (dc − sum_j c dc)",
    "softmax_axis": "the softmax runs over the output capsules J (axis 2): its backward sums over axis 2",
    "db_not_carried": "b of iteration t feeds c of iteration t and b of iteration t + 1: add the "
                      "gradient reaching b from the later iteration to db instead of replacing it",
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
    return (f"{where}: " + (named[0] if named else "the gradient is wrong")
            + f" (gradient check: largest relative error {check.max_relative_error:.2g} at {check.worst})")


def check_routing_backward(fn: Callable, *, quiet: bool = False) -> CheckResult:
    r"""``fn(dv, cache)`` must return du_hat through all iterations of Procedure 1 (1, 2 and 3)."""
    hint = next((h for h in (_routing_problem(fn, r) for r in (1, 2, 3)) if h), "")
    return verdict(hint, "routing_backward matches central differences through 1, 2 and 3 "
                   "iterations (relative error < 1e-6)", quiet=quiet)


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

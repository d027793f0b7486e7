r"""A capsule layer in plain NumPy, forward *and* backward, every gradient derived by hand (lesson 10).

The same shapes and meaning as the torch versions (:func:`capsedu.squash`,
:func:`capsedu.dynamic_routing`, :func:`capsedu.margin_loss`); float64 and float32 both work.
Every forward function returns its output and a *cache* (what its backward needs); every
backward takes the gradient of the loss with respect to that output and the cache, and returns
the gradients with respect to the inputs. This module imports only NumPy and the standard library.

Shape legend:
    B      batch size
    I      input capsules
    J      output capsules
    D_in   input capsule dimension
    D_out  output capsule dimension (D in the routing functions, which have only this one)

Procedure 1 (Sabour et al. 2017) with ``r`` iterations, as in the torch version:

.. math::

    c^{(t)} = \operatorname{softmax}_j b^{(t)}, \quad
    \mathbf s^{(t)}_j = \sum_i c^{(t)}_{ij}\hat{\mathbf u}_{j|i}, \quad
    \mathbf v^{(t)}_j = \operatorname{squash}(\mathbf s^{(t)}_j), \quad
    b^{(t+1)}_{ij} = b^{(t)}_{ij} + \hat{\mathbf u}_{j|i}\cdot\mathbf v^{(t)}_j .

Its backward (:func:`dynamic_routing_backward`) walks the iterations from the last to the first
and *accumulates* the gradient of :math:`\hat{\mathbf u}` from every place it was used: each
:math:`\mathbf s^{(t)}`, and each agreement feeding :math:`b^{(t+1)}`. With ``detach_inner=True``
only the last :math:`\mathbf s^{(r)}` is differentiated, its couplings held fixed.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from capsedu._numbers import require_int

Cache = dict


def _require(name: str, x: object, ndim: int, shape: str) -> np.ndarray:
    if not isinstance(x, np.ndarray):
        raise TypeError(f"{name} must be a numpy.ndarray {shape}, got {type(x).__name__}")
    if x.ndim != ndim:
        raise ValueError(f"{name} must be a {ndim}-D array {shape}, got shape {x.shape}")
    if not np.issubdtype(x.dtype, np.floating):
        raise TypeError(f"{name} must hold floats (float32 or float64), got {x.dtype}")
    if x.size and not np.isfinite(x).all():
        raise ValueError(f"{name} contains {int((~np.isfinite(x)).sum())} NaN or infinite value(s)")
    return x


def _require_grad(name: str, grad: object, expected: tuple[int, ...]) -> np.ndarray:
    if not isinstance(grad, np.ndarray) or grad.shape != expected:
        got = grad.shape if isinstance(grad, np.ndarray) else type(grad).__name__
        raise ValueError(f"{name} must have the shape of the forward output {expected}, got {got}")
    return grad


# --- squash (Eq. 1) ----------------------------------------------------------------------------


def squash(s: np.ndarray, eps: float = 1e-8) -> tuple[np.ndarray, Cache]:
    r"""Eq. 1 along the last axis: :math:`\mathbf v = \frac{q}{(1+q)\sqrt{q+\varepsilon}}\mathbf s`, q = |s|²."""
    if not isinstance(s, np.ndarray) or s.ndim < 1:
        raise ValueError(f"s must be a numpy.ndarray with the capsule vector on its last axis, got {s!r}")
    _require("s", s, s.ndim, "(..., D)")
    q = (s * s).sum(axis=-1, keepdims=True)  # (..., 1) squared norm
    root = np.sqrt(q + eps)  # (..., 1)
    scale = q / ((1 + q) * root)  # (..., 1)
    return scale * s, {"s": s, "q": q, "root": root, "scale": scale, "eps": eps}


def squash_backward(dv: np.ndarray, cache: Cache) -> np.ndarray:
    r"""Gradient with respect to ``s``: the scale's derivative is ``(q + 2eps - q²) / (2 r³ (1+q)²)``.

    :math:`\partial\mathbf s = \text{scale}\,\partial\mathbf v
    + 2\,\frac{d\,\text{scale}}{dq}\,(\partial\mathbf v\cdot\mathbf s)\,\mathbf s`.
    """
    s, q, root, scale, eps = cache["s"], cache["q"], cache["root"], cache["scale"], cache["eps"]
    dv = _require_grad("dv", dv, s.shape)
    dscale_dq = (q + 2 * eps - q * q) / (2 * root ** 3 * (1 + q) ** 2)  # (..., 1)
    return scale * dv + 2 * dscale_dq * (dv * s).sum(axis=-1, keepdims=True) * s


# --- prediction vectors (Eq. 2) -----------------------------------------------------------------


def prediction_vectors(W: np.ndarray, u: np.ndarray) -> tuple[np.ndarray, Cache]:
    r""":math:`\hat{\mathbf u}_{j|i} = \mathbf W_{ij}\mathbf u_i`: W (I, J, D_out, D_in), u (B, I, D_in)
    -> (B, I, J, D_out)."""
    _require("W", W, 4, "(I, J, D_out, D_in)")
    _require("u", u, 3, "(B, I, D_in)")
    if u.shape[0] == 0:
        raise ValueError("u is an empty batch; expected at least one item")
    if u.shape[1:] != (W.shape[0], W.shape[3]):
        raise ValueError(f"u must have shape (B, {W.shape[0]}, {W.shape[3]}) to match W {W.shape}, got {u.shape}")
    # optimize=True lets einsum hand the sum over k to BLAS (about 6x faster at the paper's size);
    # in routing, where no BLAS-shaped product exists, the plain einsum is the faster one
    return np.einsum("ijdk,bik->bijd", W, u, optimize=True), {"W": W, "u": u}


def prediction_vectors_backward(du_hat: np.ndarray, cache: Cache) -> tuple[np.ndarray, np.ndarray]:
    r"""``(dW, du)``: :math:`\partial W_{ij} = \sum_b \partial\hat{\mathbf u}_{j|i}\mathbf u_i^\top`,
    :math:`\partial\mathbf u_i = \sum_j W_{ij}^\top\partial\hat{\mathbf u}_{j|i}`."""
    W, u = cache["W"], cache["u"]
    du_hat = _require_grad("du_hat", du_hat, (u.shape[0], W.shape[0], W.shape[1], W.shape[2]))
    dW = np.einsum("bijd,bik->ijdk", du_hat, u, optimize=True)  # (I, J, D_out, D_in)
    return dW, np.einsum("bijd,ijdk->bik", du_hat, W, optimize=True)  # (B, I, D_in)


# --- dynamic routing (Procedure 1) --------------------------------------------------------------


def softmax(b: np.ndarray, axis: int = -1) -> np.ndarray:
    shifted = np.exp(b - b.max(axis=axis, keepdims=True))
    return shifted / shifted.sum(axis=axis, keepdims=True)


def softmax_backward(c: np.ndarray, dc: np.ndarray, axis: int = -1) -> np.ndarray:
    r"""Through :math:`c = \operatorname{softmax}(b)`: :math:`\partial b = c\,(\partial c - \sum c\,\partial c)`."""
    return c * (dc - (c * dc).sum(axis=axis, keepdims=True))


def dynamic_routing(u_hat: np.ndarray, routing_iterations: int = 3,
                    detach_inner: bool = True) -> tuple[np.ndarray, np.ndarray, Cache]:
    r"""Procedure 1 on ``u_hat`` (B, I, J, D): ``(v, c, cache)``, v (B, J, D), c (B, I, J) of the last iteration."""
    _require("u_hat", u_hat, 4, "(B, I, J, D)")
    if u_hat.shape[0] == 0:
        raise ValueError("u_hat is an empty batch; expected at least one item")
    require_int("routing_iterations", routing_iterations, minimum=1)
    b = np.zeros(u_hat.shape[:3], dtype=u_hat.dtype)  # (B, I, J) log priors
    steps = []
    for t in range(routing_iterations):
        c = softmax(b, axis=2)  # (B, I, J) over the output capsules
        s = np.einsum("bij,bijd->bjd", c, u_hat)  # (B, J, D)  Eq. 2
        v, squashed = squash(s)  # (B, J, D)  Eq. 1
        steps.append({"c": c, "v": v, "squash": squashed})
        if t < routing_iterations - 1:
            b = b + np.einsum("bijd,bjd->bij", u_hat, v)  # (B, I, J) agreement
    return v, c, {"u_hat": u_hat, "steps": steps, "detach_inner": detach_inner}


def dynamic_routing_backward(dv: np.ndarray, cache: Cache) -> np.ndarray:
    r"""Gradient with respect to ``u_hat`` from the gradient ``dv`` (B, J, D) of the last output.

    Walking back from iteration r: the squash, then :math:`\mathbf s^{(t)} = \sum_i c_{ij}\hat{\mathbf u}`
    gives :math:`c^{(t)}\partial\mathbf s^{(t)}` to :math:`\partial\hat{\mathbf u}` and
    :math:`\partial c^{(t)} = \hat{\mathbf u}\cdot\partial\mathbf s^{(t)}`; the softmax turns it into
    :math:`\partial b^{(t)}`, which also reached :math:`b^{(t+1)}`. Since
    :math:`b^{(t)} = b^{(t-1)} + \hat{\mathbf u}\cdot\mathbf v^{(t-1)}`, :math:`\partial b^{(t)}` flows on
    to :math:`b^{(t-1)}`, to :math:`\hat{\mathbf u}` (times :math:`\mathbf v^{(t-1)}`) and to
    :math:`\mathbf v^{(t-1)}` (times :math:`\hat{\mathbf u}`). ``detach_inner`` stops after the first step.
    """
    u_hat, steps = cache["u_hat"], cache["steps"]
    dv = _require_grad("dv", dv, steps[-1]["v"].shape)
    du_hat = np.zeros_like(u_hat)
    db = np.zeros(u_hat.shape[:3], dtype=u_hat.dtype)  # gradient reaching b^(t+1)
    for t in reversed(range(len(steps))):
        step = steps[t]
        if t < len(steps) - 1:  # v^(t) only fed the agreement of b^(t+1)
            dv = np.einsum("bij,bijd->bjd", db, u_hat)
            du_hat += db[..., None] * step["v"][:, None]
        ds = squash_backward(dv, step["squash"])  # (B, J, D)
        du_hat += step["c"][..., None] * ds[:, None]  # through s = sum_i c u_hat
        if cache["detach_inner"]:
            break  # the couplings of the last iteration came from detached votes: held fixed
        dc = np.einsum("bjd,bijd->bij", ds, u_hat)  # (B, I, J)
        db = db + softmax_backward(step["c"], dc, axis=2)  # b^(t) reaches c^(t) and b^(t+1)
    return du_hat


# --- lengths and the margin loss (Eq. 4) --------------------------------------------------------


def capsule_lengths(v: np.ndarray, eps: float = 1e-8) -> tuple[np.ndarray, Cache]:
    r"""Capsule lengths :math:`\sqrt{|\mathbf v|^2 + \varepsilon}`, (B, J, D) -> (B, J)."""
    _require("v", v, 3, "(B, J, D)")
    norm = np.sqrt((v * v).sum(axis=-1) + eps)
    return norm, {"v": v, "norm": norm}


def capsule_lengths_backward(dnorm: np.ndarray, cache: Cache) -> np.ndarray:
    r""":math:`\partial\mathbf v = \partial\lVert\mathbf v\rVert\;\mathbf v / \lVert\mathbf v\rVert`."""
    dnorm = _require_grad("dnorm", dnorm, cache["norm"].shape)
    return (dnorm / cache["norm"])[..., None] * cache["v"]


def margin_loss(lengths: np.ndarray, targets: np.ndarray, m_pos: float = 0.9, m_neg: float = 0.1,
                lam: float = 0.5) -> tuple[float, Cache]:
    r"""Eq. 4 summed over the classes, mean over the batch; targets are class indices (B,) or multi-hot (B, J)."""
    _require("lengths", lengths, 2, "(B, J)")
    batch, classes = lengths.shape
    if batch == 0:
        raise ValueError("lengths is an empty batch; expected at least one item")
    targets = np.asarray(targets)
    if targets.ndim == 1:
        if targets.shape != (batch,) or not np.issubdtype(targets.dtype, np.integer):
            raise ValueError(f"targets must be {batch} integer class indices or a ({batch}, {classes}) multi-hot array")
        if targets.min() < 0 or targets.max() >= classes:
            raise ValueError(f"targets must be in [0, {classes - 1}], got {targets.min()} to {targets.max()}")
        present = np.eye(classes, dtype=lengths.dtype)[targets]  # (B, J)
    elif targets.shape == (batch, classes) and np.isin(targets, (0, 1)).all():
        present = targets.astype(lengths.dtype)
    else:
        raise ValueError(f"targets must be (B,) class indices or (B, J) = ({batch}, {classes}) 0/1, got {targets.shape}")
    short = np.maximum(0.0, m_pos - lengths)  # (B, J)
    long = np.maximum(0.0, lengths - m_neg)  # (B, J)
    per_class = present * short ** 2 + lam * (1 - present) * long ** 2  # (B, J)
    return float(per_class.sum(axis=1).mean()), {"present": present, "short": short, "long": long,
                                                 "lam": lam}


def margin_loss_backward(cache: Cache) -> np.ndarray:
    r""":math:`\partial L/\partial\lVert\mathbf v_k\rVert = \frac1B\left(-2T_k\max(0, m^+ - \ell_k)
    + 2\lambda(1-T_k)\max(0, \ell_k - m^-)\right)`, (B, J)."""
    present, short, long = cache["present"], cache["short"], cache["long"]
    return (-2 * present * short + 2 * cache["lam"] * (1 - present) * long) / present.shape[0]


# --- checking gradients -------------------------------------------------------------------------


class GradCheck(NamedTuple):
    r"""The largest relative error between analytic and numerical gradients, and where it is."""

    max_relative_error: float
    worst: str  # the worst entry, as "name[i, j, ...]"
    checked: int  # entries compared


def grad_check(loss: Callable[[], float], params: dict[str, np.ndarray],
               grads: dict[str, np.ndarray], eps: float = 1e-6, max_entries: int = 200,
               seed: int = 0) -> GradCheck:
    r"""Compare ``grads`` with central differences of ``loss()`` in every array of ``params``.

    ``loss`` recomputes the loss from the arrays in ``params``, which are changed in place one
    entry at a time (and restored). At most ``max_entries`` random entries per array are checked.
    The relative error of an entry is :math:`|a - n| / \max(|a| + |n|, 10^{-8})`.
    """
    rng = np.random.default_rng(seed)
    worst, where, checked = 0.0, "", 0
    for name, array in params.items():
        grad = _require_grad(f"grads[{name!r}]", grads.get(name), array.shape)
        flat = array.reshape(-1)
        picks = range(flat.size) if flat.size <= max_entries else rng.choice(flat.size, max_entries, replace=False)
        for index in picks:
            keep = flat[index]
            flat[index] = keep + eps
            up = loss()
            flat[index] = keep - eps
            down = loss()
            flat[index] = keep
            numeric, analytic = (up - down) / (2 * eps), float(grad.reshape(-1)[index])
            error = abs(analytic - numeric) / max(abs(analytic) + abs(numeric), 1e-8)
            checked += 1
            if error > worst or not where:
                worst, where = error, f"{name}[{', '.join(str(int(k)) for k in np.unravel_index(index, array.shape))}]"
    if math.isnan(worst):
        raise FloatingPointError(f"the gradient check produced NaN at {where}")
    return GradCheck(worst, where, checked)

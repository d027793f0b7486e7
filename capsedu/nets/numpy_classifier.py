r"""A small capsule classifier trained entirely in NumPy (lesson 10): every gradient by hand.

The network, from pixels to the margin loss, built from :mod:`capsedu.nets.numpy_caps`::

    x (B, P) --linear A, a--> h (B, I*D_in) --reshape, squash (Eq. 1)--> u (B, I, D_in)
      --W (Eq. 2)--> u_hat (B, I, J, D) --Procedure 1--> v (B, J, D) --lengths--> (B, J) --Eq. 4--> loss

A linear layer stands in for lesson 02's two convolutions (its I = 32 "primary capsules" see the
whole image, not a 9x9 window), so that the forward and backward passes stay short enough to
read in full. Training uses Adam written out (Kingma & Ba 2015, Algorithm 1). Like
:mod:`capsedu.nets.numpy_caps`, this module imports only NumPy and the standard library (and
:class:`capsedu._history.History`, the history type :func:`capsedu.fit` returns too, which imports
nothing).

Shape legend:
    B      batch size
    N      images in a dataset
    P      pixels per image (784)
    I      input (primary) capsules (32)
    D_in   primary capsule dimension (8)
    J      output (class) capsules (10)
    D_out  class capsule dimension (16; D where a step has no other)
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from capsedu._history import History
from capsedu._numbers import require_int
from capsedu.nets import numpy_caps as nc

Params = dict[str, np.ndarray]


def init_params(num_caps: int = 32, caps_dim: int = 8, num_classes: int = 10, digit_dim: int = 16,
                pixels: int = 784, seed: int = 0, dtype: type = np.float32) -> Params:
    r"""``{"A": (P, I*D_in), "a": (I*D_in,), "W": (I, J, D_out, D_in)}``, drawn from a seeded
    generator.

    ``A`` has standard deviation :math:`1/\sqrt P` (unit-variance pre-activations for inputs of
    unit size); ``W`` has :math:`0.5/\sqrt{D_{in}}`, so that votes of primary capsules of length
    about 1 start around 0.5 long and the class capsules' lengths start well inside (0, 1).
    """
    for name, value in (("num_caps", num_caps), ("caps_dim", caps_dim), ("num_classes", num_classes),
                        ("digit_dim", digit_dim), ("pixels", pixels)):
        require_int(name, value, minimum=1)
    rng = np.random.default_rng(seed)
    return {"A": rng.normal(0, pixels ** -0.5, (pixels, num_caps * caps_dim)).astype(dtype),
            "a": np.zeros(num_caps * caps_dim, dtype=dtype),
            "W": rng.normal(0, 0.5 * caps_dim ** -0.5, (num_caps, num_classes, digit_dim, caps_dim)).astype(dtype)}


def _flat_images(params: Params, images: np.ndarray) -> np.ndarray:
    if not isinstance(images, np.ndarray) or images.ndim < 2:
        raise ValueError(f"images must be a numpy.ndarray (B, P) or (B, 1, 28, 28), got {getattr(images, 'shape', images)}")
    x = images.reshape(len(images), -1).astype(params["A"].dtype, copy=False)  # (B, P)
    if x.shape[1] != params["A"].shape[0]:
        raise ValueError(f"images must have {params['A'].shape[0]} pixels each, got {x.shape[1]}")
    return x


def forward(params: Params, images: np.ndarray, targets: np.ndarray, routing_iterations: int = 3,
            detach_inner: bool = True) -> tuple[float, np.ndarray, dict]:
    r"""``(loss, lengths, cache)``: the margin loss (Eq. 4), class-capsule lengths (B, J), and what
    :func:`backward` needs. ``targets`` are class indices (B,) or multi-hot (B, J)."""
    x = _flat_images(params, images)  # (B, P)
    num_caps, _, _, caps_dim = params["W"].shape
    h = x @ params["A"] + params["a"]  # (B, I*D_in)
    u, squashed = nc.squash(h.reshape(len(x), num_caps, caps_dim))  # (B, I, D_in)  Eq. 1
    u_hat, predicted = nc.prediction_vectors(params["W"], u)  # (B, I, J, D)  Eq. 2
    v, _, routed = nc.dynamic_routing(u_hat, routing_iterations, detach_inner)  # (B, J, D)
    lengths, measured = nc.capsule_lengths(v)  # (B, J)
    loss, margin = nc.margin_loss(lengths, targets)
    return loss, lengths, {"x": x, "squash": squashed, "prediction_vectors": predicted, "routing": routed,
                           "lengths": measured, "margin": margin}


def backward(cache: dict) -> Params:
    r"""Gradients of the loss with respect to ``A``, ``a`` and ``W``: the forward pass read backwards."""
    dlengths = nc.margin_loss_backward(cache["margin"])  # (B, J)
    dv = nc.capsule_lengths_backward(dlengths, cache["lengths"])  # (B, J, D)
    du_hat = nc.dynamic_routing_backward(dv, cache["routing"])  # (B, I, J, D)
    dW, du = nc.prediction_vectors_backward(du_hat, cache["prediction_vectors"])  # (I, J, D_out, D_in)
    dh = nc.squash_backward(du, cache["squash"]).reshape(len(du), -1)  # (B, I*D_in)
    return {"A": cache["x"].T @ dh, "a": dh.sum(axis=0), "W": dW}


def predict_lengths(params: Params, images: np.ndarray, routing_iterations: int = 3,
                    batch_size: int = 1000) -> np.ndarray:
    r"""Class-capsule lengths (N, J) of ``images``, in batches (no loss, no cache kept)."""
    x = _flat_images(params, images)  # (N, P)
    num_caps, _, _, caps_dim = params["W"].shape
    out = []
    for start in range(0, len(x), batch_size):
        h = x[start:start + batch_size] @ params["A"] + params["a"]  # (B, I*D_in)
        u, _ = nc.squash(h.reshape(len(h), num_caps, caps_dim))  # (B, I, D_in)
        v, _, _ = nc.dynamic_routing(nc.prediction_vectors(params["W"], u)[0], routing_iterations)  # (B, J, D)
        out.append(nc.capsule_lengths(v)[0])  # (B, J)
    return np.concatenate(out)  # (N, J)


def accuracy(params: Params, images: np.ndarray, labels: np.ndarray, routing_iterations: int = 3) -> float:
    r"""Share of ``images`` whose longest class capsule is their label."""
    return float((predict_lengths(params, images, routing_iterations).argmax(axis=1) == labels).mean())


class Adam:
    r"""Adam (Kingma & Ba 2015, Algorithm 1), updating the arrays of ``params`` in place.

    :math:`m \leftarrow \beta_1 m + (1-\beta_1) g`, :math:`v \leftarrow \beta_2 v + (1-\beta_2) g^2`,
    :math:`\theta \leftarrow \theta - \alpha\,\hat m / (\sqrt{\hat v} + \epsilon)` with the
    bias corrections :math:`\hat m = m / (1-\beta_1^t)`, :math:`\hat v = v / (1-\beta_2^t)`.
    """

    def __init__(self, params: Params, lr: float = 2e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8) -> None:
        if not lr > 0:
            raise ValueError(f"lr must be a positive float, got {lr!r}")
        self.params, self.lr, self.betas, self.eps, self.t = params, lr, betas, eps, 0
        self.m = {name: np.zeros_like(p) for name, p in params.items()}
        self.v = {name: np.zeros_like(p) for name, p in params.items()}

    def step(self, grads: Params) -> None:
        self.t += 1
        beta1, beta2 = self.betas
        for name, p in self.params.items():
            g = grads[name]
            self.m[name] = beta1 * self.m[name] + (1 - beta1) * g
            self.v[name] = beta2 * self.v[name] + (1 - beta2) * g * g
            m_hat = self.m[name] / (1 - beta1 ** self.t)
            v_hat = self.v[name] / (1 - beta2 ** self.t)
            p -= (self.lr * m_hat / (np.sqrt(v_hat) + self.eps)).astype(p.dtype, copy=False)


def fit(params: Params, images: np.ndarray, labels: np.ndarray, epochs: int, batch_size: int = 64,
        lr: float = 2e-3, seed: int = 0, routing_iterations: int = 3, detach_inner: bool = True,
        on_epoch: Callable[[dict], None] | None = None) -> History:
    r"""Train ``params`` in place with Adam on shuffled mini-batches; return the per-epoch
    :class:`~capsedu._history.History`, as :func:`capsedu.fit` does.

    Each epoch's record holds ``epoch``, the mean training loss ``train_loss``, the share of
    training images classified right as they were trained on (``train_accuracy``) and the
    epoch's ``train_seconds`` (time spent in forward, backward and Adam only; their running sum
    is the training time so far). ``on_epoch(record)`` is called after each epoch, outside the
    timed part: evaluate or compare gradients there, and add to the record (each new key
    becomes a column of the history).
    """
    x = _flat_images(params, images)  # (N, P)
    if len(x) == 0 or labels.shape != (len(x),):
        raise ValueError(f"labels must be ({len(x)},) class indices for a non-empty images array, got {labels.shape}")
    require_int("epochs", epochs, minimum=1)
    rng, optimizer = np.random.default_rng(seed), Adam(params, lr=lr)
    history = History()
    for epoch in range(1, epochs + 1):
        start, losses, right = time.perf_counter(), [], 0
        order = rng.permutation(len(x))
        for first in range(0, len(x), batch_size):
            batch = order[first:first + batch_size]
            loss, lengths, cache = forward(params, x[batch], labels[batch], routing_iterations,
                                           detach_inner)  # lengths (B, J)
            optimizer.step(backward(cache))
            losses.append(loss)
            right += int((lengths.argmax(axis=1) == labels[batch]).sum())
        record = {"epoch": epoch, "train_loss": float(np.mean(losses)),
                  "train_accuracy": right / len(x), "train_seconds": time.perf_counter() - start}
        if on_epoch is not None:
            on_epoch(record)
        history.append(record)
    return history

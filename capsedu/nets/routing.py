r"""Dynamic routing by agreement (Sabour et al. 2017, Procedure 1, Eqs. 2-3) and ``DigitCaps``.

Everything lesson 03 builds lives here: the readable :func:`dynamic_routing` that the lessons
teach and the fully connected capsule layer :class:`DigitCaps` (prediction vectors, Eq. 2, then
routing). ``DigitCaps`` runs Procedure 1 in one of two implementations, an explicit choice
(``routing``, :data:`ROUTINGS`): ``"readable"``, :func:`dynamic_routing` on
:meth:`DigitCaps.prediction_vectors`, or ``"factored"`` (the default, faster),
:func:`capsedu.nets.routing_fast.factored_routing`, which never builds the (B, I, J, D)
prediction vectors and is tested equal to the readable one in values and gradients. Whether
gradients flow through every iteration (``detach_inner``) is a separate choice that both follow.

Shape legend:
    B      batch size
    I      input (lower-level) capsules, e.g. 1152 primary capsules
    J      output (higher-level) capsules, e.g. 10 digit capsules
    D      output capsule dimension (D_out), e.g. 16
    D_in   input capsule dimension, e.g. 8

Symbols follow the paper: ``u_hat`` are the prediction vectors :math:`\hat{\mathbf u}_{j|i}`,
``b`` the routing logits, ``c`` the coupling coefficients (softmax of ``b`` over the *output*
capsules J), ``s`` the weighted sums and ``v`` the squashed output capsules.
"""

from __future__ import annotations

import torch
from torch import nn

from capsedu._validate import require_int, require_nonempty_batch, require_tensor
from capsedu.nets.routing_fast import factored_routing
from capsedu.nets.squash import squash

ROUTINGS = ("readable", "factored")  # DigitCaps' two implementations of Procedure 1


def require_routing(name: str, routing: object) -> str:
    r"""Check that ``routing`` names one of :data:`ROUTINGS`."""
    if not isinstance(routing, str) or routing not in ROUTINGS:
        raise ValueError(f"{name} must be one of {ROUTINGS}, got {routing!r}")
    return routing


def dynamic_routing(u_hat: torch.Tensor, routing_iterations: int = 3,
                    detach_inner: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Route prediction vectors ``u_hat`` to output capsules (Procedure 1).

    For ``r`` iterations:

    .. math::

        c_{ij} = \operatorname{softmax}_j(b_{ij}), \quad
        \mathbf s_j = \sum_i c_{ij}\hat{\mathbf u}_{j|i} \; (\text{Eq. 2}), \quad
        \mathbf v_j = \operatorname{squash}(\mathbf s_j) \; (\text{Eq. 1}), \quad
        b_{ij} \leftarrow b_{ij} + \hat{\mathbf u}_{j|i}\cdot\mathbf v_j .

    Args:
        u_hat: prediction vectors, (B, I, J, D).
        routing_iterations: routing iterations r >= 1 (the paper uses 3).
        detach_inner: if True, every iteration but the last sees ``u_hat.detach()``, so gradients
            reach ``u_hat`` only through the last iteration (as most open-source CapsNets do);
            if False, gradients flow through all iterations (as the paper's code does).

    Returns:
        ``(v, c)``: output capsules (B, J, D) and the coupling coefficients (B, I, J) used in
        the last iteration (they sum to 1 over J).

    Shapes and types are checked; values are not scanned for NaN or inf (a network checks its
    images where they enter).
    """
    require_tensor("u_hat", u_hat, ndim=4, shape="(B, I, J, D)", floating=True)
    require_nonempty_batch("u_hat", u_hat)
    require_int("routing_iterations", routing_iterations, minimum=1)
    u_hat_inner = u_hat.detach() if detach_inner else u_hat
    b = torch.zeros(u_hat.shape[:3], dtype=u_hat.dtype, device=u_hat.device)  # (B, I, J)
    for iteration in range(routing_iterations):
        last = iteration == routing_iterations - 1
        u = u_hat if last else u_hat_inner  # (B, I, J, D)
        c = torch.softmax(b, dim=2)  # (B, I, J): each input capsule shares itself among the J outputs
        s = torch.einsum("bij,bijd->bjd", c, u)  # (B, J, D)  Eq. 2: sum over i of c_ij u_hat_j|i
        v = squash(s, dim=-1)  # (B, J, D)  Eq. 1
        if not last:
            b = b + torch.einsum("bijd,bjd->bij", u, v)  # (B, I, J)  agreement u_hat_j|i . v_j
    return v, c


def prediction_vectors(W: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    r"""The votes :math:`\hat{\mathbf u}_{j|i} = \mathbf W_{ij}\mathbf u_i`: W (I, J, D, D_in), u (B, I, D_in).

    Returns (B, I, J, D). Shapes are checked by the callers (:class:`DigitCaps`)."""
    return torch.einsum("ijdk,bik->bijd", W, u)  # (B, I, J, D)


class DigitCaps(nn.Module):
    r"""Fully connected capsule layer: prediction vectors (Eq. 2) then dynamic routing.

    ``W`` is a plain parameter of shape (I, J, D_out, D_in), :math:`\hat{\mathbf u}_{j|i} =
    \mathbf W_{ij}\mathbf u_i`, initialised with a normal distribution of standard deviation 0.01.
    ``routing`` picks the implementation of Procedure 1 (:data:`ROUTINGS`): ``"readable"`` runs
    :func:`dynamic_routing` on :meth:`prediction_vectors`'s output, ``"factored"`` (the default)
    runs :func:`~capsedu.nets.routing_fast.factored_routing`, tested equal in values and
    gradients; ``detach_inner`` (see :func:`dynamic_routing`) applies to either.
    """

    def __init__(self, in_caps: int, in_dim: int, out_caps: int, out_dim: int,
                 routing_iterations: int = 3, detach_inner: bool = True,
                 routing: str = "factored") -> None:
        super().__init__()
        for name, value in [("in_caps", in_caps), ("in_dim", in_dim), ("out_caps", out_caps),
                            ("out_dim", out_dim), ("routing_iterations", routing_iterations)]:
            require_int(name, value, minimum=1)
        self.in_caps, self.in_dim, self.out_caps, self.out_dim = in_caps, in_dim, out_caps, out_dim
        self.routing_iterations, self.detach_inner = routing_iterations, detach_inner
        self.routing = require_routing("routing", routing)
        self.W = nn.Parameter(0.01 * torch.randn(in_caps, out_caps, out_dim, in_dim))  # (I, J, D_out, D_in)

    def _require_input(self, u: torch.Tensor) -> None:
        shape = f"(B, {self.in_caps}, {self.in_dim})"
        require_tensor("u", u, ndim=3, shape=shape, floating=True)
        require_nonempty_batch("u", u)
        if tuple(u.shape[1:]) != (self.in_caps, self.in_dim):
            raise ValueError(f"u must have shape {shape}, got {tuple(u.shape)}")

    def prediction_vectors(self, u: torch.Tensor) -> torch.Tensor:
        r"""Prediction vectors :math:`\hat{\mathbf u}_{j|i} = \mathbf W_{ij}\mathbf u_i`, (B, I, J, D_out)."""
        self._require_input(u)
        return prediction_vectors(self.W, u)  # (B, I, J, D_out)

    def forward(self, u: torch.Tensor,
                routing_iterations: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        r"""Return output capsules ``v`` (B, J, D_out) and coupling coefficients ``c`` (B, I, J)."""
        iterations = self.routing_iterations if routing_iterations is None else routing_iterations
        require_int("routing_iterations", iterations, minimum=1)
        self._require_input(u)
        with torch.autocast(u.device.type, enabled=False):  # routing in float32, also under autocast
            u = u.to(self.W.dtype)  # (B, I, D_in): a bfloat16 input from an autocast convolution
            if self.routing == "readable":
                return dynamic_routing(self.prediction_vectors(u), iterations, self.detach_inner)
            return factored_routing(self.W, u, iterations, self.detach_inner)  # (B, J, D_out), (B, I, J)

    def extra_repr(self) -> str:
        return (f"in_caps={self.in_caps}, in_dim={self.in_dim}, out_caps={self.out_caps}, "
                f"out_dim={self.out_dim}, routing_iterations={self.routing_iterations}, "
                f"detach_inner={self.detach_inner}, routing={self.routing!r}")

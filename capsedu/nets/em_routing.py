r"""EM routing between matrix capsules (Hinton, Sabour & Frosst 2018, Procedure 1) - lesson 11.

A matrix capsule is a 4x4 pose matrix (H = 16 numbers) and an activation in [0, 1]. Every input
capsule i votes for every output capsule j (``votes`` V, (B, I, J, H)); routing fits, per image,
a mixture of J axis-aligned Gaussians to the votes, each input weighted by its activation.
Iteration by iteration, with the assignments R starting at 1/J:

**M-step** (every iteration), with :math:`R'_{ij} = R_{ij}\,a_i` (*not* renormalised over j: an
inactive input must weigh less in every cluster):

.. math::

    \mu_{jh} = \frac{\sum_i R'_{ij} V_{ijh}}{\sum_i R'_{ij}},\qquad
    \sigma^2_{jh} = \frac{\sum_i R'_{ij} (V_{ijh} - \mu_{jh})^2}{\sum_i R'_{ij}} + \varepsilon,

.. math::

    \text{cost}_{jh} = \big(\beta_{u,j} + \tfrac12\log\sigma^2_{jh}\big)\sum_i R'_{ij},\qquad
    a_j = \operatorname{sigmoid}\Big(\lambda\big(\beta_{a,j} - \sum_h \text{cost}_{jh}\big)\Big).

**E-step** (every iteration but the last), in log space so that no probability underflows:

.. math::

    \log p_{ij} = \sum_h -\frac{(V_{ijh} - \mu_{jh})^2}{2\sigma^2_{jh}} - \tfrac12\log\sigma^2_{jh}
                  - \tfrac12\log 2\pi,\qquad
    R_{ij} = \operatorname{softmax}_j\big(\log a_j + \log p_{ij}\big),

with :math:`\log a_j` computed as ``logsigmoid`` of the same argument (finite even where the
sigmoid rounds to 0). The one addition to the paper's procedure: the denominators
:math:`\sum_i R'_{ij}` get ``+ eps`` so that an output capsule nobody votes for gives 0, not 0/0.

Shape legend:
    B      batch size
    I      input capsules, J output capsules
    H      pose entries per capsule (16 for 4x4 matrices)
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F

from capsedu._validate import require_finite, require_int, require_nonempty_batch, require_tensor

DEFAULT_INVERSE_TEMPERATURE = 0.01
LOG_2PI = math.log(2 * math.pi)


def _temperatures(inverse_temperature: float | Sequence[float], num_iterations: int) -> list[float]:
    if isinstance(inverse_temperature, (int, float)) and not isinstance(inverse_temperature, bool):
        return [float(inverse_temperature)] * num_iterations
    values = list(inverse_temperature)
    if len(values) != num_iterations:
        raise ValueError(f"inverse_temperature must be a float or {num_iterations} floats (one per "
                         f"iteration), got {len(values)}")
    return [float(v) for v in values]


def _check(votes: torch.Tensor, activations: torch.Tensor, beta_u: torch.Tensor,
           beta_a: torch.Tensor) -> None:
    require_tensor("votes", votes, ndim=4, shape="(B, I, J, H)", floating=True)
    require_nonempty_batch("votes", votes)
    require_finite("votes", votes)
    batch, num_in, num_out, _ = votes.shape
    require_tensor("activations", activations, ndim=2, shape="(B, I)", floating=True)
    if tuple(activations.shape) != (batch, num_in):
        raise ValueError(f"activations must have shape (B, I) = {(batch, num_in)}, got {tuple(activations.shape)}")
    require_finite("activations", activations)
    if activations.min() < 0 or activations.max() > 1:
        raise ValueError(f"activations must lie in [0, 1], got values from {float(activations.min()):.4g} "
                         f"to {float(activations.max()):.4g}")
    for name, beta in (("beta_u", beta_u), ("beta_a", beta_a)):
        require_tensor(name, beta, ndim=1, shape=f"(J,) = ({num_out},)", floating=True)
        if beta.shape[0] != num_out:
            raise ValueError(f"{name} must have one value per output capsule, shape ({num_out},), got {tuple(beta.shape)}")


def m_step(R: torch.Tensor, activations: torch.Tensor, votes: torch.Tensor, beta_u: torch.Tensor,
           beta_a: torch.Tensor, inverse_temperature: float,
           eps: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    r"""``(mu, sigma_sq, logit)``: the Gaussians' means and variances (B, J, H) and the output
    activations' logits :math:`\lambda(\beta_{a,j} - \sum_h \text{cost}_{jh})` (B, J); a_j = sigmoid(logit)."""
    R_weighted = R * activations.unsqueeze(-1)  # (B, I, J)  R'_ij = R_ij a_i, not renormalised
    mass = R_weighted.sum(dim=1).unsqueeze(-1)  # (B, J, 1)  sum_i R'_ij
    mu = torch.einsum("bij,bijh->bjh", R_weighted, votes) / (mass + eps)  # (B, J, H)
    deviation_sq = (votes - mu.unsqueeze(1)) ** 2  # (B, I, J, H)
    sigma_sq = torch.einsum("bij,bijh->bjh", R_weighted, deviation_sq) / (mass + eps) + eps  # (B, J, H)
    cost = (beta_u.view(1, -1, 1) + 0.5 * torch.log(sigma_sq)) * mass  # (B, J, H)
    logit = inverse_temperature * (beta_a.view(1, -1) - cost.sum(dim=-1))  # (B, J)
    return mu, sigma_sq, logit


def e_step(votes: torch.Tensor, mu: torch.Tensor, sigma_sq: torch.Tensor,
           logit: torch.Tensor) -> torch.Tensor:
    r"""New assignments R (B, I, J): softmax over j of log a_j + log p_ij."""
    log_p = -0.5 * ((votes - mu.unsqueeze(1)) ** 2 / sigma_sq.unsqueeze(1)
                    + torch.log(sigma_sq).unsqueeze(1) + LOG_2PI).sum(dim=-1)  # (B, I, J)
    return torch.softmax(F.logsigmoid(logit).unsqueeze(1) + log_p, dim=2)  # (B, I, J)


def em_routing(votes: torch.Tensor, activations: torch.Tensor, beta_u: torch.Tensor,
               beta_a: torch.Tensor, num_iterations: int = 3,
               inverse_temperature: float | Sequence[float] = DEFAULT_INVERSE_TEMPERATURE,
               eps: float = 1e-8) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    r"""EM routing (Procedure 1 of the 2018 paper): ``(mu, a_out, R)``.

    Args:
        votes: (B, I, J, H) votes :math:`V_{ij}` of every input capsule for every output capsule.
        activations: (B, I) input activations in [0, 1].
        beta_u, beta_a: (J,) the learned cost offsets, one per output capsule type.
        num_iterations: EM iterations (each an M-step, all but the last followed by an E-step).
        inverse_temperature: λ, one float or one per iteration. The default, 0.01, is provisional:
            it keeps :math:`\lambda\sum_h\text{cost}` of order 1 for a class layer with tens of
            inputs of unit-scale votes; the lesson-11 network is where it gets tuned.
        eps: added to the variances and to the denominators :math:`\sum_i R'_{ij}`.
    Returns:
        mu (B, J, H) the output poses, a_out (B, J) the output activations, and R (B, I, J) the
        assignments used in the last M-step.
    """
    _check(votes, activations, beta_u, beta_a)
    require_int("num_iterations", num_iterations, minimum=1)
    return em_routing_unchecked(votes, activations, beta_u, beta_a,
                                _temperatures(inverse_temperature, num_iterations), eps)


def em_routing_unchecked(votes: torch.Tensor, activations: torch.Tensor, beta_u: torch.Tensor,
                         beta_a: torch.Tensor, lambdas: Sequence[float],
                         eps: float = 1e-8) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    r""":func:`em_routing` without its input checks, one λ per iteration: for the network's layers,
    whose input was checked where it entered (a NaN scan per layer would be a full pass)."""
    num_iterations = len(lambdas)
    batch, num_in, num_out, _ = votes.shape
    R = votes.new_full((batch, num_in, num_out), 1.0 / num_out)  # (B, I, J)
    for t, lam in enumerate(lambdas):
        mu, sigma_sq, logit = m_step(R, activations, votes, beta_u, beta_a, lam, eps)
        if t < num_iterations - 1:
            R = e_step(votes, mu, sigma_sq, logit)  # (B, I, J)
    return mu, torch.sigmoid(logit), R

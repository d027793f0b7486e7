r"""EM routing between matrix capsules (Hinton, Sabour & Frosst 2018, Procedure 1) - lesson 11.

A matrix capsule is a 4x4 pose matrix (M = 16 numbers) and an activation in [0, 1]. Every input
capsule i votes for every output capsule j (``votes``, :math:`V_{ij}`, (B, I, J, M)); routing
fits, per image, a mixture of J axis-aligned Gaussians to the votes, each input weighted by its
activation. Iteration by iteration, with the assignments R starting at 1/J:

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

The pose entries are indexed by h in the formulas, as in the paper. ``R`` is the paper's
assignment matrix (a tensor, not a shape letter), ``inverse_temperature`` its λ.

Shape legend:
    B      batch size
    I      input capsules
    J      output capsules
    M      pose entries per capsule (16 for 4x4 matrices)
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F

from capsedu._validate import require_int, require_nonempty_batch, require_tensor

DEFAULT_INVERSE_TEMPERATURE = 1e-3
LOG_2PI = math.log(2 * math.pi)


def inverse_temperatures(inverse_temperature: float | Sequence[float],
                         routing_iterations: int) -> list[float]:
    r"""The inverse temperature λ of each of ``routing_iterations`` iterations: one float repeated,
    or one value per iteration."""
    if isinstance(inverse_temperature, (int, float)) and not isinstance(inverse_temperature, bool):
        return [float(inverse_temperature)] * routing_iterations
    values = list(inverse_temperature)
    if len(values) != routing_iterations:
        raise ValueError(f"inverse_temperature must be a float or {routing_iterations} floats (one per "
                         f"iteration), got {len(values)}")
    return [float(v) for v in values]


def _require_inputs(votes: torch.Tensor, activations: torch.Tensor, beta_u: torch.Tensor,
                    beta_a: torch.Tensor) -> None:
    r"""Types and shapes only: routing runs inside every layer, so values are not scanned (NaN,
    inf, activations outside [0, 1]); a network checks its images where they enter."""
    require_tensor("votes", votes, ndim=4, shape="(B, I, J, M)", floating=True)
    require_nonempty_batch("votes", votes)
    batch, num_in, num_out, _ = votes.shape
    require_tensor("activations", activations, ndim=2, shape="(B, I)", floating=True)
    if tuple(activations.shape) != (batch, num_in):
        raise ValueError(f"activations must have shape (B, I) = {(batch, num_in)}, got {tuple(activations.shape)}")
    for name, beta in (("beta_u", beta_u), ("beta_a", beta_a)):
        require_tensor(name, beta, ndim=1, shape=f"(J,) = ({num_out},)", floating=True)
        if beta.shape[0] != num_out:
            raise ValueError(f"{name} must have one value per output capsule, shape ({num_out},), got {tuple(beta.shape)}")


def m_step(R: torch.Tensor, activations: torch.Tensor, votes: torch.Tensor, beta_u: torch.Tensor,
           beta_a: torch.Tensor, inverse_temperature: float, eps: float,
           normalise_cost: bool = False) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    r"""The M-step in the routing's inner layout: R (B, J, I), votes (B, J, I, M).

    Returns ``(mu, sigma_sq, logit, deviation_sq)``: the Gaussians' means and variances (B, J, M),
    the output activations' logits :math:`\lambda(\beta_{a,j} - \sum_h \text{cost}_{jh})` (B, J)
    (a_j = sigmoid(logit)), and :math:`(V_{ijh} - \mu_{jh})^2` (B, J, I, M), which the E-step reuses.
    With ``normalise_cost`` the summed costs are standardised over the output capsules of each
    routing first (minus their mean over j, divided by their standard deviation plus eps).
    """
    R_weighted = R * activations.unsqueeze(1)  # (B, J, I)  R'_ij = R_ij a_i, not renormalised
    mass = R_weighted.sum(dim=2, keepdim=True)  # (B, J, 1)  sum_i R'_ij
    weights = R_weighted.unsqueeze(2)  # (B, J, 1, I): each sum over i is a batched matrix product
    mu = (weights @ votes).squeeze(2) / (mass + eps)  # (B, J, M)
    deviation_sq = (votes - mu.unsqueeze(2)).square()  # (B, J, I, M)
    sigma_sq = (weights @ deviation_sq).squeeze(2) / (mass + eps) + eps  # (B, J, M)
    cost = (beta_u.view(1, -1, 1) + 0.5 * torch.log(sigma_sq)) * mass  # (B, J, M)
    total = cost.sum(dim=-1)  # (B, J)
    if normalise_cost:  # an option, not the paper's procedure: only relative costs count
        total = (total - total.mean(dim=1, keepdim=True)) / (total.std(dim=1, unbiased=False, keepdim=True) + eps)
    logit = inverse_temperature * (beta_a.view(1, -1) - total)  # (B, J)
    return mu, sigma_sq, logit, deviation_sq


def e_step(deviation_sq: torch.Tensor, sigma_sq: torch.Tensor, logit: torch.Tensor) -> torch.Tensor:
    r"""New assignments R (B, J, I): softmax over j of log a_j + log p_ij, from the M-step's
    squared deviations (B, J, I, M) and variances (B, J, M)."""
    scaled = (deviation_sq @ sigma_sq.reciprocal().unsqueeze(-1)).squeeze(-1)  # (B, J, I) sum_h (votes-mu)^2/sigma^2
    log_norm = torch.log(sigma_sq).sum(dim=-1, keepdim=True) + sigma_sq.shape[-1] * LOG_2PI  # (B, J, 1)
    log_p = -0.5 * (scaled + log_norm)  # (B, J, I)
    return torch.softmax(F.logsigmoid(logit).unsqueeze(-1) + log_p, dim=1)  # (B, J, I): over j


def em_routing(votes: torch.Tensor, activations: torch.Tensor, beta_u: torch.Tensor,
               beta_a: torch.Tensor, routing_iterations: int = 3,
               inverse_temperature: float | Sequence[float] = DEFAULT_INVERSE_TEMPERATURE,
               eps: float = 1e-8,
               normalise_cost: bool = False, *,
               logits: bool = False) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    r"""EM routing (Procedure 1 of the 2018 paper): ``(mu, a_out, R)``.

    Args:
        votes: (B, I, J, M) votes :math:`V_{ij}` of every input capsule for every output capsule.
        activations: (B, I) input activations in [0, 1].
        beta_u, beta_a: (J,) the learned cost offsets, one per output capsule type.
        routing_iterations: EM iterations (each an M-step, all but the last followed by an E-step).
        inverse_temperature: λ, one float or one per iteration. The default, 0.001, keeps
            :math:`\lambda(\beta_a - \sum_h\text{cost})` of order 1 in the 64/8/16/16 network of
            :mod:`capsedu.nets.matrix_capsnet`, whose deeper layers have :math:`\log\sigma^2`
            down to -10 and input masses near 14 at initialisation. Measured on a one-epoch proxy
            (4,000 offline images, Adam 3e-3, batch 32): 85.6 % on 1,000 official test images
            with 0.001; with 0.01 the class activations start saturated at 1 and it stayed at
            chance (11.8 %), as it did with 0.01 in the class layer alone. At 0.001 a learned
            :math:`\beta_a` must reach the thousands, which Adam (steps of about the learning
            rate) does not do: learned as it is, the wrong classes' activations stayed near 0.5
            (96.85 %); the shipped network learns :math:`\lambda\beta_a` instead
            (``MatrixCapsConfig.beta_a_logit_units``; its accuracies:
            ``capsedu.shipped_summary("em")``; benchmarks/README.md, "EM routing").
        eps: added to the variances and to the denominators :math:`\sum_i R'_{ij}`.
        normalise_cost: off by default (then this is Procedure 1). On, the summed costs
            :math:`\sum_h\text{cost}_{jh}` are standardised over j before the sigmoid, as several
            published implementations do: the activations then depend on how much cheaper one
            parent describes its votes than the others, not on the costs' scale.
        logits: return the output activations' logits
            :math:`\lambda(\beta_{a,j} - \sum_h \text{cost}_{jh})` in place of the activations
            (their sigmoid): an attacker's gradient that does not vanish where the sigmoid saturates.
    Returns:
        mu (B, J, M) the output poses, a_out (B, J) the output activations (or their logits), and
        R (B, I, J) the assignments used in the last M-step.

    Inside, the output capsule j leads - votes (B, J, I, M), R (B, J, I) - so that every sum over
    the inputs i is a batched matrix product over (B, J), and the squared deviations of an
    iteration's M-step are reused by its E-step. A layer that builds its votes in that order and
    passes ``votes.transpose(1, 2)`` costs no copy. Types and shapes are checked, values are not
    (no scan for NaN or inf, nor of the activations' range).
    """
    _require_inputs(votes, activations, beta_u, beta_a)
    require_int("routing_iterations", routing_iterations, minimum=1)
    schedule = inverse_temperatures(inverse_temperature, routing_iterations)
    votes = votes.transpose(1, 2).contiguous()  # (B, J, I, M): no copy for votes built j-major
    batch, num_out, num_in, _ = votes.shape
    R = votes.new_full((batch, num_out, num_in), 1.0 / num_out)  # (B, J, I)
    for t, inverse_temperature_t in enumerate(schedule):
        mu, sigma_sq, logit, deviation_sq = m_step(R, activations, votes, beta_u, beta_a,
                                                   inverse_temperature_t, eps, normalise_cost)
        if t < routing_iterations - 1:
            R = e_step(deviation_sq, sigma_sq, logit)  # (B, J, I)
    a_out = logit if logits else torch.sigmoid(logit)  # (B, J)
    return mu, a_out, R.transpose(1, 2)  # (B, J, M), (B, J), R (B, I, J)

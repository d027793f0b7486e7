r"""Checks for lesson 11 (EM routing): the M-step, the E-step in log space, and the port's bug
(the λ schedule's exercise: :mod:`capsedu.course.checks.em_schedule`).

Each check runs the learner's function on a small seeded problem, compares it with
:mod:`capsedu.nets.em_routing`, and when it differs recomputes the step with the likely mistakes
(activations renormalised away, a missing mass, a variance without its ε, a softmax over the wrong
axis, probabilities outside log space ...) to name the one that was made.

:func:`em_m_step` and :func:`em_e_step` are ``capsedu``'s two steps in the lesson's layout: what
the lesson goes on with when the learner's steps do not pass their checks yet.

Shape legend (the lesson's layout):
    B      batch size (images)
    I      input capsules
    J      output capsules
    M      pose entries
"""

from __future__ import annotations

import math
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
from capsedu.nets import em_routing as em

EPS = 1e-8


def em_m_step(R: torch.Tensor, activations: torch.Tensor, votes: torch.Tensor, beta_u: torch.Tensor,
              beta_a: torch.Tensor, inverse_temperature: float,
              eps: float = EPS) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    r"""``capsedu``'s M-step in the lesson's layout: R (B, I, J), activations (B, I), votes
    (B, I, J, M), betas (J,) -> ``(mu (B, J, M), sigma_sq (B, J, M), a_out (B, J))``."""
    mu, sigma_sq, logit, _ = em.m_step(R.transpose(1, 2), activations, votes.transpose(1, 2),
                                       beta_u, beta_a, float(inverse_temperature), eps)  # j leads inside
    return mu, sigma_sq, torch.sigmoid(logit)  # (B, J, M), (B, J, M), (B, J)


def em_e_step(votes: torch.Tensor, mu: torch.Tensor, sigma_sq: torch.Tensor,
              a_out: torch.Tensor) -> torch.Tensor:
    r"""``capsedu``'s E-step in the lesson's layout: votes (B, I, J, M), mu and sigma_sq (B, J, M),
    a_out (B, J) -> R (B, I, J), each child's row a distribution over the parents."""
    deviation_sq = (votes.transpose(1, 2) - mu.unsqueeze(2)).square()  # (B, J, I, M)
    logit = torch.log(a_out) - torch.log1p(-a_out)  # (B, J): logsigmoid(logit) = log a_out
    return em.e_step(deviation_sq, sigma_sq, logit).transpose(1, 2)  # (B, I, J)


def _problem(seed: int = 0, far: bool = False, collapsed: bool = False) -> dict[str, torch.Tensor]:
    r"""Votes (2, 6, 3, 4), activations (2, 6) with one near 0, R (2, 6, 3), betas (3,).

    ``far``: child 0 votes far from every Gaussian; ``collapsed``: every child casts the same vote
    for parent 2, whose variance is then 0 without the ε."""
    generator = torch.Generator().manual_seed(seed)
    votes = torch.randn(2, 6, 3, 4, generator=generator, dtype=torch.float64)
    if far:
        votes[:, 0] += 60.0  # child 0 votes far from every Gaussian: its p_ij underflow to 0
    if collapsed:
        votes[:, :, 2] = votes[:, :1, 2].clone()  # (B, I, M): one pose for parent 2 from every child
    activations = torch.rand(2, 6, generator=generator, dtype=torch.float64)
    activations[:, 1] = 0.01
    R = torch.softmax(torch.randn(2, 6, 3, generator=generator, dtype=torch.float64), dim=-1)
    beta_u, beta_a = (torch.randn(3, generator=generator, dtype=torch.float64) for _ in range(2))
    return {"R": R, "activations": activations, "votes": votes, "beta_u": beta_u, "beta_a": beta_a}


def m_step_variant(R, activations, votes, beta_u, beta_a, inverse_temperature, *,
                   renormalise=False, weight_by_activation=True, mass_in_cost=True,
                   weighted_variance=True, variance_eps=True, count_denominator=False,
                   half_log=True, with_temperature=True):
    r"""The M-step (mu, sigma_sq, a_out) in the lesson's layout, or one of its usual mistakes."""
    R_weighted = R * activations[..., None] if weight_by_activation else R  # (B, I, J)
    if renormalise:  # the port's line: sum over j back to 1, which cancels a_i
        R_weighted = R_weighted / (R_weighted.sum(dim=2, keepdim=True) + EPS)
    mass = R_weighted.sum(dim=1)  # (B, J)
    mu = torch.einsum("bij,bijh->bjh", R_weighted, votes) / (mass[..., None] + EPS)  # (B, J, M)
    deviation_sq = (votes - mu[:, None]) ** 2  # (B, I, J, M)
    denominator = votes.shape[1] if count_denominator else mass[..., None] + EPS  # I or sum_i R'_ij
    if weighted_variance:
        sigma_sq = torch.einsum("bij,bijh->bjh", R_weighted, deviation_sq) / denominator  # (B, J, M)
    else:
        sigma_sq = deviation_sq.mean(dim=1)  # (B, J, M)
    if variance_eps:
        sigma_sq = sigma_sq + EPS
    cost = beta_u[:, None] + (0.5 if half_log else 1.0) * torch.log(sigma_sq)  # (B, J, M)
    if mass_in_cost:
        cost = cost * mass[..., None]
    scale = inverse_temperature if with_temperature else 1.0
    return mu, sigma_sq, torch.sigmoid(scale * (beta_a - cost.sum(dim=-1)))


_M_MISTAKES = [
    ({"renormalise": True}, mistake(
        "renormalised-over-j", "you renormalised R' = R * a over the output capsules j: since R "
        "already sums to 1 over j, dividing by that sum gives R back and the input activations "
        "cancel (the port's bug) - use R' = R * a as it is")),
    ({"weight_by_activation": False}, mistake(
        "activations-missing", "the input activations are missing: weight the assignments, "
        "R'_ij = R_ij * a_i, before every sum over i")),
    ({"mass_in_cost": False}, mistake(
        "mass-missing-in-cost", "the cost must be multiplied by the mass sum_i R'_ij: "
        "cost_jh = (beta_u_j + 0.5 * log sigma^2_jh) * sum_i R'_ij")),
    ({"weighted_variance": False}, mistake(
        "unweighted-variance", "sigma^2 must be the R'-weighted mean of (V - mu)^2, divided by "
        "sum_i R'_ij, not a plain mean over the children")),
    ({"count_denominator": True}, mistake(
        "variance-divided-by-count", "you divided the weighted sum of (V - mu)^2 by the number of "
        "children I: divide it by the parent's mass sum_i R'_ij, as for mu")),
    ({"variance_eps": False}, mistake(
        "variance-without-eps", "the variance needs + eps: a parent whose votes all agree exactly "
        "gets sigma^2 = 0 and log sigma^2 = -inf (add eps to sigma^2 itself, not only to the "
        "denominators)")),
    ({"half_log": False}, mistake(
        "cost-without-half", "the cost of one entry is beta_u + 0.5 * log sigma^2 (log sigma, not "
        "log sigma^2), times the mass")),
    ({"with_temperature": False}, mistake(
        "inverse-temperature-missing", "the inverse temperature is missing: a_j = sigmoid(lambda * "
        "(beta_a_j - sum_h cost_jh))")),
]


def _same(result: tuple, expected: tuple) -> bool:
    return all(close(got, want, rtol=1e-5, atol=1e-12) for got, want in zip(result, expected))


def _m_step_hint(results: list[object], problems: list[dict[str, torch.Tensor]],
                 inverse_temperature: float) -> str:
    names = ("mu", "sigma_sq", "a_out")
    for result, p in zip(results, problems):
        if not isinstance(result, tuple) or len(result) != 3:
            return other("type", f"return a tuple (mu, sigma_sq, a_out), got {type(result).__name__}")
        expected = m_step_variant(**p, inverse_temperature=inverse_temperature)
        for name, got, want in zip(names, result, expected):
            if not isinstance(got, torch.Tensor) or got.shape != want.shape:
                return other("shape", f"{name} must have shape {tuple(want.shape)} (B, J, ...), "
                             f"got {shape_of(got)}")
    expected = [m_step_variant(**p, inverse_temperature=inverse_temperature) for p in problems]
    if all(_same(result, want) for result, want in zip(results, expected)):
        return ""
    for options, hint in _M_MISTAKES:
        if all(_same(result, m_step_variant(**p, inverse_temperature=inverse_temperature, **options))
               for result, p in zip(results, problems)):
            return hint
    wrong = [name for k, name in enumerate(names)
             if not all(close(result[k], want[k], rtol=1e-5, atol=1e-12) for result, want in zip(results, expected))]
    if wrong == ["a_out"]:
        return other("values", "mu and sigma^2 are right; a_out is not: a_j = sigmoid("
                     "inverse_temperature * (beta_a_j - sum_h cost_jh)), with cost_jh = "
                     "(beta_u_j + 0.5 * log sigma^2_jh) * sum_i R'_ij")
    return other("values", f"{', '.join(wrong)} differ from the M-step: mu = sum_i R'V / sum_i R', "
                 f"sigma^2 = sum_i R'(V - mu)^2 / sum_i R' + eps, with R' = R * a (eps = {EPS} in "
                 "both denominators)")


def check_m_step(fn: Callable, *, quiet: bool = False) -> CheckResult:
    r"""``fn(R, activations, votes, beta_u, beta_a, inverse_temperature)`` must return the
    M-step's ``(mu, sigma_sq, a_out)``: (B, J, M), (B, J, M), (B, J)."""
    problems, results, hint, inverse_temperature = [_problem(1), _problem(1, collapsed=True)], [], "", 0.3
    for p in problems:
        result, hint = call_learner(fn, *(t.clone() for t in p.values()), inverse_temperature,
                                    what="your m_step")
        if hint:
            break
        results.append(result)
    hint = hint or _m_step_hint(results, problems, inverse_temperature)
    return verdict(hint, "m_step weighs every vote by R * a, and the activation by the cost of "
                   "describing the votes.", quiet=quiet)


def e_step_variant(votes, mu, sigma_sq, a_out, *, log_space=True, softmax_dim=2,
                   with_activation=True, with_normaliser=True):
    r"""The E-step R (B, I, J) in the lesson's layout, or one of its usual mistakes."""
    deviation = (votes - mu[:, None]) ** 2 / (2 * sigma_sq[:, None])  # (B, I, J, M)
    normaliser = 0.5 * torch.log(sigma_sq) + 0.5 * math.log(2 * math.pi)  # (B, J, M)
    log_p = -(deviation + (normaliser[:, None] if with_normaliser else 0)).sum(dim=-1)  # (B, I, J)
    logits = log_p + torch.log(a_out)[:, None] if with_activation else log_p
    if log_space:
        return torch.softmax(logits, dim=softmax_dim)
    weighted = torch.exp(logits)  # (B, I, J): underflows to 0 far from every Gaussian
    return weighted / weighted.sum(dim=softmax_dim, keepdim=True)


_E_MISTAKES = [
    ({"softmax_dim": 1}, mistake(
        "normalised-over-children", "you normalised over the children i: each child's assignments "
        "R_ij sum to 1 over the parents j (softmax over dim=2 in (B, I, J))")),
    ({"with_activation": False}, mistake(
        "log-activation-missing", "log a_j is missing: R_ij is proportional to a_j * p_ij, so add "
        "log a_out (B, 1, J) to log p before the softmax")),
    ({"with_normaliser": False}, mistake(
        "gaussian-normaliser-missing", "log p_ij needs the Gaussian's normaliser too: "
        "- 0.5 * log sigma^2_jh - 0.5 * log(2 pi) for every h")),
]


def _e_step_hint(probes: list[tuple[torch.Tensor, ...]], results: list[object]) -> str:
    for args, got in zip(probes, results):
        expected = e_step_variant(*args)
        if not isinstance(got, torch.Tensor) or got.shape != expected.shape:
            return other("shape",
                         f"return R of shape {tuple(expected.shape)} (B, I, J), got {shape_of(got)}")
    if not torch.isfinite(results[1]).all():
        return mistake("not-in-log-space",
                       "NaN or inf for a child that votes far from every Gaussian: its p_ij underflow "
                       "to 0 (0/0). Stay in log space: R = softmax over j of (log a_j + log p_ij)")
    if all(close(got, e_step_variant(*args)) for args, got in zip(probes, results)):
        return ""
    for options, hint in _E_MISTAKES:
        if all(close(got, e_step_variant(*args, **options)) for args, got in zip(probes, results)):
            return hint
    return other("values", "R differs: log p_ij = sum_h [-(V - mu)^2 / (2 sigma^2) - 0.5 log sigma^2 "
                 "- 0.5 log 2pi], R = softmax over j of (log a_j + log p_ij)")


def check_e_step(fn: Callable, *, quiet: bool = False) -> CheckResult:
    r"""``fn(votes, mu, sigma_sq, a_out)`` must return the E-step's assignments R (B, I, J),
    finite even for a child whose votes are far from every Gaussian."""
    probes, results, hint = [], [], ""
    mu, sigma_sq, a_out = m_step_variant(**_problem(2), inverse_temperature=0.3)  # fitted once
    for far in (False, True):
        args = (_problem(2, far=far)["votes"], mu, sigma_sq, a_out)
        result, hint = call_learner(fn, *(t.clone() for t in args), what="your e_step")
        if hint:
            break
        probes.append(args)
        results.append(result)
    hint = hint or _e_step_hint(probes, results)
    return verdict(hint, "e_step gives every child a distribution over the parents, computed in "
                   "log space.", quiet=quiet)


_LINE_HINTS = {
    1: mistake("chose-line-1",
               "line 1 is right: R' = R * a weighs each child's assignments by its activation"),
    3: mistake("chose-line-3", "line 3 is right: the mass sum_i R'_ij of each parent"),
    4: mistake("chose-line-4",
               "line 4 is right: dividing by the mass turns R' into weights that sum to 1 over i"),
    5: mistake("chose-line-5", "line 5 is right: the weighted mean of the votes"),
    6: mistake("chose-line-6", "line 6 is right: the weighted variance (plus eps)"),
    7: mistake("chose-line-7", "line 7 is right: log sigma = 0.5 log sigma^2, times the mass"),
    8: mistake("chose-line-8", "line 8 is right: the activation from the cost"),
}


def check_spot_the_bug(fn: Callable[[], int], *, quiet: bool = False) -> CheckResult:
    r"""``fn()`` must return the number of the line of ``port_m_step`` that cancels the activations."""
    line, hint = call_learner(fn, what="your bug_line")
    if hint:
        pass
    elif not isinstance(line, int) or isinstance(line, bool):
        hint = other("type", f"return the line number, an int from 1 to 8, got {line!r}")
    elif line != 2:
        hint = _LINE_HINTS.get(line) or other(
            "values", f"there is no line {line}: the numbers run from 1 to 8")
        hint = reworded(hint, hint + ". Look for the line after which halving one a_i changes "
                        "nothing.")
    return verdict(hint, "line 2: R already sums to 1 over j, so renormalising R * a over j "
                   "divides a_i out again.", quiet=quiet)

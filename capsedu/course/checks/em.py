r"""Checks for lesson 11 (EM routing): the M-step, the E-step in log space, and the port's bug.

Each check runs the learner's function on a small seeded problem, compares it with
:mod:`capsedu.nets.em_routing`, and when it differs recomputes the step with the likely mistakes
(activations renormalised away, a missing mass, a softmax over the wrong axis, probabilities
outside log space ...) to name the one that was made.

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

from capsedu.course.checks._kit import CheckResult, call_learner, close, shape_of, verdict

EPS = 1e-8


def _problem(seed: int = 0, far: bool = False) -> dict[str, torch.Tensor]:
    r"""Votes (2, 6, 3, 4), activations (2, 6) with one near 0, R (2, 6, 3), betas (3,)."""
    generator = torch.Generator().manual_seed(seed)
    votes = torch.randn(2, 6, 3, 4, generator=generator, dtype=torch.float64)
    if far:
        votes[:, 0] += 60.0  # child 0 votes far from every Gaussian: its p_ij underflow to 0
    activations = torch.rand(2, 6, generator=generator, dtype=torch.float64)
    activations[:, 1] = 0.01
    R = torch.softmax(torch.randn(2, 6, 3, generator=generator, dtype=torch.float64), dim=-1)
    beta_u, beta_a = (torch.randn(3, generator=generator, dtype=torch.float64) for _ in range(2))
    return {"R": R, "activations": activations, "votes": votes, "beta_u": beta_u, "beta_a": beta_a}


def m_step_variant(R, activations, votes, beta_u, beta_a, inverse_temperature, *,
                   renormalise=False, weight_by_activation=True, mass_in_cost=True,
                   weighted_variance=True):
    r"""The M-step (mu, sigma_sq, a_out) in the lesson's layout, or one of its usual mistakes."""
    R_weighted = R * activations[..., None] if weight_by_activation else R  # (B, I, J)
    if renormalise:  # the port's line: sum over j back to 1, which cancels a_i
        R_weighted = R_weighted / (R_weighted.sum(dim=2, keepdim=True) + EPS)
    mass = R_weighted.sum(dim=1)  # (B, J)
    mu = torch.einsum("bij,bijh->bjh", R_weighted, votes) / (mass[..., None] + EPS)  # (B, J, M)
    deviation_sq = (votes - mu[:, None]) ** 2  # (B, I, J, M)
    if weighted_variance:
        sigma_sq = torch.einsum("bij,bijh->bjh", R_weighted, deviation_sq) / (mass[..., None] + EPS) + EPS
    else:
        sigma_sq = deviation_sq.mean(dim=1) + EPS
    cost = beta_u[:, None] + 0.5 * torch.log(sigma_sq)  # (B, J, M)
    if mass_in_cost:
        cost = cost * mass[..., None]
    return mu, sigma_sq, torch.sigmoid(inverse_temperature * (beta_a - cost.sum(dim=-1)))


_M_MISTAKES = [
    ({"renormalise": True}, "you renormalised R' = R * a over the output capsules j: since R already "
     "sums to 1 over j, dividing by that sum gives R back and the input activations cancel (the "
     "port's bug) - use R' = R * a as it is"),
    ({"weight_by_activation": False}, "the input activations are missing: weight the assignments, "
     "R'_ij = R_ij * a_i, before every sum over i"),
    ({"mass_in_cost": False}, "the cost must be multiplied by the mass sum_i R'_ij: "
     "cost_jh = (beta_u_j + 0.5 * log sigma^2_jh) * sum_i R'_ij"),
    ({"weighted_variance": False}, "sigma^2 must be the R'-weighted mean of (V - mu)^2, divided by "
     "sum_i R'_ij, not a plain mean over the children"),
]


def _m_step_hint(result: object, p: dict[str, torch.Tensor], inverse_temperature: float) -> str:
    names = ("mu", "sigma_sq", "a_out")
    if not isinstance(result, tuple) or len(result) != 3:
        return f"return a tuple (mu, sigma_sq, a_out), got {type(result).__name__}"
    expected = m_step_variant(**p, inverse_temperature=inverse_temperature)
    for name, got, want in zip(names, result, expected):
        if not isinstance(got, torch.Tensor) or got.shape != want.shape:
            return f"{name} must have shape {tuple(want.shape)} (B, J, ...), got {shape_of(got)}"
    if all(close(got, want, rtol=1e-5, atol=1e-8) for got, want in zip(result, expected)):
        return ""
    for options, hint in _M_MISTAKES:
        variant = m_step_variant(**p, inverse_temperature=inverse_temperature, **options)
        if all(close(got, want, rtol=1e-5, atol=1e-8) for got, want in zip(result, variant)):
            return hint
    wrong = [name for name, got, want in zip(names, result, expected) if not close(got, want, rtol=1e-5, atol=1e-8)]
    if wrong == ["a_out"]:
        return ("mu and sigma^2 are right; a_out is not: a_j = sigmoid(inverse_temperature * "
                "(beta_a_j - sum_h cost_jh)), with cost_jh = (beta_u_j + 0.5 * log sigma^2_jh) * sum_i R'_ij")
    return (f"{', '.join(wrong)} differ from the M-step: mu = sum_i R'V / sum_i R', sigma^2 = "
            f"sum_i R'(V - mu)^2 / sum_i R' + eps, with R' = R * a (eps = {EPS} in both denominators)")


def check_m_step(fn: Callable, *, quiet: bool = False) -> CheckResult:
    r"""``fn(R, activations, votes, beta_u, beta_a, inverse_temperature)`` must return the
    M-step's ``(mu, sigma_sq, a_out)``: (B, J, M), (B, J, M), (B, J)."""
    p, inverse_temperature = _problem(1), 0.3
    result, hint = call_learner(fn, *(t.clone() for t in p.values()), inverse_temperature,
                                what="your m_step")
    hint = hint or _m_step_hint(result, p, inverse_temperature)
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
    ({"softmax_dim": 1}, "you normalised over the children i: each child's assignments R_ij sum "
     "to 1 over the parents j (softmax over dim=2 in (B, I, J))"),
    ({"with_activation": False}, "log a_j is missing: R_ij is proportional to a_j * p_ij, so add "
     "log a_out (B, 1, J) to log p before the softmax"),
    ({"with_normaliser": False}, "log p_ij needs the Gaussian's normaliser too: "
     "- 0.5 * log sigma^2_jh - 0.5 * log(2 pi) for every h"),
]


def _e_step_hint(probes: list[tuple[torch.Tensor, ...]], results: list[object]) -> str:
    for args, got in zip(probes, results):
        expected = e_step_variant(*args)
        if not isinstance(got, torch.Tensor) or got.shape != expected.shape:
            return f"return R of shape {tuple(expected.shape)} (B, I, J), got {shape_of(got)}"
    if not torch.isfinite(results[1]).all():
        return ("NaN or inf for a child that votes far from every Gaussian: its p_ij underflow to 0 "
                "(0/0). Stay in log space: R = softmax over j of (log a_j + log p_ij)")
    if all(close(got, e_step_variant(*args)) for args, got in zip(probes, results)):
        return ""
    for options, hint in _E_MISTAKES:
        if all(close(got, e_step_variant(*args, **options)) for args, got in zip(probes, results)):
            return hint
    return ("R differs: log p_ij = sum_h [-(V - mu)^2 / (2 sigma^2) - 0.5 log sigma^2 - 0.5 log 2pi], "
            "R = softmax over j of (log a_j + log p_ij)")


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
    1: "line 1 is right: R' = R * a weighs each child's assignments by its activation",
    3: "line 3 is right: the mass sum_i R'_ij of each parent",
    4: "line 4 is right: dividing by the mass turns R' into weights that sum to 1 over i",
    5: "line 5 is right: the weighted mean of the votes",
    6: "line 6 is right: the weighted variance (plus eps)",
    7: "line 7 is right: log sigma = 0.5 log sigma^2, times the mass",
    8: "line 8 is right: the activation from the cost",
}


def check_spot_the_bug(fn: Callable[[], int], *, quiet: bool = False) -> CheckResult:
    r"""``fn()`` must return the number of the line of ``port_m_step`` that cancels the activations."""
    line, hint = call_learner(fn, what="your bug_line")
    if hint:
        pass
    elif not isinstance(line, int) or isinstance(line, bool):
        hint = f"return the line number, an int from 1 to 8, got {line!r}"
    elif line != 2:
        hint = _LINE_HINTS.get(line, f"there is no line {line}: the numbers run from 1 to 8")
        hint += ". Look for the line after which halving one a_i changes nothing."
    return verdict(hint, "line 2: R already sums to 1 over j, so renormalising R * a over j "
                   "divides a_i out again.", quiet=quiet)

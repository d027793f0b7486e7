r"""Check for lesson 11's Exercise 1: EM routing with a schedule of inverse temperatures λ_t.

The learner writes Procedure 1 of the 2018 paper with one iteration per entry of ``schedule``: the
M-step of iteration t uses λ_t = ``schedule[t]``, the E-step follows every M-step but the last,
and R starts at 1/J. The check compares ``(mu, a_out, R)`` with the same loop built from
``capsedu``'s steps (:func:`~capsedu.course.checks.em.em_m_step`, :func:`~capsedu.course.checks.em.em_e_step`)
on seeded problems with schedules of 1, 3 and 4 iterations (one of them constant), and when they differ recomputes the
loop with the likely slips - one λ for every iteration, the schedule reversed or shifted by one,
an E-step after the last M-step, R starting at 1/I, a fixed number of iterations - to name the
one that was made.

Shape legend (the lesson's layout):
    B      batch size
    I      input capsules
    J      output capsules
    M      pose entries
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from capsedu.course.checks._kit import (
    CheckResult,
    call_learner,
    close,
    mistake,
    other,
    shape_of,
    verdict,
)
from capsedu.course.checks.em import _problem, em_e_step, em_m_step


def _lambdas(schedule: Sequence[float], kind: str) -> list[float]:
    n = len(schedule)
    return {"last_only": [schedule[-1]] * n, "first_only": [schedule[0]] * n,
            "reversed": list(reversed(schedule)), "shifted": [schedule[t - 1] for t in range(n)],
            "three_iterations": [schedule[min(t, n - 1)] for t in range(3)]}.get(kind, list(schedule))


def scheduled_routing(votes: torch.Tensor, activations: torch.Tensor, beta_u: torch.Tensor, beta_a: torch.Tensor,
                      schedule: Sequence[float], *, kind: str = "right") -> tuple[torch.Tensor, ...]:
    r"""Procedure 1 with λ_t = ``schedule[t]``: votes (B, I, J, M), activations (B, I), betas (J,) ->
    ``(mu (B, J, M), a_out (B, J), R (B, I, J))``, R the assignments of the last M-step - or a mistake."""
    lambdas = _lambdas(schedule, kind)
    spread = votes.shape[1] if kind == "r_over_inputs" else votes.shape[2]
    R = votes.new_full(votes.shape[:3], 1.0 / spread)  # (B, I, J)
    for t, inverse_temperature in enumerate(lambdas):
        mu, sigma_sq, a_out = em_m_step(R, activations, votes, beta_u, beta_a, inverse_temperature)
        if t < len(lambdas) - 1 or kind == "e_step_after_last":
            R = em_e_step(votes, mu, sigma_sq, a_out)  # (B, I, J)
    return mu, a_out, R


_MISTAKES = [
    ("last_only", mistake("last-lambda-only", "every iteration used the schedule's last λ: iteration t's "
                                              "M-step takes schedule[t]")),
    ("first_only", mistake("first-lambda-only", "every iteration used the schedule's first λ: iteration t's "
                                                "M-step takes schedule[t]")),
    ("reversed", mistake("schedule-reversed", "the schedule ran backwards: its first value belongs to the "
                                              "first iteration")),
    ("shifted", mistake("schedule-shifted", "each iteration took the previous entry of the schedule (the "
                                            "first took the last one): look at how t indexes schedule")),
    ("e_step_after_last", mistake("e-step-after-last", "the R you return comes from an E-step after the last "
                                                       "M-step: the last iteration is an M-step alone")),
    ("r_over_inputs", mistake("r-starts-over-inputs", "R started at 1/I: every child starts sharing itself "
                                                      "evenly among the J parents, R = 1/J")),
    ("three_iterations", mistake("fixed-iterations", "you ran three iterations whatever the schedule: one "
                                                     "iteration per entry of schedule")),
]


def _same(result: object, expected: tuple) -> bool:
    return isinstance(result, tuple) and len(result) == 3 and all(
        close(got, want, rtol=1e-5, atol=1e-12) for got, want in zip(result, expected))


def check_scheduled_routing(fn: Callable, *, quiet: bool = False) -> CheckResult:
    r"""``fn(votes, activations, beta_u, beta_a, schedule)`` must return Procedure 1's ``(mu, a_out, R)``
    with one iteration per λ of ``schedule``."""
    cases = [(_problem(3), [0.1, 0.4, 1.6]), (_problem(4), [0.5]), (_problem(5), [1.0, 0.05, 0.3, 2.0]),
             (_problem(6), [0.3, 0.3, 0.3])]  # a constant schedule: the last iteration is found by position
    results, hint = [], ""
    for p, schedule in cases:
        args = (p["votes"], p["activations"], p["beta_u"], p["beta_a"])
        result, hint = call_learner(fn, *(a.clone() for a in args), list(schedule), what="your routing")
        if hint:
            break
        expected = scheduled_routing(*args, schedule)
        if not (isinstance(result, tuple) and len(result) == 3):
            hint = other("type", f"return a tuple (mu, a_out, R), got {type(result).__name__}")
        elif any(not isinstance(g, torch.Tensor) or g.shape != w.shape for g, w in zip(result, expected)):
            shapes = ", ".join(shape_of(g) for g in result)
            hint = other("shape", f"return mu (B, J, M), a_out (B, J) and R (B, I, J): here "
                                  f"{tuple(expected[0].shape)}, {tuple(expected[1].shape)}, "
                                  f"{tuple(expected[2].shape)}; got {shapes}")
        if hint:
            break
        results.append((result, args, schedule))
    if not hint and not all(_same(r, scheduled_routing(*args, s)) for r, args, s in results):
        hint = next((text for kind, text in _MISTAKES
                     if all(_same(r, scheduled_routing(*args, s, kind=kind)) for r, args, s in results)),
                    other("values", "mu, a_out or R differ from Procedure 1 with λ_t = schedule[t]: compare "
                                    "your loop with the one of Build it, iteration by iteration"))
    return verdict(hint, "your routing follows the schedule: λ_t = schedule[t] in iteration t's M-step",
                   quiet=quiet)

"""Lesson 11's pieces: the exercise checks' hints, the EM trace and explorer, the port-style
benchmark implementation, the recipe's margin ramp and the allocator setting."""

import sys

import pytest
import torch

from capsedu.course.checks._kit import STUB_HINT
from capsedu.course.checks.em import (
    check_e_step,
    check_m_step,
    check_spot_the_bug,
    e_step_variant,
    em_e_step,
    em_m_step,
    m_step_variant,
)
from capsedu.course.checks.em_schedule import check_scheduled_routing, scheduled_routing
from capsedu.explore.em import digit_votes, em_explorer, em_figure, em_trace, toy_votes
from capsedu.nets.em_routing import em_routing
from capsedu.nets.matrix_capsnet import MatrixCapsConfig, MatrixCapsNet
from capsedu.training.hardware import reuse_large_allocations

pytestmark = pytest.mark.unit


def stub(*args):
    raise NotImplementedError


def right_m_step(R, a, votes, beta_u, beta_a, inverse_temperature):
    return m_step_variant(R, a, votes, beta_u, beta_a, inverse_temperature)


def test_right_answers_pass(capsys):
    assert check_m_step(right_m_step)
    assert check_e_step(lambda votes, mu, s, a: e_step_variant(votes, mu, s, a))
    assert check_spot_the_bug(lambda: 2)
    assert capsys.readouterr().out.count("✅") == 3


def test_the_lessons_fallback_steps_are_capsedus_and_pass(capsys):
    assert check_m_step(em_m_step) and check_e_step(em_e_step)
    votes, a = torch.randn(2, 5, 3, 4, dtype=torch.float64), torch.rand(2, 5, dtype=torch.float64)
    beta_u, beta_a = torch.randn(3, dtype=torch.float64), torch.randn(3, dtype=torch.float64)
    R = torch.softmax(torch.randn(2, 5, 3, dtype=torch.float64), dim=-1)
    torch.testing.assert_close(em_m_step(R, a, votes, beta_u, beta_a, 0.4),
                               m_step_variant(R, a, votes, beta_u, beta_a, 0.4))
    mu, sigma_sq, a_out = em_m_step(R, a, votes, beta_u, beta_a, 0.4)
    torch.testing.assert_close(em_e_step(votes, mu, sigma_sq, a_out), e_step_variant(votes, mu, sigma_sq, a_out))


def learners_loop(votes, a_in, beta_u, beta_a, schedule, *, last=None, index=lambda t: t):
    r"""Procedure 1 as a learner writes it, from the lesson's steps; ``index`` picks each iteration's λ."""
    R = votes.new_full(votes.shape[:3], 1.0 / votes.shape[2])
    for t in range(len(schedule)):
        mu, sigma_sq, a_out = em_m_step(R, a_in, votes, beta_u, beta_a, schedule[index(t)])
        if t < len(schedule) - 1 or last == "e-step":
            R = em_e_step(votes, mu, sigma_sq, a_out)
    return mu, a_out, R


def test_the_scheduled_routing_check_names_its_mistakes(capsys):
    assert check_scheduled_routing(learners_loop)
    assert check_scheduled_routing(scheduled_routing)
    assert not check_scheduled_routing(stub) and STUB_HINT in capsys.readouterr().out
    wrong = {"schedule's last λ": lambda *a: learners_loop(*a, index=lambda t: -1),
             "ran backwards": lambda *a: learners_loop(*a, index=lambda t: -1 - t),
             "previous entry": lambda *a: learners_loop(*a, index=lambda t: t - 1),
             "an M-step alone": lambda *a: learners_loop(*a, last="e-step")}
    for fragment, fn in wrong.items():
        assert not check_scheduled_routing(fn)
        assert fragment in capsys.readouterr().out, fragment
    for kind, fragment in (("first_only", "first λ"), ("r_over_inputs", "R = 1/J"),
                           ("three_iterations", "one iteration per entry")):
        assert not check_scheduled_routing(lambda *a, kind=kind: scheduled_routing(*a, kind=kind))
        assert fragment in capsys.readouterr().out, kind
    assert not check_scheduled_routing(lambda *a: learners_loop(*a)[:2])
    assert "return a tuple (mu, a_out, R)" in capsys.readouterr().out
    assert not check_scheduled_routing(lambda *a: tuple(x * 1.01 for x in learners_loop(*a)))
    assert "compare your loop" in capsys.readouterr().out


def test_the_reference_steps_are_capsedus():
    votes, a, beta_u, beta_a = torch.randn(2, 5, 3, 4, dtype=torch.float64), torch.rand(2, 5, dtype=torch.float64), \
        torch.randn(3, dtype=torch.float64), torch.randn(3, dtype=torch.float64)
    for iterations in (1, 2):
        R = torch.full((2, 5, 3), 1 / 3, dtype=torch.float64)
        for _ in range(iterations - 1):
            R = e_step_variant(votes, *m_step_variant(R, a, votes, beta_u, beta_a, 0.4))
        mu, _, a_out = m_step_variant(R, a, votes, beta_u, beta_a, 0.4)
        mu_ref, a_ref, R_ref = em_routing(votes, a, beta_u, beta_a, iterations, 0.4)
        torch.testing.assert_close((mu, a_out, R), (mu_ref, a_ref, R_ref))


@pytest.mark.parametrize("options, hint", [
    ({"renormalise": True}, "the input activations cancel"),
    ({"weight_by_activation": False}, "input activations are missing"),
    ({"mass_in_cost": False}, "multiplied by the mass"),
    ({"weighted_variance": False}, "not a plain mean"),
    ({"count_denominator": True}, "by the number of children I"),
    ({"variance_eps": False}, "the variance needs + eps"),
    ({"half_log": False}, "log sigma, not log sigma^2"),
    ({"with_temperature": False}, "inverse temperature is missing"),
])
def test_m_step_mistakes_get_their_hint(capsys, options, hint):
    assert not check_m_step(lambda *args: m_step_variant(*args, **options))
    assert hint in capsys.readouterr().out


@pytest.mark.parametrize("wrong, hint", [
    (stub, STUB_HINT),
    (lambda *args: (1, 2, 3), "mu must have shape (2, 3, 4)"),
    (lambda *args: right_m_step(*args)[:2], "return a tuple (mu, sigma_sq, a_out)"),
    (lambda *args: (*right_m_step(*args)[:2], right_m_step(*args)[2] * 0.5), "a_out is not"),
])
def test_m_step_other_answers_get_a_hint(capsys, wrong, hint):
    assert not check_m_step(wrong)
    assert hint in capsys.readouterr().out


@pytest.mark.parametrize("options, hint", [
    ({"log_space": False}, "Stay in log space"),
    ({"softmax_dim": 1}, "normalised over the children i"),
    ({"with_activation": False}, "log a_j is missing"),
    ({"with_normaliser": False}, "Gaussian's normaliser"),
])
def test_e_step_mistakes_get_their_hint(capsys, options, hint):
    assert not check_e_step(lambda *args: e_step_variant(*args, **options))
    assert hint in capsys.readouterr().out


def test_e_step_stub_and_shape_get_a_hint(capsys):
    assert not check_e_step(stub)
    assert not check_e_step(lambda votes, mu, s, a: e_step_variant(votes, mu, s, a)[0])
    out = capsys.readouterr().out
    assert STUB_HINT in out and "return R of shape (2, 6, 3)" in out


@pytest.mark.parametrize("answer, hint", [(1, "line 1 is right"), (9, "no line 9"), ("2", "an int"),
                                          (None, "an int")])
def test_spot_the_bug_wrong_lines_get_a_hint(capsys, answer, hint):
    assert not check_spot_the_bug(lambda: answer)
    assert hint in capsys.readouterr().out
    assert not check_spot_the_bug(stub)
    assert STUB_HINT in capsys.readouterr().out
    assert not check_spot_the_bug(2)  # the number itself, not a function
    assert "pass your function itself" in capsys.readouterr().out


def test_trace_ends_where_em_routing_ends_and_the_toy_separates():
    votes, activations = toy_votes(seed=0)
    zeros = torch.zeros(3)
    steps = em_trace(votes, activations, zeros, zeros, 4, 0.1)
    mu, a_out, R = em_routing(votes[None], activations[None], zeros, zeros, 4, 0.1)
    torch.testing.assert_close((steps[-1].mu, steps[-1].a, steps[-1].R), (mu[0], a_out[0], R[0]))
    assert torch.equal(steps[0].R, torch.full((24, 3), 1 / 3))
    final = steps[-1]
    assert final.a[0] > final.a[2] and final.a[1] > final.a[2]  # the agreed-on parents win
    assert final.R[:8, 0].mean() > 0.8 and final.R[8:16, 1].mean() > 0.6
    with pytest.raises(ValueError, match="activations must lie in"):
        em_trace(votes, activations * 2, zeros, zeros, 2, 0.1)


def test_figure_and_explorer_follow_the_iterations():
    votes, activations = toy_votes(seed=0)
    zeros = torch.zeros(3)
    steps = em_trace(votes, activations, zeros, zeros, 3, 0.1)
    figure = em_figure(steps, votes, 2)
    assert "iteration 2" in figure.axes[0].get_title()
    with pytest.raises(ValueError, match="iteration must be in 1..3"):
        em_figure(steps, votes, 4)
    explorer = em_explorer(steps, votes, iteration=1)
    first = explorer.view.value
    explorer.iteration.value = 3
    assert explorer.redraws == 2 and explorer.view.value != first
    assert "iteration 3" in explorer.panel.titles[0].get_text()


def test_digit_votes_are_the_class_layers_input():
    torch.manual_seed(0)
    model = MatrixCapsNet(MatrixCapsConfig(conv1_channels=8, primary_types=2, conv_caps1_types=2,
                                           conv_caps2_types=2))
    model.train()
    image = torch.rand(1, 28, 28)
    votes, activations = digit_votes(model, image)
    assert votes.shape == (2 * 3 * 3, 10, 16) and activations.shape == (18,)
    assert model.training  # the mode is left as found
    schedule = [model.config.inverse_temperature] * model.config.routing_iterations
    _, expected = model.eval()(image[None])
    _, a_out, _ = em_routing(votes[None], activations[None], model.class_caps.beta_u,
                             model.class_caps.beta_a, len(schedule), schedule)
    torch.testing.assert_close(a_out, expected)


@pytest.mark.parametrize("iterations", [1, 2, 3])
@pytest.mark.tools  # a benchmark's port of EM routing
def test_port_style_benchmark_computes_the_same(iterations):
    from benchmarks.em_speed import port_style_em

    g = torch.Generator().manual_seed(0)
    votes, a = torch.randn(3, 12, 4, 16, generator=g), torch.rand(3, 12, generator=g)
    beta_u, beta_a = 0.1 * torch.randn(4, generator=g), 0.1 * torch.randn(4, generator=g)
    mu, a_out = port_style_em(votes, a, beta_u, beta_a, iterations, 1e-2)
    mu_ref, a_ref, _ = em_routing(votes, a, beta_u, beta_a, iterations, 1e-2)
    torch.testing.assert_close((mu, a_out), (mu_ref, a_ref))


@pytest.mark.tools  # it changes malloc for the whole process: not in the in-process unit tier
def test_reuse_large_allocations_sets_glibc_and_names_bad_limits():
    if sys.platform.startswith("linux"):
        assert reuse_large_allocations() is True
    for bad, error in ((0, ValueError), (2 ** 31, ValueError), (1.5, TypeError), (True, TypeError)):
        with pytest.raises(error, match="limit_bytes must be"):
            reuse_large_allocations(bad)


def test_a_recipe_with_a_margin_ramp_moves_the_margin_each_epoch(monkeypatch):
    import dataclasses

    from capsedu.data.mnist import load_offline
    from capsedu.zoo.recipes import RECIPES
    from capsedu.zoo.train import train_recipe

    margins = []
    monkeypatch.setattr("capsedu.training.objectives.spread_loss",
                        lambda a, labels, margin: margins.append(margin) or (a * 0).sum())
    recipe = dataclasses.replace(RECIPES["em"], epochs=3, objective={**RECIPES["em"].objective, "ramp_epochs": 2},
                                 batch_size=16, config={**RECIPES["em"].config, "conv1_channels": 8,
                                                        "primary_types": 2, "conv_caps1_types": 2,
                                                        "conv_caps2_types": 2})
    _, history = train_recipe(recipe, load_offline("train").subset(16), progress=False)
    assert RECIPES["em"].objective["name"] == "spread"
    assert margins == pytest.approx([0.2, 0.55, 0.9]) and len(history["epoch"]) == 3


def test_the_class_layer_trace_routes_as_the_network_does():
    """With beta_a in logit units the parameter is lambda * beta_a: a trace given the raw parameter
    routes another network (lesson 11 once did); class_layer_trace reproduces the network's output."""
    from capsedu.explore.em import class_layer_trace

    torch.manual_seed(0)
    model = MatrixCapsNet(MatrixCapsConfig(conv1_channels=8, primary_types=2, conv_caps1_types=3,
                                           conv_caps2_types=3, beta_a_logit_units=True)).eval()
    with torch.no_grad():
        model.class_caps.beta_a.normal_(0.0, 2.0)  # offsets of the size training gives them
    image = torch.rand(1, 28, 28)
    votes, activations, steps = class_layer_trace(model, image, 4)
    own = model(image[None])[1][0]
    torch.testing.assert_close(steps[model.config.routing_iterations - 1].a, own)
    raw = em_trace(votes, activations, model.class_caps.beta_u.detach(), model.class_caps.beta_a.detach(),
                   2, model.config.inverse_temperature)
    assert not torch.allclose(raw[1].a, own, atol=1e-3)  # the raw parameter is not the beta routing uses


def test_a_loop_that_finds_its_last_iteration_by_value_fails_on_a_constant_schedule(capsys):
    def by_value(votes, a_in, beta_u, beta_a, schedule):
        R = votes.new_full(votes.shape[:3], 1.0 / votes.shape[2])
        for lam in schedule:
            mu, sigma_sq, a_out = em_m_step(R, a_in, votes, beta_u, beta_a, lam)
            if lam != schedule[-1]:
                R = em_e_step(votes, mu, sigma_sq, a_out)
        return mu, a_out, R
    assert not check_scheduled_routing(by_value)

"""EM routing (Hinton, Sabour & Frosst 2018): the vectorised version equals a literal loop over the
paper's Procedure 1, and keeps the properties the port that inspired lesson 11 lost."""

import math

import pytest
import torch

from capsedu.nets.em_routing import em_routing
from capsedu.nets.matrix_capsnet import MatrixCapsConfig, MatrixCapsNet

pytestmark = pytest.mark.unit


def literal_em(votes, a, beta_u, beta_a, iterations, inverse_temperatures, eps=1e-8, normalise=False):
    """Procedure 1, one image, one capsule and one pose entry at a time (``normalise``: the
    summed costs standardised over j, em_routing's ``normalise_cost`` option)."""
    B, I, J, M = votes.shape
    mus, acts, Rs = [], [], []
    for b in range(B):
        R = [[1.0 / J] * J for _ in range(I)]
        for t in range(iterations):
            Rp = [[R[i][j] * float(a[b, i]) for j in range(J)] for i in range(I)]
            mu, var, costs = [], [], []
            for j in range(J):
                mass = sum(Rp[i][j] for i in range(I))
                m = [sum(Rp[i][j] * float(votes[b, i, j, h]) for i in range(I)) / (mass + eps) for h in range(M)]
                s2 = [sum(Rp[i][j] * (float(votes[b, i, j, h]) - m[h]) ** 2 for i in range(I)) / (mass + eps) + eps
                      for h in range(M)]
                costs.append(sum((float(beta_u[j]) + 0.5 * math.log(s2[h])) * mass for h in range(M)))
                mu.append(m), var.append(s2)
            if normalise:
                mean = sum(costs) / J
                std = math.sqrt(sum((c - mean) ** 2 for c in costs) / J)
                costs = [(c - mean) / (std + eps) for c in costs]
            act = [1 / (1 + math.exp(-inverse_temperatures[t] * (float(beta_a[j]) - costs[j])))
                   for j in range(J)]
            if t < iterations - 1:
                for i in range(I):
                    logits = []
                    for j in range(J):
                        log_p = sum(-(float(votes[b, i, j, h]) - mu[j][h]) ** 2 / (2 * var[j][h])
                                    - 0.5 * math.log(var[j][h]) - 0.5 * math.log(2 * math.pi) for h in range(M))
                        logits.append(math.log(act[j]) + log_p)
                    top = max(logits)
                    total = sum(math.exp(x - top) for x in logits)
                    R[i] = [math.exp(x - top) / total for x in logits]
        mus.append(mu), acts.append(act), Rs.append(R)
    return torch.tensor(mus, dtype=torch.float64), torch.tensor(acts, dtype=torch.float64), torch.tensor(Rs, dtype=torch.float64)


def problem(B=2, I=5, J=3, M=4, seed=0, scale=1.0, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    votes = scale * torch.randn(B, I, J, M, generator=g, dtype=dtype)
    a = torch.rand(B, I, generator=g, dtype=dtype)
    return votes, a, torch.randn(J, generator=g, dtype=dtype), torch.randn(J, generator=g, dtype=dtype)


@pytest.mark.parametrize("iterations, inverse_temperature", [(1, 0.5), (2, 1.0), (3, [0.3, 0.6, 1.0])])
def test_vectorised_equals_the_literal_procedure(iterations, inverse_temperature):
    votes, a, beta_u, beta_a = problem()
    inverse_temperatures = (inverse_temperature if isinstance(inverse_temperature, list)
                            else [inverse_temperature] * iterations)
    mu, a_out, R = em_routing(votes, a, beta_u, beta_a, iterations, inverse_temperature)
    mu_ref, a_ref, R_ref = literal_em(votes, a, beta_u, beta_a, iterations, inverse_temperatures)
    torch.testing.assert_close(mu, mu_ref)
    torch.testing.assert_close(a_out, a_ref)
    torch.testing.assert_close(R, R_ref)


@pytest.mark.parametrize("iterations", [1, 3])
def test_the_normalised_cost_option_equals_its_literal_version(iterations):
    votes, a, beta_u, beta_a = problem(seed=5)
    inverse_temperatures = [0.7] * iterations
    results = em_routing(votes, a, beta_u, beta_a, iterations, 0.7, normalise_cost=True)
    literal = literal_em(votes, a, beta_u, beta_a, iterations, inverse_temperatures, normalise=True)
    torch.testing.assert_close(results, literal)
    plain = em_routing(votes, a, beta_u, beta_a, iterations, 0.7)
    assert not torch.allclose(results[1], plain[1])  # it is an option: off by default


def test_assignments_sum_to_one_and_activations_lie_in_0_1():
    votes, a, beta_u, beta_a = problem(B=3, I=12, J=4, M=16, seed=1)
    mu, a_out, R = em_routing(votes, a, beta_u, beta_a, 3, 1.0)
    assert mu.shape == (3, 4, 16) and a_out.shape == (3, 4) and R.shape == (3, 12, 4)
    torch.testing.assert_close(R.sum(dim=2), torch.ones(3, 12, dtype=torch.float64))
    assert ((a_out > 0) & (a_out < 1)).all()


def test_input_activations_are_not_cancelled():
    """The port's bug: renormalising R * a over j cancels a; here a weaker input weighs less."""
    votes, a, beta_u, beta_a = problem(seed=2)
    changed = a.clone()
    changed[:, 0] *= 0.1
    for iterations in (1, 2, 3):
        before, after = em_routing(votes, a, beta_u, beta_a, iterations, 1.0), em_routing(votes, changed, beta_u, beta_a, iterations, 1.0)
        assert not torch.allclose(before[0], after[0]) and not torch.allclose(before[1], after[1])


@pytest.mark.parametrize("iterations", [1, 2, 3])
@pytest.mark.parametrize("scale", [1e-3, 1.0, 1e3])
@pytest.mark.parametrize("inverse_temperature", [0.01, 1.0])  # 1.0 with large votes: sigmoid rounds to 0 in float32
def test_gradients_are_finite_in_float32_at_any_vote_scale(iterations, scale, inverse_temperature):
    votes, a, beta_u, beta_a = problem(B=4, I=32, J=10, M=16, seed=3, scale=scale, dtype=torch.float32)
    for x in (votes, a, beta_u, beta_a):
        x.requires_grad_(True)
    mu, a_out, _ = em_routing(votes, a, beta_u, beta_a, iterations, inverse_temperature)
    assert torch.isfinite(mu).all() and torch.isfinite(a_out).all()
    (mu.sum() + a_out.sum()).backward()
    for name, x in (("votes", votes), ("activations", a), ("beta_u", beta_u), ("beta_a", beta_a)):
        assert torch.isfinite(x.grad).all(), name


def test_gradcheck_in_float64():
    votes, a, beta_u, beta_a = problem(B=1, I=4, J=2, M=3, seed=4)
    a = 0.2 + 0.6 * a  # away from 0 and 1
    inputs = tuple(x.clone().requires_grad_(True) for x in (votes, a, beta_u, beta_a))
    assert torch.autograd.gradcheck(lambda *x: em_routing(*x, 3, 0.5)[:2], inputs)


@pytest.mark.parametrize("change, error, match", [
    (lambda p: {**p, "votes": p["votes"][0]}, ValueError, r"votes must be a 4-D tensor \(B, I, J, M\)"),
    (lambda p: {**p, "activations": p["activations"][:, :3]}, ValueError, r"activations must have shape \(B, I\)"),
    (lambda p: {**p, "beta_u": torch.zeros(5, dtype=torch.float64)}, ValueError, r"beta_u must have one value per output capsule"),
    (lambda p: {**p, "beta_a": torch.zeros(3, 1, dtype=torch.float64)}, ValueError, r"beta_a must be a 1-D tensor"),
    (lambda p: {**p, "routing_iterations": 0}, ValueError, "routing_iterations"),
    (lambda p: {**p, "inverse_temperature": [1.0, 2.0]}, ValueError, "inverse_temperature must be a float or 3 floats"),
    (lambda p: {**p, "votes": p["votes"].long()}, TypeError, "votes must be a floating-point tensor"),
    (lambda p: {**p, "votes": p["votes"][:0], "activations": p["activations"][:0]}, ValueError, "empty batch"),
])
def test_bad_input_is_named(change, error, match):
    votes, a, beta_u, beta_a = problem()
    arguments = change({"votes": votes, "activations": a, "beta_u": beta_u, "beta_a": beta_a, "routing_iterations": 3,
                        "inverse_temperature": 1.0})
    with pytest.raises(error, match=match):
        em_routing(**arguments)


def test_votes_in_any_memory_order_give_the_same_routing():
    """One layout, (B, I, J, M): a layer that builds its votes j-major passes a transposed view
    (no copy), and gets what contiguous votes give."""
    votes, a, beta_u, beta_a = problem(B=3, I=7, J=4, M=16, seed=6)
    j_major = votes.transpose(1, 2).contiguous().transpose(1, 2)  # (B, I, J, M), a view of (B, J, I, M)
    assert not j_major.is_contiguous()
    for got, expected in zip(em_routing(j_major, a, beta_u, beta_a, 3, 0.5), em_routing(votes, a, beta_u, beta_a, 3, 0.5)):
        torch.testing.assert_close(got, expected, rtol=0, atol=0)


def test_the_network_routes_its_class_votes_with_em_routing():
    """MatrixCapsNet's last layer is em_routing on class_votes' (B, I, J, 16), in that layout."""
    torch.manual_seed(0)
    config = MatrixCapsConfig(conv1_channels=4, primary_types=2, conv_caps1_types=2, conv_caps2_types=2)
    model = MatrixCapsNet(config)
    images = torch.rand(2, 1, 28, 28)
    votes, activations = model.class_votes(images)  # (B, I, J, 16), (B, I)
    beta_u, beta_a = model.class_caps.routing_betas()
    mu, a_out, _ = em_routing(votes, activations, beta_u, beta_a, config.routing_iterations,
                              config.inverse_temperature)
    poses, scores = model(images)
    torch.testing.assert_close(poses, mu)
    torch.testing.assert_close(scores, a_out)
    images[0, 0, 3, 4] = float("nan")
    with pytest.raises(ValueError, match="x contains 1 NaN"):  # checked where the images enter
        model(images)

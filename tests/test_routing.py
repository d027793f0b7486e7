import pytest
import torch
from torch.autograd.gradcheck import GradcheckError

from capsedu import dynamic_routing, squash

pytestmark = pytest.mark.unit


def routing_by_loops(u_hat: torch.Tensor, routing_iterations: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Procedure 1 written with explicit loops over batch, i and j (slow, obviously right)."""
    B, I, J, D = u_hat.shape
    b = [[[0.0] * J for _ in range(I)] for _ in range(B)]
    for _ in range(routing_iterations):
        v = torch.zeros(B, J, D, dtype=u_hat.dtype)
        c = torch.zeros(B, I, J, dtype=u_hat.dtype)
        for n in range(B):
            for i in range(I):
                c[n, i] = torch.softmax(torch.tensor(b[n][i], dtype=u_hat.dtype), dim=0)
            for j in range(J):
                s_j = sum(c[n, i, j] * u_hat[n, i, j] for i in range(I))
                v[n, j] = squash(s_j)
            for i in range(I):
                for j in range(J):
                    b[n][i][j] += float(u_hat[n, i, j] @ v[n, j])
    return v, c


@pytest.mark.parametrize("iterations", [1, 2, 3, 5])
def test_equals_explicit_procedure_1(rng, iterations):
    u_hat = torch.randn(2, 6, 3, 4, generator=rng, dtype=torch.float64)
    v, c = dynamic_routing(u_hat, iterations)
    v_ref, c_ref = routing_by_loops(u_hat, iterations)
    torch.testing.assert_close(v, v_ref)
    torch.testing.assert_close(c, c_ref)


def test_shapes_and_couplings_sum_to_one_over_j(rng):
    u_hat = torch.randn(3, 1152, 10, 16, generator=rng)
    v, c = dynamic_routing(u_hat, 3)
    assert v.shape == (3, 10, 16) and c.shape == (3, 1152, 10)
    torch.testing.assert_close(c.sum(dim=2), torch.ones(3, 1152))
    assert (v.norm(dim=-1) < 1).all()


def test_one_iteration_is_uniform_coupling(rng):
    u_hat = torch.randn(2, 5, 4, 3, generator=rng)
    v, c = dynamic_routing(u_hat, 1)
    torch.testing.assert_close(c, torch.full_like(c, 0.25))
    torch.testing.assert_close(v, squash(u_hat.mean(dim=1) * 5 * 0.25))


def test_routing_concentrates_on_agreeing_output():
    # every input predicts the same vector for output 0 and random vectors for output 1
    torch.manual_seed(0)
    u_hat = torch.randn(1, 20, 2, 4)
    u_hat[:, :, 0] = torch.tensor([2.0, 0.0, 0.0, 0.0])
    _, c1 = dynamic_routing(u_hat, 1)
    _, c3 = dynamic_routing(u_hat, 3)
    assert c3[0, :, 0].mean() > c1[0, :, 0].mean() + 0.1


def test_gradcheck_float64(rng):
    # without detaching, autograd's gradient is the true derivative of the whole procedure
    u_hat = torch.randn(2, 3, 3, 4, generator=rng, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda u: dynamic_routing(u, 3, detach_inner=False)[0], (u_hat,))
    assert torch.autograd.gradcheck(lambda u: dynamic_routing(u, 3, detach_inner=False)[1], (u_hat,))


def test_detached_gradient_is_not_the_full_derivative(rng):
    # with detach_inner=True the gradient deliberately ignores how c depends on u_hat
    u_hat = torch.randn(2, 3, 3, 4, generator=rng, dtype=torch.float64, requires_grad=True)
    with pytest.raises(GradcheckError):
        torch.autograd.gradcheck(lambda u: dynamic_routing(u, 3, detach_inner=True)[0], (u_hat,))


def test_detach_semantics(rng):
    u_hat = torch.randn(2, 6, 3, 4, generator=rng, dtype=torch.float64)
    grads = {}
    for detach in (True, False):
        x = u_hat.clone().requires_grad_()
        v, _ = dynamic_routing(x, 3, detach_inner=detach)
        v.pow(2).sum().backward()
        grads[detach] = x.grad
    # the forward values are identical; only the gradient paths differ
    torch.testing.assert_close(dynamic_routing(u_hat, 3, True)[0], dynamic_routing(u_hat, 3, False)[0])
    assert not torch.allclose(grads[True], grads[False])
    # detached: the gradient equals that of the last iteration with c held constant
    x = u_hat.clone().requires_grad_()
    _, c = dynamic_routing(u_hat, 3)
    squash((c.unsqueeze(-1) * x).sum(dim=1)).pow(2).sum().backward()
    torch.testing.assert_close(grads[True], x.grad)
    # with one iteration there is nothing to detach
    a = u_hat.clone().requires_grad_()
    b = u_hat.clone().requires_grad_()
    dynamic_routing(a, 1, True)[0].sum().backward()
    dynamic_routing(b, 1, False)[0].sum().backward()
    torch.testing.assert_close(a.grad, b.grad)


@pytest.mark.parametrize("u_hat, iterations, error, words", [
    (torch.zeros(2, 3, 4), 3, ValueError, r"u_hat must be a 4-D tensor \(B, I, J, D\)"),
    ("tensor", 3, TypeError, "u_hat must be a torch.Tensor"),
    (torch.zeros(2, 3, 4, 5, dtype=torch.int64), 3, TypeError, "floating-point"),
    (torch.zeros(0, 3, 4, 5), 3, ValueError, "empty batch"),
    (torch.zeros(1, 2, 2, 2), 0, ValueError, "routing_iterations must be >= 1"),
    (torch.zeros(1, 2, 2, 2), 2.0, TypeError, "routing_iterations must be an int"),
])
def test_bad_inputs(u_hat, iterations, error, words):
    with pytest.raises(error, match=words):
        dynamic_routing(u_hat, iterations)

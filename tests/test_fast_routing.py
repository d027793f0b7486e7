"""The fast routing path (what DigitCaps runs) equals the readable one (what the lessons teach)."""

import pytest
import torch

from capsedu import DigitCaps, dynamic_routing
from capsedu.nets.routing import dynamic_routing_fast

SHAPES = [(2, 6, 3, 4), (3, 1152, 10, 16), (1, 1, 1, 1), (4, 5, 1, 3), (2, 7, 2, 1)]


def _values_and_grads(fn, u_hat, iterations, detach_inner, weights_v, weights_c):
    u_hat = u_hat.detach().clone().requires_grad_()
    v, c = fn(u_hat, iterations, detach_inner)
    loss = (v * weights_v).sum() + (c * weights_c).sum()
    (grad,) = torch.autograd.grad(loss, u_hat, allow_unused=True)
    return v, c, torch.zeros_like(u_hat) if grad is None else grad


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("iterations", [1, 2, 3, 5])
@pytest.mark.parametrize("detach_inner", [True, False])
def test_fast_equals_readable_values_and_gradients(rng, shape, iterations, detach_inner):
    u_hat = torch.randn(*shape, generator=rng, dtype=torch.float64)
    batch, num_in, num_out, dim = shape
    weights_v = torch.randn(batch, num_out, dim, generator=rng, dtype=torch.float64)
    weights_c = torch.randn(batch, num_in, num_out, generator=rng, dtype=torch.float64)
    readable = _values_and_grads(dynamic_routing, u_hat, iterations, detach_inner, weights_v, weights_c)
    fast = _values_and_grads(dynamic_routing_fast, u_hat, iterations, detach_inner, weights_v, weights_c)
    for name, a, b in zip(["v", "c", "grad u_hat"], readable, fast):
        torch.testing.assert_close(b, a, msg=lambda m, name=name: f"{name}: {m}")


def test_gradients_really_differ_between_detach_settings(rng):
    """Guards the test above: the two detach settings must give different gradients."""
    u_hat = torch.randn(2, 6, 3, 4, generator=rng, dtype=torch.float64)
    weights_v = torch.randn(2, 3, 4, generator=rng, dtype=torch.float64)
    zeros_c = torch.zeros(2, 6, 3, dtype=torch.float64)
    g_detached = _values_and_grads(dynamic_routing_fast, u_hat, 3, True, weights_v, zeros_c)[2]
    g_full = _values_and_grads(dynamic_routing_fast, u_hat, 3, False, weights_v, zeros_c)[2]
    assert not torch.allclose(g_detached, g_full)


def test_fast_gradcheck_full_backprop(rng):
    u_hat = torch.randn(2, 4, 3, 2, generator=rng, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda u: dynamic_routing_fast(u, 3, detach_inner=False)[0], (u_hat,))
    assert torch.autograd.gradcheck(lambda u: dynamic_routing_fast(u, 3, detach_inner=False)[1], (u_hat,))


def test_fast_equals_readable_in_float32_at_paper_size(rng):
    u_hat = 0.05 * torch.randn(4, 1152, 10, 16, generator=rng)
    v, c = dynamic_routing(u_hat, 3)
    v_fast, c_fast = dynamic_routing_fast(u_hat, 3)
    torch.testing.assert_close(v_fast, v)
    torch.testing.assert_close(c_fast, c)


def test_digit_caps_uses_a_path_equal_to_the_readable_routing(rng):
    torch.manual_seed(0)
    layer = DigitCaps(12, 4, 3, 5, num_iterations=3).double()
    u = torch.randn(2, 12, 4, generator=rng, dtype=torch.float64, requires_grad=True)
    v, c = layer(u)
    v_ref, c_ref = dynamic_routing(layer.predict(u), 3, detach_inner=True)
    torch.testing.assert_close(v, v_ref)
    torch.testing.assert_close(c, c_ref)
    grads = torch.autograd.grad(v.square().sum(), [u, layer.W])
    grads_ref = torch.autograd.grad(v_ref.square().sum(), [u, layer.W])
    for got, expected in zip(grads, grads_ref):
        torch.testing.assert_close(got, expected)


def test_predict_equals_per_capsule_matrix_products(rng):
    layer = DigitCaps(7, 3, 4, 5).double()
    u = torch.randn(2, 7, 3, generator=rng, dtype=torch.float64)
    expected = torch.stack([torch.stack([torch.stack([layer.W[i, j] @ u[n, i] for j in range(4)])
                                         for i in range(7)]) for n in range(2)])
    torch.testing.assert_close(layer.predict(u), expected)


@pytest.mark.parametrize("u_hat, iterations, error, match", [
    (torch.zeros(2, 3, 4), 3, ValueError, r"4-D tensor \(B, I, J, D\)"),
    (torch.zeros(0, 3, 4, 5), 3, ValueError, "empty batch"),
    (torch.zeros(1, 3, 4, 5, dtype=torch.long), 3, TypeError, "floating-point"),
    (torch.zeros(1, 3, 4, 5), 0, ValueError, "num_iterations must be >= 1"),
    (torch.zeros(1, 3, 4, 5), 2.0, TypeError, "num_iterations must be an int"),
])
def test_fast_rejects_bad_input(u_hat, iterations, error, match):
    with pytest.raises(error, match=match):
        dynamic_routing_fast(u_hat, iterations)

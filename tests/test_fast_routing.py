"""The fast path (what DigitCaps runs) equals the readable routing (what the lessons teach)."""

import pytest
import torch

from capsedu import DigitCaps, dynamic_routing
from capsedu.nets.routing_fast import factored_routing

# (B, I, J, D_out, D_in): small, single capsules on either side, a batch of one, the paper's size
SHAPES = [(2, 6, 3, 4, 2), (3, 1152, 10, 16, 8), (1, 1, 1, 1, 1), (4, 5, 1, 3, 2),
          (2, 1, 4, 2, 3), (1, 7, 2, 1, 1)]


def _readable(W, u, iterations):
    return dynamic_routing(torch.einsum("ijdk,bik->bijd", W, u), iterations, detach_inner=True)


def _values_and_grads(fn, W, u, iterations, weights_v, weights_c):
    W, u = W.detach().clone().requires_grad_(), u.detach().clone().requires_grad_()
    v, c = fn(W, u, iterations)
    loss = (v * weights_v).sum() + (c * weights_c).sum()
    return (v, c, *torch.autograd.grad(loss, [W, u]))


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("iterations", [1, 2, 3, 5])
def test_fast_equals_readable_values_and_gradients(rng, shape, iterations):
    batch, num_in, num_out, dim, dim_in = shape
    W = 0.3 * torch.randn(num_in, num_out, dim, dim_in, generator=rng, dtype=torch.float64)
    u = torch.randn(batch, num_in, dim_in, generator=rng, dtype=torch.float64)
    weights_v = torch.randn(batch, num_out, dim, generator=rng, dtype=torch.float64)
    weights_c = torch.randn(batch, num_in, num_out, generator=rng, dtype=torch.float64)
    readable = _values_and_grads(_readable, W, u, iterations, weights_v, weights_c)
    fast = _values_and_grads(factored_routing, W, u, iterations, weights_v, weights_c)
    for name, a, b in zip(["v", "c", "grad W", "grad u"], readable, fast):
        torch.testing.assert_close(b, a, msg=lambda m, name=name: f"{name}: {m}")


def test_the_couplings_really_change_across_iterations(rng):
    """Guards the test above: with r > 1 the couplings are far from uniform, so an
    implementation that skipped the agreement step could not pass it."""
    W = 0.3 * torch.randn(6, 3, 4, 2, generator=rng, dtype=torch.float64)
    u = torch.randn(2, 6, 2, generator=rng, dtype=torch.float64)
    _, c = factored_routing(W, u, 5)
    assert (c - 1 / 3).abs().max() > 0.1


def test_fast_equals_readable_in_float32_at_paper_size(rng):
    W = 0.05 * torch.randn(1152, 10, 16, 8, generator=rng)
    u = torch.randn(4, 1152, 8, generator=rng) / 3
    v, c = _readable(W, u, 3)
    v_fast, c_fast = factored_routing(W, u, 3)
    torch.testing.assert_close(v_fast, v)
    torch.testing.assert_close(c_fast, c)


@pytest.mark.parametrize("detach_inner", [True, False])
def test_digit_caps_equals_the_readable_routing(rng, detach_inner):
    layer = DigitCaps(12, 4, 3, 5, routing_iterations=3, detach_inner=detach_inner).double()
    with torch.no_grad():
        layer.W.normal_(0, 0.3, generator=rng)
    u = torch.randn(2, 12, 4, generator=rng, dtype=torch.float64, requires_grad=True)
    v, c = layer(u)
    v_ref, c_ref = dynamic_routing(layer.prediction_vectors(u), 3, detach_inner=detach_inner)
    torch.testing.assert_close(v, v_ref)
    torch.testing.assert_close(c, c_ref)
    grads = torch.autograd.grad(v.square().sum(), [u, layer.W])
    grads_ref = torch.autograd.grad(v_ref.square().sum(), [u, layer.W])
    for got, expected in zip(grads, grads_ref):
        torch.testing.assert_close(got, expected)


def test_detach_settings_give_different_gradients(rng):
    """Guards the test above: detach_inner=False must not quietly take the fast path."""
    grads = []
    for detach_inner in (True, False):
        layer = DigitCaps(12, 4, 3, 5, routing_iterations=3, detach_inner=detach_inner).double()
        with torch.no_grad():
            layer.W.copy_(0.3 * torch.randn(12, 3, 5, 4, generator=torch.Generator().manual_seed(1),
                                            dtype=torch.float64))
        u = torch.randn(2, 12, 4, generator=torch.Generator().manual_seed(2), dtype=torch.float64,
                        requires_grad=True)
        grads.append(torch.autograd.grad(layer(u)[0].square().sum(), u)[0])
    assert not torch.allclose(grads[0], grads[1])


def test_prediction_vectors_equal_per_capsule_matrix_products(rng):
    layer = DigitCaps(7, 3, 4, 5).double()
    u = torch.randn(2, 7, 3, generator=rng, dtype=torch.float64)
    expected = torch.stack([torch.stack([torch.stack([layer.W[i, j] @ u[n, i] for j in range(4)])
                                         for i in range(7)]) for n in range(2)])
    torch.testing.assert_close(layer.prediction_vectors(u), expected)


@pytest.mark.parametrize("u, iterations, error, match", [
    (torch.zeros(2, 3), 3, ValueError, r"u must be a 3-D tensor \(B, 6, 4\)"),
    (torch.zeros(0, 6, 4), 3, ValueError, "empty batch"),
    (torch.zeros(1, 6, 4, dtype=torch.long), 3, TypeError, "floating-point"),
    (torch.zeros(1, 6, 4), 0, ValueError, "routing_iterations must be >= 1"),
    (torch.zeros(1, 6, 4), 2.0, TypeError, "routing_iterations must be an int"),
])
def test_digit_caps_rejects_bad_input(u, iterations, error, match):
    with pytest.raises(error, match=match):
        DigitCaps(6, 4, 3, 5)(u, iterations)


def test_a_second_backward_through_the_same_graph_raises_not_lies(rng):
    """The backward writes W^T ds into the saved x; a retained graph must not reuse it silently."""
    W = (0.3 * torch.randn(6, 3, 4, 2, generator=rng)).requires_grad_()
    u = torch.randn(2, 6, 2, generator=rng)
    v, _ = factored_routing(W, u, 3)
    loss = v.square().sum()
    (first,) = torch.autograd.grad(loss, W, retain_graph=True)
    with pytest.raises(RuntimeError, match="inplace operation"):
        torch.autograd.grad(loss, W)
    v_again, _ = factored_routing(W, u, 3)
    torch.testing.assert_close(torch.autograd.grad(v_again.square().sum(), W)[0], first)


def test_digit_caps_keeps_W_in_the_fast_paths_memory_order_without_changing_what_it_is():
    """W's shape, values (for a seed) and state dict are as always; only its memory order differs,
    so the fast path reads W, and autograd keeps its gradient, without a copy."""
    torch.manual_seed(0)
    layer = DigitCaps(6, 2, 3, 4)
    torch.manual_seed(0)
    assert torch.equal(layer.W, 0.01 * torch.randn(6, 3, 4, 2))  # the same initial values
    assert layer.state_dict()["W"].shape == (6, 3, 4, 2)
    assert layer.W.permute(1, 3, 0, 2).is_contiguous()  # (J, D_in, I, D_out) in memory
    layer(torch.randn(5, 6, 2))[0].square().sum().backward()
    assert layer.W.grad.stride() == layer.W.stride()  # the gradient was kept, not re-laid out
    copy = DigitCaps(6, 2, 3, 4)
    copy.load_state_dict({"W": layer.W.detach().contiguous()})  # an old, contiguous checkpoint
    assert torch.equal(copy.W, layer.W) and copy.W.stride() == layer.W.stride()

"""The factored routing equals the readable one (what the lessons teach), for both settings of
detach_inner, and DigitCaps runs whichever its config chooses."""

import pytest
import torch

from capsedu import CapsNet, CapsNetConfig, DigitCaps, dynamic_routing
from capsedu.nets.routing_fast import factored_routing

pytestmark = pytest.mark.unit

# (B, I, J, D_out, D_in): small, single capsules on either side, a batch of one, the paper's size
SHAPES = [(2, 6, 3, 4, 2), (3, 1152, 10, 16, 8), (1, 1, 1, 1, 1), (4, 5, 1, 3, 2),
          (2, 1, 4, 2, 3), (1, 7, 2, 1, 1)]


def _readable(W, u, iterations, detach_inner):
    return dynamic_routing(torch.einsum("ijdk,bik->bijd", W, u), iterations, detach_inner)


def _values_and_grads(fn, W, u, iterations, detach_inner, weights_v, weights_c):
    W, u = W.detach().clone().requires_grad_(), u.detach().clone().requires_grad_()
    v, c = fn(W, u, iterations, detach_inner)
    loss = (v * weights_v).sum() + (c * weights_c).sum()
    return (v, c, *torch.autograd.grad(loss, [W, u]))


@pytest.mark.parametrize("detach_inner", [True, False])
@pytest.mark.parametrize("iterations", [1, 2, 3])
@pytest.mark.parametrize("shape", SHAPES)
def test_factored_equals_readable_values_and_gradients(rng, shape, iterations, detach_inner):
    batch, num_in, num_out, dim, dim_in = shape
    W = 0.3 * torch.randn(num_in, num_out, dim, dim_in, generator=rng, dtype=torch.float64)
    u = torch.randn(batch, num_in, dim_in, generator=rng, dtype=torch.float64)
    weights_v = torch.randn(batch, num_out, dim, generator=rng, dtype=torch.float64)
    weights_c = torch.randn(batch, num_in, num_out, generator=rng, dtype=torch.float64)
    readable = _values_and_grads(_readable, W, u, iterations, detach_inner, weights_v, weights_c)
    factored = _values_and_grads(factored_routing, W, u, iterations, detach_inner, weights_v, weights_c)
    for name, a, b in zip(["v", "c", "grad W", "grad u"], readable, factored):
        torch.testing.assert_close(b, a, msg=lambda m, name=name: f"{name}: {m}")


def test_five_iterations_without_detaching_are_equal_too(rng):
    W = 0.3 * torch.randn(6, 3, 4, 2, generator=rng, dtype=torch.float64)
    u = torch.randn(2, 6, 2, generator=rng, dtype=torch.float64)
    ones_v, ones_c = torch.ones(2, 3, 4, dtype=torch.float64), torch.ones(2, 6, 3, dtype=torch.float64)
    for detach_inner in (True, False):
        readable = _values_and_grads(_readable, W, u, 5, detach_inner, ones_v, ones_c)
        factored = _values_and_grads(factored_routing, W, u, 5, detach_inner, ones_v, ones_c)
        for a, b in zip(readable, factored):
            torch.testing.assert_close(b, a)


def test_the_couplings_and_gradients_really_change_across_iterations(rng):
    """Guards the tests above: with r > 1 the couplings are far from uniform, and detaching
    changes the gradient, so an implementation that skipped the agreement step, or that ignored
    detach_inner, could not pass them."""
    W = 0.3 * torch.randn(6, 3, 4, 2, generator=rng, dtype=torch.float64)
    u = torch.randn(2, 6, 2, generator=rng, dtype=torch.float64)
    _, c = factored_routing(W, u, 5)
    assert (c - 1 / 3).abs().max() > 0.1
    weights = torch.randn(2, 3, 4, generator=rng, dtype=torch.float64)
    ones_c = torch.zeros(2, 6, 3, dtype=torch.float64)
    detached = _values_and_grads(factored_routing, W, u, 3, True, weights, ones_c)
    full = _values_and_grads(factored_routing, W, u, 3, False, weights, ones_c)
    assert not torch.allclose(detached[2], full[2]) and not torch.allclose(detached[3], full[3])


def test_factored_equals_readable_in_float32_at_paper_size(rng):
    W = 0.05 * torch.randn(1152, 10, 16, 8, generator=rng)
    u = torch.randn(4, 1152, 8, generator=rng) / 3
    v, c = _readable(W, u, 3, True)
    v_fast, c_fast = factored_routing(W, u, 3)
    torch.testing.assert_close(v_fast, v)
    torch.testing.assert_close(c_fast, c)


@pytest.mark.parametrize("routing", ["readable", "factored"])
@pytest.mark.parametrize("detach_inner", [True, False])
def test_digit_caps_runs_every_combination_equal_to_the_readable_routing(rng, routing, detach_inner):
    layer = DigitCaps(12, 4, 3, 5, routing_iterations=3, detach_inner=detach_inner, routing=routing).double()
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


def test_the_config_chooses_the_routing_independently_of_detach_inner(monkeypatch):
    """CapsNetConfig.routing alone picks the implementation; detach_inner reaches it unchanged."""
    import capsedu.nets.routing as routing_module

    calls = []
    for name in ("dynamic_routing", "factored_routing"):
        original = getattr(routing_module, name)
        monkeypatch.setattr(routing_module, name, lambda *args, name=name, original=original:
                            calls.append((name, args[-1])) or original(*args))
    images = torch.rand(2, 1, 28, 28)
    for routing in ("readable", "factored"):
        for detach_inner in (True, False):
            config = CapsNetConfig(conv1_channels=8, primary_types=2, primary_dim=4,
                                   routing=routing, detach_inner=detach_inner)
            CapsNet(config)(images)
    assert calls == [("dynamic_routing", True), ("dynamic_routing", False),
                     ("factored_routing", True), ("factored_routing", False)]
    assert CapsNetConfig().routing == CapsNetConfig.cpu().routing == "factored"


def test_digit_caps_rejects_an_unknown_routing():
    with pytest.raises(ValueError, match=r"routing must be one of \('readable', 'factored'\), got 'fast'"):
        DigitCaps(6, 4, 3, 5, routing="fast")


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
@pytest.mark.parametrize("routing", ["readable", "factored"])
def test_digit_caps_rejects_bad_input(u, iterations, error, match, routing):
    with pytest.raises(error, match=match):
        DigitCaps(6, 4, 3, 5, routing=routing)(u, iterations)


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


@pytest.mark.parametrize("detach_inner", [True, False])
def test_digit_caps_W_is_a_plain_contiguous_parameter_in_the_lessons_layout(detach_inner):
    """W (I, J, D_out, D_in) as lesson 03 draws it: flat views work, its gradient has its layout,
    and a state dict in the old permuted memory order (earlier checkpoints) loads unchanged."""
    torch.manual_seed(0)
    layer = DigitCaps(6, 2, 3, 4, detach_inner=detach_inner)
    torch.manual_seed(0)
    assert torch.equal(layer.W, 0.01 * torch.randn(6, 3, 4, 2))  # the same initial values as ever
    assert layer.W.is_contiguous() and layer.W.view(-1).shape == (6 * 3 * 4 * 2,)
    assert layer.state_dict()["W"].shape == (6, 3, 4, 2)
    layer(torch.randn(5, 6, 2))[0].square().sum().backward()
    assert layer.W.grad.is_contiguous() and layer.W.grad.shape == layer.W.shape
    old = torch.empty(3, 2, 6, 4).permute(2, 0, 3, 1).copy_(layer.W.detach())  # (I, J, D_out, D_in), strided
    copy = DigitCaps(6, 2, 3, 4)
    copy.load_state_dict({"W": old})
    assert torch.equal(copy.W, layer.W) and copy.W.is_contiguous()

"""The NumPy capsule layer (lesson 10): forward equal to torch, every backward equal to autograd and
to finite differences."""

import numpy as np
import pytest
import torch

from capsedu import dynamic_routing, margin_loss, squash
from capsedu.nets import numpy_caps as nc

pytestmark = pytest.mark.unit

SHAPES = [(2, 5, 3, 4, 2), (1, 1, 1, 2, 1), (3, 6, 1, 3, 2), (2, 1, 4, 2, 3), (4, 32, 10, 16, 8)]


def routed(W, u, r, detach):
    u_hat, predicted = nc.prediction_vectors(W, u)
    v, c, cache = nc.dynamic_routing(u_hat, r, detach)
    return v, c, cache, predicted


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("iterations", [1, 2, 3])
@pytest.mark.parametrize("detach_inner", [True, False])
def test_routing_and_prediction_match_torch_values_and_gradients(shape, iterations, detach_inner):
    B, I, J, D_out, D_in = shape
    rng = np.random.default_rng(sum(shape) + iterations)
    W, u, g = rng.normal(0, 0.5, (I, J, D_out, D_in)), rng.normal(0, 1, (B, I, D_in)), rng.normal(size=(B, J, D_out))
    v, c, cache, predicted = routed(W, u, iterations, detach_inner)
    dW, du = nc.prediction_vectors_backward(nc.dynamic_routing_backward(g, cache), predicted)
    W_t, u_t = torch.tensor(W, requires_grad=True), torch.tensor(u, requires_grad=True)
    v_t, c_t = dynamic_routing(torch.einsum("ijdk,bik->bijd", W_t, u_t), iterations,
                               detach_inner=detach_inner)
    (v_t * torch.tensor(g)).sum().backward()
    for name, ours, theirs in [("v", v, v_t), ("c", c, c_t), ("dW", dW, W_t.grad), ("du", du, u_t.grad)]:
        np.testing.assert_allclose(ours, theirs.detach().numpy(), rtol=1e-9, atol=1e-12, err_msg=name)


@pytest.mark.parametrize("detach_inner", [True, False])
def test_routing_backward_matches_finite_differences(detach_inner):
    rng = np.random.default_rng(1)
    W, u, g = rng.normal(0, 0.5, (3, 4, 3, 2)), rng.normal(0, 1, (2, 3, 2)), rng.normal(size=(2, 4, 3))

    def loss() -> float:
        return float((routed(W, u, 3, detach_inner)[0] * g).sum())

    _, _, cache, predicted = routed(W, u, 3, detach_inner)
    dW, du = nc.prediction_vectors_backward(nc.dynamic_routing_backward(g, cache), predicted)
    if detach_inner:  # the detached gradient is not the true derivative of this loss
        check = nc.grad_check(loss, {"W": W, "u": u}, {"W": dW, "u": du})
        assert check.max_relative_error > 1e-3, check
        return
    check = nc.grad_check(loss, {"W": W, "u": u}, {"W": dW, "u": du})
    assert check.max_relative_error < 1e-6 and check.checked == W.size + u.size, check


def test_detach_inner_really_changes_the_gradient():
    rng = np.random.default_rng(2)
    u_hat, g = rng.normal(0, 0.5, (2, 5, 3, 4)), rng.normal(size=(2, 3, 4))
    grads = [nc.dynamic_routing_backward(g, nc.dynamic_routing(u_hat, 3, d)[2]) for d in (True, False)]
    assert not np.allclose(*grads)
    same = [nc.dynamic_routing_backward(g, nc.dynamic_routing(u_hat, 1, d)[2]) for d in (True, False)]
    np.testing.assert_allclose(*same)  # one iteration: nothing to detach


def test_squash_matches_torch_including_the_zero_vector():
    rng = np.random.default_rng(3)
    s, dv = rng.normal(size=(4, 3, 5)), rng.normal(size=(4, 3, 5))
    s[0, 0] = 0.0
    v, cache = nc.squash(s)
    s_t = torch.tensor(s, requires_grad=True)
    (squash(s_t) * torch.tensor(dv)).sum().backward()
    np.testing.assert_allclose(v, squash(torch.tensor(s)).numpy(), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(nc.squash_backward(dv, cache), s_t.grad.numpy(), rtol=1e-9, atol=1e-12)
    # finite differences away from 0: at the zero vector squash grows like |s|^3 / sqrt(eps), so a
    # central difference is the inexact side there (checked against autograd above instead)
    s[0, 0] = rng.normal(size=5)
    _, cache = nc.squash(s)
    check = nc.grad_check(lambda: float((nc.squash(s)[0] * dv).sum()), {"s": s},
                          {"s": nc.squash_backward(dv, cache)})
    assert check.max_relative_error < 1e-6, check


@pytest.mark.parametrize("targets", [np.array([3, 0, 9]), np.array([[0, 1] + [0] * 8, [1] * 2 + [0] * 8,
                                                                   [0] * 9 + [1]])])
def test_margin_loss_and_lengths_match_torch(targets):
    rng = np.random.default_rng(4)
    v = rng.normal(0, 0.4, (3, 10, 16))
    norm, length_cache = nc.capsule_lengths(v)
    loss, cache = nc.margin_loss(norm, targets)
    dv = nc.capsule_lengths_backward(nc.margin_loss_backward(cache), length_cache)
    v_t = torch.tensor(v, requires_grad=True)
    loss_t = margin_loss(torch.sqrt((v_t * v_t).sum(-1) + 1e-8), torch.tensor(targets))
    loss_t.backward()
    assert loss == pytest.approx(float(loss_t.detach()), rel=1e-12)
    np.testing.assert_allclose(dv, v_t.grad.numpy(), rtol=1e-9, atol=1e-12)


def test_float32_works_and_stays_float32():
    rng = np.random.default_rng(5)
    W, u = rng.normal(0, 0.5, (4, 3, 4, 2)).astype(np.float32), rng.normal(size=(2, 4, 2)).astype(np.float32)
    v, c, cache, predicted = routed(W, u, 3, False)
    dW, du = nc.prediction_vectors_backward(nc.dynamic_routing_backward(np.ones_like(v), cache), predicted)
    assert v.dtype == c.dtype == dW.dtype == du.dtype == np.float32
    v64, *_ = routed(W.astype(np.float64), u.astype(np.float64), 3, False)
    np.testing.assert_allclose(v, v64, rtol=1e-5, atol=1e-6)


def test_grad_check_names_the_worst_entry():
    x = np.array([1.0, 2.0, 3.0])
    check = nc.grad_check(lambda: float((x ** 2).sum()), {"x": x}, {"x": np.array([2.0, 4.0, 7.0])})
    assert check.worst == "x[2]"
    assert check.max_relative_error == pytest.approx(1 / 13, rel=1e-4)


@pytest.mark.parametrize("call, error, match", [
    (lambda: nc.prediction_vectors(np.zeros((3, 2, 4, 2)), np.zeros((1, 3, 5))), ValueError, r"u must have shape \(B, 3, 2\)"),
    (lambda: nc.prediction_vectors(np.zeros((3, 2, 4)), np.zeros((1, 3, 2))), ValueError, "W must be a 4-D array"),
    (lambda: nc.prediction_vectors(np.zeros((3, 2, 4, 2)), np.zeros((0, 3, 2))), ValueError, "empty batch"),
    (lambda: nc.dynamic_routing(np.full((1, 2, 2, 2), np.nan)), ValueError, "u_hat contains 8 NaN"),
    (lambda: nc.dynamic_routing(np.zeros((1, 2, 2, 2)), 0), ValueError, "routing_iterations must be >= 1"),
    (lambda: nc.dynamic_routing(np.zeros((1, 2, 2, 2), dtype=np.int64)), TypeError, "must hold floats"),
    (lambda: nc.squash([1.0, 2.0]), ValueError, "s must be a numpy.ndarray"),
    (lambda: nc.margin_loss(np.zeros((2, 10)), np.array([1, 10])), ValueError, r"targets must be in \[0, 9\]"),
])
def test_bad_input_is_named(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_a_gradient_of_the_wrong_shape_is_refused():
    _, _, cache = nc.dynamic_routing(np.zeros((2, 3, 4, 5)))
    with pytest.raises(ValueError, match=r"dv must have the shape of the forward output \(2, 4, 5\)"):
        nc.dynamic_routing_backward(np.zeros((2, 4)), cache)
    _, squashed = nc.squash(np.ones((2, 3)))
    with pytest.raises(ValueError, match="dv must have the shape"):
        nc.squash_backward(np.ones((3, 2)), squashed)


def test_the_module_imports_only_numpy_and_the_standard_library():
    import ast
    import sys
    from pathlib import Path

    tree = ast.parse(Path(nc.__file__).read_text())
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert imported - set(sys.stdlib_module_names) - {"__future__"} == {"numpy", "capsedu"}
    numbers = ast.parse((Path(nc.__file__).parents[1] / "_numbers.py").read_text())  # its one capsedu import
    assert {a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module == "capsedu._numbers"
            for a in n.names} == {"require_int"}
    assert not [n for n in ast.walk(numbers) if isinstance(n, ast.Import | ast.ImportFrom)
                and getattr(n, "module", None) != "__future__"], "capsedu._numbers imports only __future__"

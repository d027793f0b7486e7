"""Tests for capsedu.course.checks.backprop: right answers pass, each forgotten term gets its own hint."""

import numpy as np
import pytest

from capsedu.course.checks import backprop
from capsedu.course.checks._kit import STUB_HINT
from capsedu.course.checks.backprop import check_routing_backward, check_squash_backward
from capsedu.nets import numpy_caps as nc

pytestmark = pytest.mark.unit


def squash_only_scale(dv, cache):
    return cache["scale"] * dv


def squash_sqrt_q(dv, cache):
    s, q = cache["s"], cache["q"]
    norm = np.sqrt(q)
    scale = q / ((1 + q) * norm)
    dscale_dq = (1 - q) / (2 * norm * (1 + q) ** 2)
    return scale * dv + 2 * dscale_dq * (dv * s).sum(-1, keepdims=True) * s


def stub(dv, cache):
    raise NotImplementedError


def test_right_answers_pass(capsys):
    assert check_squash_backward(nc.squash_backward)
    assert "✅" in capsys.readouterr().out
    full = lambda dv, cache: backprop._routing_backward(dv, cache)  # noqa: E731
    assert check_routing_backward(full)
    assert check_routing_backward(lambda dv, cache: nc.dynamic_routing_backward(dv, cache))


@pytest.mark.parametrize("wrong, hint", [
    (squash_only_scale, "you kept only scale·dv"),
    (lambda dv, c: nc.squash_backward(dv, c) - c["scale"] * dv / 2 * 0 - 0.5 * (
        nc.squash_backward(dv, c) - c["scale"] * dv), "lacks the factor 2"),
    (lambda dv, c: 2 * c["scale"] * dv - nc.squash_backward(dv, c), "sign of the second term"),
    (squash_sqrt_q, "NaN or inf"),
    (stub, STUB_HINT),
    (lambda dv, c: dv.sum(-1), "must have the shape"),
    (lambda dv, c: 1.01 * nc.squash_backward(dv, c), "gradient check: largest relative error"),
])
def test_squash_hints(wrong, hint):
    result = check_squash_backward(wrong, quiet=True)
    assert not result and hint in result.message, result.message


@pytest.mark.parametrize("wrong", list(backprop.ROUTING_HINTS))
def test_each_forgotten_routing_term_is_named(wrong):
    result = check_routing_backward(lambda dv, cache: backprop._routing_backward(dv, cache, wrong), quiet=True)
    assert not result, wrong
    assert backprop.ROUTING_HINTS[wrong] in result.message, result.message
    assert "gradient check: largest relative error" in result.message


def test_routing_hints_for_stubs_and_shapes():
    assert STUB_HINT in check_routing_backward(stub, quiet=True).message
    message = check_routing_backward(lambda dv, cache: dv, quiet=True).message
    assert "du_hat must have the shape" in message


def test_the_reference_variants_equal_capsedu_when_nothing_is_broken():
    rng = np.random.default_rng(0)
    _, _, cache = nc.dynamic_routing(rng.normal(size=(2, 4, 3, 5)), 3, detach_inner=False)
    dv = rng.normal(size=(2, 3, 5))
    np.testing.assert_allclose(backprop._routing_backward(dv, cache), nc.dynamic_routing_backward(dv, cache))

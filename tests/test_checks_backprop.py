"""Tests for capsedu.course.checks.backprop: right answers pass, each forgotten term gets its own hint."""

import numpy as np
import pytest

from capsedu.course.checks import backprop
from capsedu.course.checks._kit import STUB_HINT
from capsedu.course.checks.backprop import (
    check_batch_test,
    check_coupling_test,
    check_routing_backward,
    check_squash_backward,
)
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


# --- Exercise 1: black-box tests of a routing function ---------------------------------------------

def _votes(seed, batch=3):
    return np.random.default_rng(seed).normal(0, 0.5, (batch, 6, 4, 5))  # (B, I, J, D), I != J


def batch_test(routing):
    votes, changed = _votes(1), _votes(1)
    changed[1] = _votes(2)[1]
    return bool(np.allclose(routing(votes)[0][[0, 2]], routing(changed)[0][[0, 2]]))


def coupling_test(routing):
    return bool(np.allclose(routing(_votes(3))[1].sum(axis=2), 1.0))


def single_image_test(routing):  # a batch of one cannot see the batch mean
    votes = _votes(1, batch=1)
    return bool(np.allclose(routing(votes)[0], routing(votes.copy())[0]))


def same_image_test(routing):  # looks at the image it changed
    votes, changed = _votes(1), _votes(1)
    changed[1] = _votes(2)[1]
    return bool(np.allclose(routing(votes)[0][1], routing(changed)[0][1]))


def total_test(routing):  # the total of c, not each row
    c = routing(_votes(3))[1]
    return bool(np.isclose(c.sum(), c.shape[0] * c.shape[1]))


def input_axis_test(routing):
    return bool(np.allclose(routing(_votes(3))[1].sum(axis=1), 1.0))


def test_right_routing_tests_pass(capsys):
    assert check_batch_test(batch_test)
    assert check_coupling_test(coupling_test)
    assert capsys.readouterr().out.count("✅") == 2


@pytest.mark.parametrize("wrong, hint", [
    (single_image_test, "averages the logits over the batch"),
    (same_image_test, "rejects Procedure 1 itself"),
    (coupling_test, "averages the logits over the batch"),
    (lambda routing: not coupling_test(routing), "rejects Procedure 1 itself"),
    (lambda routing: batch_test(routing) and coupling_test(routing), "rejects a routing whose images are independent"),
    (lambda routing: 1.0, "return True"),
    (lambda routing: stub(routing, None), STUB_HINT),
])
def test_batch_test_mistakes_get_their_hint(wrong, hint):
    result = check_batch_test(wrong, quiet=True)
    assert not result and hint in result.message, result.message


@pytest.mark.parametrize("wrong, hint", [
    (input_axis_test, "rejects Procedure 1 itself"),
    (total_test, "not row by row"),
    (batch_test, "passes a softmax over the input capsules"),
    (lambda routing: batch_test(routing) and coupling_test(routing), "its fault is elsewhere"),
    (lambda routing: stub(routing, None), STUB_HINT),
])
def test_coupling_test_mistakes_get_their_hint(wrong, hint):
    result = check_coupling_test(wrong, quiet=True)
    assert not result and hint in result.message, result.message


def test_departed_routing_without_departures_is_procedure_1():
    votes = _votes(0)
    v, c = backprop.departed_routing(votes)
    v_ref, c_ref, _ = nc.dynamic_routing(votes, 3)
    np.testing.assert_allclose(v, v_ref, atol=1e-12)
    np.testing.assert_allclose(c, c_ref, atol=1e-12)

"""Tests for capsedu.course.checks.efficient: right answers pass, typical mistakes get their own hint."""

import pytest
import torch

from capsedu import squash
from capsedu.course.checks._kit import STUB_HINT
from capsedu.course.checks.efficient import (
    attention_variant,
    check_self_attention,
    check_uniform_layer,
    uniform_layer,
)
from capsedu.nets.self_attention import efficient_squash, self_attention_routing

pytestmark = pytest.mark.unit


def uniform(layer, u, weights=None, squashing=efficient_squash, couplings=None, detach=False):
    r"""The class layer without attention, as a learner writes it; the keywords make a mistake."""
    u_hat = layer.prediction_vectors(u)
    prior = layer.prior.detach() if detach else layer.prior
    c = torch.full(u_hat.shape[:3], 1 / u_hat.shape[2])  # (B, I, J)
    w = c + prior if weights is None else weights(u_hat, prior).expand(u_hat.shape[:3])
    return squashing(torch.einsum("bij,bijd->bjd", w, u_hat)), (c if couplings is None else couplings(c, prior))


def test_check_uniform_layer_passes_and_names_mistakes(capsys):
    assert check_uniform_layer(uniform)
    cases = {"prior is missing": lambda l, u: uniform(l, u, weights=lambda h, b: 0 * b + 1 / h.shape[2]),
             "among the inputs": lambda l, u: uniform(l, u, weights=lambda h, b: 1 / h.shape[1] + b),
             "no softmax": lambda l, u: uniform(l, u, weights=lambda h, b: torch.softmax(b, 1)),
             "Eq. 1's squash": lambda l, u: uniform(l, u, squashing=squash),
             "with its attention": lambda l, u: l(u),
             "include the prior": lambda l, u: uniform(l, u, couplings=lambda c, b: c + b),
             "no gradient reached the layer's prior": lambda l, u: uniform(l, u, detach=True),
             "carry no gradient": lambda l, u: tuple(x.detach() for x in uniform(l, u)),
             "return (v, c)": lambda l, u: uniform(l, u)[0],
             "class capsules v (B, J, D)": lambda l, u: (uniform(l, u)[0].norm(dim=-1), uniform(l, u)[1])}
    for fragment, wrong in cases.items():
        result = check_uniform_layer(wrong)
        assert not result and fragment in result.message, (fragment, result.message)


def test_check_self_attention_passes_capsedus_routing_and_the_lessons_fallback():
    assert check_self_attention(self_attention_routing)
    assert check_self_attention(lambda u, b: attention_variant(u, b))
    assert check_uniform_layer(uniform_layer)


@pytest.mark.parametrize("kind, fragment", [
    ("softmax_inputs", "sum to 1 over the input capsules"),
    ("no_scale", "divide u_hat_{j|i} . u_hat_{j|k} by sqrt(D)"),
    ("no_prior", "the prior b_ij is missing"),
    ("prior_in_logits", "AFTER the softmax"),
    ("squash_first", "squashed the predictions before summing"),
    ("eq1", "Eq. 1's squash"),
])
def test_check_self_attention_names_mistakes(kind, fragment):
    result = check_self_attention(lambda u, b: attention_variant(u, b, kind=kind), quiet=True)
    assert not result and fragment in result.message, result.message


def test_check_self_attention_stub_and_shapes():
    def stub(u, b):
        raise NotImplementedError

    assert STUB_HINT in check_self_attention(stub, quiet=True).message
    assert "return a tuple (v, c)" in check_self_attention(lambda u, b: attention_variant(u, b)[0], quiet=True).message
    wrong_shape = check_self_attention(lambda u, b: (attention_variant(u, b)[0][0], attention_variant(u, b)[1]),
                                       quiet=True)
    assert "v must have shape" in wrong_shape.message
    only_v_wrong = check_self_attention(lambda u, b: (2 * attention_variant(u, b)[0], attention_variant(u, b)[1]),
                                        quiet=True)
    assert "c is right, v is not" in only_v_wrong.message

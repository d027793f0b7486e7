"""Tests for capsedu.course.checks.efficient: right answers pass, typical mistakes get their own hint."""

import pytest
import torch

from capsedu import squash
from capsedu.course.checks._kit import STUB_HINT
from capsedu.course.checks.efficient import (
    attention_variant,
    check_self_attention,
    check_uniform_couplings,
    uniform_routing,
)
from capsedu.nets.self_attention import efficient_squash, self_attention_routing

pytestmark = pytest.mark.unit


def uniform(u_hat, b):
    return efficient_squash(torch.einsum("ij,bijd->bjd", 1 / u_hat.shape[2] + b, u_hat))


def test_check_uniform_couplings_passes_and_names_mistakes(capsys):
    assert check_uniform_couplings(uniform)
    cases = {"prior is missing": lambda u, b: uniform(u, b * 0),
             "among the inputs": lambda u, b: efficient_squash(torch.einsum("ij,bijd->bjd", 1 / u.shape[1] + b, u)),
             "no softmax": lambda u, b: efficient_squash(torch.einsum("ij,bijd->bjd", torch.softmax(b, 1), u)),
             "Eq. 1's squash": lambda u, b: squash(torch.einsum("ij,bijd->bjd", 1 / u.shape[2] + b, u)),
             "class capsules v (B, J, D)": lambda u, b: uniform(u, b).norm(dim=-1),
             "s_j = sum_i (1/J + b_ij)": lambda u, b: 2 * uniform(u, b)}
    for fragment, wrong in cases.items():
        result = check_uniform_couplings(wrong)
        assert not result and fragment in result.message, (fragment, result.message)


def test_check_self_attention_passes_capsedus_routing_and_the_lessons_fallback():
    assert check_self_attention(self_attention_routing)
    assert check_self_attention(lambda u, b: attention_variant(u, b))
    assert check_uniform_couplings(uniform_routing)


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

"""Tests for capsedu.course.checks.efficient: right answers pass, typical mistakes get their own hint."""

import pytest
import torch

from capsedu import squash
from capsedu.course.checks.efficient import check_coupling_spread, check_uniform_couplings
from capsedu.nets.self_attention import efficient_squash

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


@pytest.mark.parametrize("wrong, fragment", [
    (lambda c: c.std(dim=1, correction=0).mean(), "across the IMAGES"),
    (lambda c: c.std(dim=0).mean(), "population standard deviation"),
    (lambda c: c.var(dim=0, correction=0).mean(), "variance"),
    (lambda c: c.std(correction=0), "mixes the couplings"),
    (lambda c: c.std(dim=0, correction=0), "one number"),
])
def test_check_coupling_spread_names_mistakes(wrong, fragment):
    result = check_coupling_spread(wrong)
    assert not result and fragment in result.message, result.message


def test_check_coupling_spread_passes_the_statistic():
    assert check_coupling_spread(lambda c: c.std(dim=0, correction=0).mean())
    assert check_coupling_spread(lambda c: float(((c - c.mean(0)) ** 2).mean(0).sqrt().mean()))

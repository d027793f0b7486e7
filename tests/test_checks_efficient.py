"""Tests for capsedu.course.checks.efficient: right answers pass, typical mistakes get their own hint."""

import math

import torch

from capsedu.course.checks.efficient import check_attention_couplings, check_efficient_squash
from capsedu.nets.self_attention import attention_logits, efficient_squash


def test_check_efficient_squash_passes_capsedus_squash_and_a_hand_written_one():
    assert check_efficient_squash(efficient_squash)

    def by_hand(s):
        norm = torch.sqrt((s ** 2).sum(-1, keepdim=True) + 1e-9)
        return (1 - 1 / torch.exp(norm)) * s / norm
    assert check_efficient_squash(by_hand)


def test_check_efficient_squash_hints():
    def norm(s):
        return torch.sqrt((s * s).sum(-1, keepdim=True) + 1e-8)
    cases = {
        "Eq. 1 of 2017": lambda s: norm(s) ** 2 / (1 + norm(s) ** 2) * s / norm(s),
        "multiply the unit vector": lambda s: (1 - torch.exp(-norm(s))) * s,
        "exponent's sign": lambda s: (1 - torch.exp(norm(s))) * s / norm(s),
        "zero vector gives NaN": lambda s: (1 - torch.exp(-s.norm(dim=-1, keepdim=True))) * s / s.norm(dim=-1, keepdim=True),
        "input's shape": lambda s: efficient_squash(s)[0],
        "(1 - exp(-|s|)) * s / |s|": lambda s: efficient_squash(s, dim=1),
    }
    for expected, answer in cases.items():
        result = check_efficient_squash(answer, quiet=True)
        assert not result and expected in result.message, (expected, result.message)


def reference_couplings(u_hat):
    return torch.softmax(attention_logits(u_hat), dim=2)


def test_check_attention_couplings_passes_right_answers():
    assert check_attention_couplings(reference_couplings)

    def full_matrix(u_hat):
        A = torch.einsum("bijd,bkjd->bjik", u_hat, u_hat) / math.sqrt(u_hat.shape[-1])  # (B, J, I, I)
        return torch.softmax(A.sum(-1).transpose(1, 2), dim=-1)
    assert check_attention_couplings(full_matrix)


def test_check_attention_couplings_hints():
    D = 4
    cases = {
        "over the output capsules j": lambda u: torch.softmax(attention_logits(u), dim=1),
        "sqrt(D)": lambda u: torch.softmax(attention_logits(u) * math.sqrt(D), dim=2),
        "only with itself": lambda u: torch.softmax((u * u).sum(-1) / math.sqrt(D), dim=2),
        "(B, I, J)": lambda u: reference_couplings(u).transpose(1, 2),
        "c = softmax over j": lambda u: torch.softmax(attention_logits(u) + 1.0 * torch.arange(3.0), dim=2),
    }
    for expected, answer in cases.items():
        result = check_attention_couplings(answer, quiet=True)
        assert not result and expected in result.message, (expected, result.message)

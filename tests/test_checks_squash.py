"""Tests for capsedu.course.checks.squash: right answers pass, typical mistakes get their own hint."""

import math

import pytest
import torch

from capsedu import squash
from capsedu.course.checks._kit import STUB_HINT
from capsedu.course.checks.squash import check_input_length_for, check_squash, check_votes_needed

pytestmark = pytest.mark.unit


def reference(s, eps=1e-8):
    squared = (s * s).sum(dim=-1, keepdim=True)
    return squared / (1 + squared) * s / torch.sqrt(squared + eps)


def test_check_squash_passes_for_right_answers(capsys):
    result = check_squash(reference)
    assert result.passed and result.message.startswith("✅")
    assert result.message in capsys.readouterr().out
    assert check_squash(squash)
    assert check_squash(lambda s: reference(s.double()).float())


def no_eps(s):
    norm = torch.sqrt((s * s).sum(dim=-1, keepdim=True))
    return norm ** 2 / (1 + norm ** 2) * s / norm


def eps_outside_sqrt(s):
    norm = torch.sqrt((s * s).sum(dim=-1, keepdim=True))
    return norm ** 2 / (1 + norm ** 2) * s / (norm + 1e-8)


def elementwise(s):
    return s * s / (1 + s * s) * torch.sign(s)


def no_keepdim(s):
    squared = (s * s).sum(dim=-1)  # (B, J): no keepdim
    return squared / (1 + squared) * s / torch.sqrt(squared + 1e-8)


def stub(s, eps=1e-8):
    raise NotImplementedError("write your solution here, then run the check below")


def test_check_squash_hints():
    cases = {
        "norms above 1": lambda s: (s * s).sum(-1, keepdim=True) / (1 + (s * s).sum(-1, keepdim=True)) * s,
        "direction changed": elementwise,
        "NaN at the zero vector": no_eps,
        "NaN gradient at zero: put ε inside the square root": eps_outside_sqrt,
        "||s||/(1+||s||)": lambda s: s / (1 + s.norm(dim=-1, keepdim=True)),
        "input of length 1 must give": lambda s: 0.5 * reference(s),
        "keepdim=True": lambda s: reference(s).sum(dim=-1),
        "raised": lambda s: s.nonexistent,
        "return a torch.Tensor": lambda s: reference(s).numpy(),
        "zero vector must squash to the zero vector": lambda s: reference(s) + 1e-3 * (s == 0),
        "no gradient flows": lambda s: reference(s).detach(),
        "one norm over the whole tensor": lambda s: s.norm() / (1 + s.norm() ** 2) * s,
        "gradients are not": lambda s: reference(s.detach()) + 0 * s,
        "bare unit vector": lambda s: s / torch.sqrt((s * s).sum(dim=-1, keepdim=True) + 1e-8),
        "squashed along dim=1, across capsules": lambda s: squash(s, dim=1),
        "squashed along dim=0, across images": lambda s: squash(s, dim=0),
        "sum with keepdim=True": no_keepdim,
        STUB_HINT: stub,
    }
    for hint, fn in cases.items():
        result = check_squash(fn)
        assert not result.passed and result.message.startswith("❌"), hint
        assert hint in result.message, (hint, result.message)


def test_check_input_length_for():
    assert check_input_length_for(lambda p: math.sqrt(p / (1 - p)))
    assert check_input_length_for(lambda p: torch.sqrt(torch.tensor(p / (1 - p))))
    squared = check_input_length_for(lambda p: p / (1 - p))
    assert not squared and "take its square root" in squared.message
    wrong = check_input_length_for(lambda p: p)
    assert not wrong and "solve p = n²/(1+n²)" in wrong.message
    failing = check_input_length_for(lambda p: 1 / 0)
    assert not failing and "raised ZeroDivisionError" in failing.message


def votes_reference(p, a, agree):
    n = math.sqrt(p / (1 - p))
    return math.ceil((n / a if agree else (n / a) ** 2) - 1e-9)


def test_check_votes_needed_passes_for_right_answers(capsys):
    result = check_votes_needed(votes_reference)
    assert result.passed and result.message in capsys.readouterr().out
    assert check_votes_needed(lambda p, a, agree: float(votes_reference(p, a, agree)))
    assert check_votes_needed(lambda p, a, agree: torch.tensor(votes_reference(p, a, agree)))


def test_check_votes_needed_hints():
    n = lambda p: math.sqrt(p / (1 - p))  # noqa: E731
    cases = {
        "squashes to less than": lambda p, a, agree: math.ceil(p / a if agree else (p / a) ** 2),
        "think of Pythagoras": lambda p, a, agree: math.ceil(n(p) / a),
        "lengths simply add": lambda p, a, agree: math.ceil((n(p) / a) ** 2 if agree else n(p) / a),
        "round up": lambda p, a, agree: math.floor(n(p) / a if agree else (n(p) / a) ** 2),
        "whole number of votes": lambda p, a, agree: n(p) / a if agree else (n(p) / a) ** 2,
        "raised ZeroDivisionError": lambda p, a, agree: 1 / 0,
        "is the fewest that reach": lambda p, a, agree: 1000,
        STUB_HINT: lambda p, a, agree: stub(p),
    }
    for hint, fn in cases.items():
        result = check_votes_needed(fn)
        assert not result.passed and result.message.startswith("❌"), hint
        assert hint in result.message, (hint, result.message)

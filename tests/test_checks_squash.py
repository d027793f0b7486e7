"""Tests for capsedu.course.checks.squash: right answers pass, typical mistakes get their own hint."""

import math

import pytest
import torch

from capsedu import squash
from capsedu.course.checks.squash import check_input_length_for, check_squash

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

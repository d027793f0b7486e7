"""Tests for capsedu.course.checks.primary: right answers pass, typical mistakes get their own hint."""

import pytest

from capsedu import squash
from capsedu.course.checks.primary import check_grid_size, check_length_map, check_to_capsules

pytestmark = pytest.mark.unit


def to_capsules(features, num_types, caps_dim):
    batch, _, height, width = features.shape
    u = features.view(batch, num_types, caps_dim, height, width).permute(0, 1, 3, 4, 2)
    return squash(u.reshape(batch, -1, caps_dim))


def test_check_to_capsules_passes(capsys):
    result = check_to_capsules(to_capsules)
    assert result.passed and result.message.startswith("✅")
    assert result.message in capsys.readouterr().out


def test_check_to_capsules_hints():
    def split(f, t, d):
        b, _, h, w = f.shape
        return f.view(b, t, d, h, w)

    cases = {
        ".view(B, -1, D)": lambda f, t, d: squash(f.view(f.shape[0], -1, d)),
        "position-major": lambda f, t, d: squash(split(f, t, d).permute(0, 3, 4, 1, 2).reshape(f.shape[0], -1, d)),
        "(D, T)": lambda f, t, d: squash(f.view(f.shape[0], d, t, *f.shape[2:]).permute(0, 2, 3, 4, 1)
                                         .reshape(f.shape[0], -1, d)),
        "not squashed": lambda f, t, d: split(f, t, d).permute(0, 1, 3, 4, 2).reshape(f.shape[0], -1, d),
        "not contiguous": lambda f, t, d: split(f, t, d).permute(0, 1, 3, 4, 2).view(f.shape[0], -1, d),
        "expected shape": lambda f, t, d: split(f, t, d),
        "differ from capsedu": lambda f, t, d: 2 * to_capsules(f, t, d),
    }
    for hint, fn in cases.items():
        result = check_to_capsules(fn)
        assert not result.passed and result.message.startswith("❌"), hint
        assert hint in result.message, (hint, result.message)


def test_check_grid_size():
    assert check_grid_size(lambda n, k1, k2, s: (n - k1 + 1 - k2) // s + 1)
    cases = {
        "conv1 comes first": lambda n, k1, k2, s: (n - k2) // s + 1,
        "off by one": lambda n, k1, k2, s: (n - k1 + 1 - k2) // s,
        "has stride": lambda n, k1, k2, s: n - k1 + 1 - k2 + 1,
        "you gave 36": lambda n, k1, k2, s: 36,
        "raised": lambda n, k1, k2, s: n / 0,
    }
    for hint, fn in cases.items():
        result = check_grid_size(fn)
        assert not result.passed, hint
        assert hint in result.message, (hint, result.message)


def test_check_length_map():
    assert check_length_map(lambda u, t, g: u.norm(dim=-1).view(u.shape[0], t, g, g))
    cases = {
        "position-major": lambda u, t, g: u.norm(dim=-1).view(u.shape[0], g, g, t).permute(0, 3, 1, 2),
        "squared lengths": lambda u, t, g: (u * u).sum(-1).view(u.shape[0], t, g, g),
        "expected shape": lambda u, t, g: u.norm(dim=-1),
        "maps differ": lambda u, t, g: u.abs().sum(-1).view(u.shape[0], t, g, g),
        "raised": lambda u, t, g: u.view(5, 5),
    }
    for hint, fn in cases.items():
        result = check_length_map(fn)
        assert not result.passed, hint
        assert hint in result.message, (hint, result.message)

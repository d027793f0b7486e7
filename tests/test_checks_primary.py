"""Tests for capsedu.course.checks.primary: right answers pass, typical mistakes get their own hint."""

import pytest
import torch

from capsedu import PrimaryCaps, squash
from capsedu.course.checks._kit import STUB_HINT
from capsedu.course.checks.primary import (
    check_grid_size,
    check_length_and_turn,
    check_to_capsules,
    reference_length_and_turn,
    reference_to_capsules,
)

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
    assert check_grid_size(lambda n, k1, k2, s: torch.tensor((n - k1 + 1 - k2) // s + 1))
    cases = {
        "conv1 comes first": lambda n, k1, k2, s: (n - k2) // s + 1,
        "off by one: a convolution": lambda n, k1, k2, s: (n - k1 + 1 - k2) // s,
        "off by one in conv1": lambda n, k1, k2, s: (n - k1 - k2) // s + 1,
        "has stride": lambda n, k1, k2, s: n - k1 + 1 - k2 + 1,
        "you gave 36": lambda n, k1, k2, s: 36,
        "raised": lambda n, k1, k2, s: n / 0,
        "must return one whole number, got tensor": lambda n, k1, k2, s: torch.tensor([6, 6]),
        "must return one whole number, got None": lambda n, k1, k2, s: None,
    }
    for hint, fn in cases.items():
        result = check_grid_size(fn)
        assert not result.passed, hint
        assert hint in result.message, (hint, result.message)


def test_check_to_capsules_stub_and_reference():
    def stub(features, num_types, caps_dim):
        raise NotImplementedError("write it")
    assert STUB_HINT in check_to_capsules(stub, quiet=True).message
    assert check_to_capsules(reference_to_capsules, quiet=True)


def test_reference_to_capsules_is_what_primary_caps_computes():
    layer = PrimaryCaps(3, num_types=2, caps_dim=4, kernel_size=3, stride=1)
    x = torch.rand(2, 3, 6, 6)
    with torch.no_grad():
        torch.testing.assert_close(reference_to_capsules(layer.conv(x), 2, 4), layer(x))
    with pytest.raises(ValueError, match="num_types \\* caps_dim = 6"):
        reference_to_capsules(torch.rand(1, 8, 4, 4), 2, 3)


def test_check_length_and_turn():
    assert check_length_and_turn(reference_length_and_turn, quiet=True)
    change = lambda u, r: u.norm(dim=-1) - r.norm(dim=-1)  # noqa: E731
    cosine = lambda u, r: torch.nn.functional.cosine_similarity(u, r.expand_as(u), dim=-1)  # noqa: E731
    degrees = lambda c: torch.rad2deg(torch.acos(c.clamp(-1, 1)))  # noqa: E731

    def stub(u, r):
        raise NotImplementedError("write it")

    cases = {
        STUB_HINT: stub,
        "are swapped": lambda u, r: reference_length_and_turn(u, r)[::-1],
        "wrong sign": lambda u, r: (-change(u, r), degrees(cosine(u, r))),
        "keep the sign": lambda u, r: (change(u, r).abs(), degrees(cosine(u, r))),
        "squared lengths": lambda u, r: ((u * u).sum(-1) - (r * r).sum(-1), degrees(cosine(u, r))),
        "NaN angles": lambda u, r: (change(u, r), torch.rad2deg(torch.acos(
            (u * r).sum(-1) / (u.norm(dim=-1) * r.norm(dim=-1))))),
        "radians": lambda u, r: (change(u, r), torch.acos(cosine(u, r).clamp(-1, 1))),
        "cosine of the angle": lambda u, r: (change(u, r), cosine(u, r)),
        "dot product alone": lambda u, r: (change(u, r), degrees((u * r).sum(-1))),
        "shape (B, I)": lambda u, r: (u.norm(dim=-1).mean(0), degrees(cosine(u, r))),
        "return two tensors": lambda u, r: change(u, r),
        "angles differ": lambda u, r: (change(u, r), 2 * degrees(cosine(u, r))),
        "length change differs": lambda u, r: (change(u, r) + 1, degrees(cosine(u, r))),
    }
    for hint, fn in cases.items():
        result = check_length_and_turn(fn, quiet=True)
        assert not result and hint in result.message, (hint, result.message)

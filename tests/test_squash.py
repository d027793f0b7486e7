import pytest
import torch

from capsedu import squash

pytestmark = pytest.mark.unit


def test_shape_norm_range_and_direction(rng):
    s = torch.randn(4, 10, 16, generator=rng) * 3
    v = squash(s)
    assert v.shape == s.shape
    norms = v.norm(dim=-1)
    assert (norms >= 0).all() and (norms < 1).all()
    cos = torch.nn.functional.cosine_similarity(v, s, dim=-1)
    torch.testing.assert_close(cos, torch.ones_like(cos))


def test_matches_equation_1(rng):
    s = torch.randn(3, 5, 8, generator=rng, dtype=torch.float64)
    n = s.norm(dim=-1, keepdim=True)
    torch.testing.assert_close(squash(s, eps=1e-30), n**2 / (1 + n**2) * s / n)


def test_length_is_monotonic_and_saturates():
    lengths = torch.tensor([0.0, 0.1, 0.5, 1.0, 2.0, 10.0])
    s = torch.zeros(6, 4)
    s[:, 0] = lengths
    out = squash(s).norm(dim=-1)
    assert (out[1:] > out[:-1]).all()
    assert out[0] == 0 and abs(out[3] - 0.5) < 1e-6 and out[-1] > 0.99


def test_other_dim(rng):
    s = torch.randn(2, 8, 5, generator=rng)
    torch.testing.assert_close(squash(s, dim=1), squash(s.transpose(1, 2)).transpose(1, 2))


def test_zero_vector_value_and_gradient_finite():
    s = torch.zeros(2, 3, 8, requires_grad=True)
    v = squash(s)
    v.sum().backward()
    assert torch.equal(v, torch.zeros_like(v))
    assert torch.isfinite(s.grad).all()


def test_gradcheck_float64(rng):
    s = torch.randn(2, 3, 4, generator=rng, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(squash, (s,))


@pytest.mark.parametrize("bad, error, words", [
    ([1.0, 2.0], TypeError, "s must be a torch.Tensor"),
    (torch.ones(3, dtype=torch.long), TypeError, "floating-point"),
    (torch.tensor(1.0), ValueError, "scalar"),
])
def test_bad_inputs(bad, error, words):
    with pytest.raises(error, match=words):
        squash(bad)


def test_bad_dim_and_eps():
    with pytest.raises(ValueError, match="dim must be in"):
        squash(torch.ones(2, 3), dim=2)
    with pytest.raises(ValueError, match="eps must be > 0"):
        squash(torch.ones(2, 3), eps=0.0)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_a_non_finite_capsule_is_not_scanned_for_and_leaves_the_others_alone(bad):
    """squash checks O(1) things only (the networks call it inside): a NaN or inf is rejected
    where images enter a network (tests/test_model.py), here it stays in its own capsule."""
    s = torch.ones(2, 3, 4)
    s[1, 2, 0] = bad
    v = squash(s)
    assert not torch.isfinite(v[1, 2]).all()
    torch.testing.assert_close(v[0], squash(torch.ones(3, 4)))

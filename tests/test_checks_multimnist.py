"""Tests for capsedu.course.checks.multimnist: right answers pass, each likely mistake gets its hint."""


import pytest
import torch

from capsedu.course.checks._kit import STUB_HINT
from capsedu.course.checks.multimnist import check_both_right, check_reconstruct_one
from capsedu.nets.multi_digit import pair_hits

pytestmark = pytest.mark.unit


def both_right(scores, labels):
    return pair_hits(scores, labels) == 2


def stub(*args):
    raise NotImplementedError


@pytest.fixture(scope="module")
def model(pair_capsnet):
    return pair_capsnet


def test_right_answers_pass(capsys, model):
    assert check_both_right(both_right)
    assert check_reconstruct_one(lambda m, v, k: m.decode(v, k), model)
    assert capsys.readouterr().out.count("✅") == 2


@pytest.mark.parametrize("wrong, hint", [
    (lambda s, y: (s.topk(2, dim=1).indices == y).all(dim=1), "in order: sort both"),
    (lambda s, y: pair_hits(s, y) >= 1, "AT LEAST one"),
    (lambda s, y: s.argmax(dim=1) == y[:, 0], "top-1 class"),
    (lambda s, y: (s > 0.5).sum(dim=1).eq(2) & (pair_hits(s, y) == 2), "threshold the scores"),
    (lambda s, y: torch.zeros(6, dtype=torch.bool), "some answers differ"),
    (lambda s, y: (pair_hits(s, y) == 2)[:3], "expected a (B,) = (6,) tensor"),
    (stub, STUB_HINT),
])
def test_both_right_mistakes_get_their_hint(capsys, wrong, hint):
    assert not check_both_right(wrong)
    assert hint in capsys.readouterr().out


def _masked(model, capsules, keep):
    side = model.config.image_size
    return model.decoder((capsules * keep).flatten(1)).view(-1, 1, side, side)


def _one_hot(classes):
    return torch.nn.functional.one_hot(classes, 10).float()[..., None]


@pytest.mark.parametrize("wrong, hint", [
    (lambda m, v, k: _masked(m, v, 1.0), "nothing was masked"),
    (lambda m, v, k: _masked(m, v, 1 - _one_hot(k)), "the mask is inverted"),
    (lambda m, v, k: _masked(m, v, _one_hot(k)[:1]), "the first image's class"),
    (lambda m, v, k: m.decode(v, k)[:, 0], "expected (B, 1, 36, 36) images"),
    (lambda m, v, k: m.decode(v.mul_(_one_hot(k)), k), "changed the capsules in place"),
    (lambda m, v, k: m.decode(v, (k + 1) % 10), "differ from model.decode"),
    (stub, STUB_HINT),
])
def test_reconstruct_one_mistakes_get_their_hint(capsys, model, wrong, hint):
    assert not check_reconstruct_one(wrong, model)
    assert hint in capsys.readouterr().out

"""capsedu.course.checks.exploring: right answers pass, each typical mistake gets its own hint."""

import pytest
import torch

from capsedu.course.checks._kit import STUB_HINT
from capsedu.course.checks.exploring import (
    _probe_inputs,
    check_aligned_shift,
    check_perturb_and_decode,
    reference_aligned_shift,
)
from capsedu.explore.probes import perturb_and_decode
from capsedu.nets.squash import squash

pytestmark = pytest.mark.unit


def stub(*args):
    raise NotImplementedError


def masked(capsules, label):
    keep = torch.zeros_like(capsules)
    keep[label] = capsules[label]
    return keep.flatten()[None]  # (1, J*D_out)


def right_probe(decoder, capsules, dim, delta):
    moved = capsules.clone()
    label = int(capsules.norm(dim=-1).argmax())
    moved[label, dim] += delta
    return decoder(masked(moved, label))[0]


def probe_with(pick=lambda c: int(c.norm(dim=-1).argmax()), move=None, after=None, flat=None):
    def fn(decoder, capsules, dim, delta):
        label = pick(capsules)
        moved = capsules.clone()
        if move is None:
            moved[label, dim] += delta
        else:
            move(moved, label, dim, delta)
        if after is not None:
            moved = after(moved)
        x = masked(moved, label) if flat is None else flat(moved, label)
        return decoder(x)[0]
    return fn


def in_place(decoder, capsules, dim, delta):
    label = int(capsules.norm(dim=-1).argmax())
    capsules[label, dim] += delta
    return decoder(masked(capsules, label))[0]


def test_right_probe_passes_and_capsedu_is_the_reference(capsys):
    assert check_perturb_and_decode(right_probe)
    assert check_perturb_and_decode(perturb_and_decode)
    assert capsys.readouterr().out.count("✅") == 2


@pytest.mark.parametrize("fn, hint", [
    (stub, STUB_HINT),
    (in_place, "in place"),
    (probe_with(flat=lambda m, k: m.flatten()[None]), "zero every other capsule"),
    (probe_with(move=lambda m, k, d, x: m[:, d].add_(x), flat=lambda m, k: m.flatten()[None]),
     "every capsule"),
    (probe_with(pick=lambda c: int(c.norm(dim=0).argmax())), "over the classes"),
    (probe_with(pick=lambda c: int(c.sum(dim=-1).argmax())), "largest sum"),
    (probe_with(pick=lambda c: int(c.abs().max(dim=-1).values.argmax())), "largest single entry"),
    (probe_with(move=lambda m, k, d, x: m[d, k].add_(x)), "plain reconstruction"),
    (probe_with(after=squash), "do not squash again"),
    (probe_with(move=lambda m, k, d, x: m[k, d].sub_(x)), "sign is reversed"),
    (probe_with(flat=lambda m, k: masked(m, k).view(*m.shape).T.reshape(1, -1)), "capsule by capsule"),
    (probe_with(move=lambda m, k, d, x: m[k].add_(x)), "dimension `dim` only"),
    (lambda dec, c, d, x: right_probe(dec, c, d, x)[None], "take [0]"),
    (lambda dec, c, d, x: right_probe(dec, c, d, x) + 0.01, "the image differs"),
])
def test_probe_mistakes_get_their_hint(fn, hint):
    result = check_perturb_and_decode(fn, quiet=True)
    assert not result and hint in result.message, result.message


def test_the_probe_inputs_tell_every_wrong_winner_apart():
    _, capsules, winner = _probe_inputs()
    picks = {winner, int(capsules.sum(-1).argmax()), int(capsules.abs().max(-1).values.argmax()),
             int(capsules.norm(dim=0).argmax())}
    assert len(picks) == 4 and int(capsules.norm(dim=-1).argmax()) == winner


def test_perturb_and_decode_leaves_capsules_alone_and_checks_its_arguments():
    decoder, capsules, winner = _probe_inputs()
    before = capsules.clone()
    plain = perturb_and_decode(decoder, capsules, 0, 0.0)
    moved = perturb_and_decode(decoder, capsules, 5, 0.2)
    assert torch.equal(capsules, before) and plain.shape == moved.shape == (24,)
    assert not torch.allclose(plain, moved)
    with pytest.raises(ValueError, match="dim"):
        perturb_and_decode(decoder, capsules, 16, 0.1)
    with pytest.raises((TypeError, ValueError), match="capsules"):
        perturb_and_decode(decoder, capsules[None], 0, 0.1)


def shift_by(low, high, max_shift, axis=-1):
    shifts = range(-max_shift, max_shift + 1)
    scores = torch.stack([(torch.roll(low, dx, dims=axis) * high).sum(dim=(-2, -1)) for dx in shifts])
    return scores.argmax(dim=0) - max_shift


def centre_move(low, high):
    x = torch.arange(low.shape[-1], dtype=low.dtype)
    return (high * x).sum((-2, -1)) / high.sum((-2, -1)) - (low * x).sum((-2, -1)) / low.sum((-2, -1))


def test_aligned_shift_right_answers_pass(capsys):
    assert check_aligned_shift(reference_aligned_shift)
    assert check_aligned_shift(shift_by)  # torch.roll is fine on digits with empty borders
    assert check_aligned_shift(lambda lo, hi, k: shift_by(lo, hi, k).tolist())  # a list is fine
    assert capsys.readouterr().out.count("✅") == 3


@pytest.mark.parametrize("fn, hint", [
    (stub, STUB_HINT),
    (lambda lo, hi, k: -shift_by(lo, hi, k), "sign is reversed"),
    (lambda lo, hi, k: shift_by(lo, hi, k) + k, "subtract max_shift"),
    (lambda lo, hi, k: shift_by(lo, hi, k, axis=-2), "vertical"),
    (lambda lo, hi, k: shift_by(lo, hi, 6), "use the argument"),
    (lambda lo, hi, k: centre_move(lo, hi).round(), "centre of the ink"),
    (lambda lo, hi, k: centre_move(lo, hi), "centre of the ink"),
    (lambda lo, hi, k: shift_by(lo, hi, k)[:3], "shape"),
    (lambda lo, hi, k: shift_by(lo, hi, k) * 0, "overlaps `high` most"),
])
def test_aligned_shift_mistakes_get_their_hint(fn, hint):
    result = check_aligned_shift(fn, quiet=True)
    assert not result and hint in result.message, result.message

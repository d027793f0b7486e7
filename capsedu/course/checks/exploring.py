r"""Checks for lesson 07 (exploring a trained CapsNet): the Figure 4 probe - one dimension of the
winning capsule moved, the others masked, decoded - and a measure of how far a drawing moves
sideways that a change of stroke weight cannot fool.

Each check runs the learner's function on small seeded inputs, compares it with
:mod:`capsedu.explore.probes` or a reference here, and prints a pass or a hint that names the
most likely mistake.

Shape legend:
    J      digit capsules
    D_out  digit capsule dimension (16)
    P      decoder outputs (pixels)
    N      picture pairs;  H, W  their height and width
    S      side of a square canvas
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from capsedu.course.checks._kit import (
    CheckResult,
    call_learner,
    diagnose,
    mistake,
    other,
    verdict,
)
from capsedu.explore.probes import perturb_and_decode
from capsedu.nets.capsnet import mask_capsules
from capsedu.nets.squash import squash

ProbeFn = Callable[[Callable[[torch.Tensor], torch.Tensor], torch.Tensor, int, float], torch.Tensor]

_DIM, _DELTA = 3, 0.25


def _probe_inputs() -> tuple[torch.nn.Module, torch.Tensor, int]:
    r"""A seeded decoder (J*D_out -> P), digit capsules (J, D_out) and their winner.

    The capsules are built so that every wrong way of finding the winner picks another capsule:
    the longest (winner) is not the one with the largest sum of entries, nor the largest entry,
    and the norms over the wrong axis point at yet another class.
    """
    generator = torch.Generator().manual_seed(7)
    classes, dim, pixels = 10, 16, 24
    capsules = 0.05 * torch.randn(classes, dim, generator=generator)  # (J, D_out) short capsules
    winner = 6
    pose = torch.randn(dim, generator=generator)  # (D_out,)
    pose = pose - pose.mean() - 0.1  # a negative sum
    capsules[winner] = 0.9 * pose / pose.norm()  # the longest: 0.9, with a negative sum
    capsules[2, 0] = 0.6  # the largest single entry, in a shorter capsule
    capsules[1] = 0.12  # the largest sum of entries (1.92), length 0.48
    capsules[torch.arange(classes) != winner, 4] = 0.25  # the largest norm over the classes: dimension 4
    with torch.random.fork_rng(devices=[]):  # nn.Linear's own initialisation must not touch the learner's RNG
        decoder = torch.nn.Sequential(torch.nn.Linear(classes * dim, pixels), torch.nn.Sigmoid())
    with torch.no_grad():
        decoder[0].weight.copy_(torch.randn(pixels, classes * dim, generator=generator))
        decoder[0].bias.copy_(0.1 * torch.randn(pixels, generator=generator))
    decoder.requires_grad_(False)
    return decoder, capsules, winner


def _decode_masked(decoder: torch.nn.Module, capsules: torch.Tensor, label: int) -> torch.Tensor:
    return decoder(mask_capsules(capsules[None], torch.tensor([label])))[0]  # (P,)


def _moved(capsules: torch.Tensor, label: int, dim: int, delta: float) -> torch.Tensor:
    out = capsules.clone()
    out[label, dim] += delta
    return out  # (J, D_out)


def check_perturb_and_decode(fn: ProbeFn, *, quiet: bool = False) -> CheckResult:
    r"""``fn(decoder, capsules, dim, delta)`` must add ``delta`` to dimension ``dim`` of the longest
    capsule of ``capsules`` (J, D_out), zero the others, flatten and decode: the decoder's (P,)
    output, leaving ``capsules`` unchanged."""
    decoder, capsules, winner = _probe_inputs()
    given = capsules.clone()
    result, hint = call_learner(fn, decoder, given, _DIM, _DELTA, what="your perturb_and_decode")
    if hint:
        return verdict(hint, "", quiet=quiet)
    if not torch.equal(given, capsules):
        return verdict(other("mutation", "your function changed `capsules` in place: work on a "
                             "copy (capsules.clone()), or every later probe starts from a capsule "
                             "that was already moved"), "", quiet=quiet)
    expected = perturb_and_decode(decoder, capsules, _DIM, _DELTA)  # (P,)
    moved = _moved(capsules, winner, _DIM, _DELTA)  # (J, D_out)
    by_sum = int(capsules.sum(dim=-1).argmax())
    by_entry = int(capsules.abs().max(dim=-1).values.argmax())
    by_wrong_axis = int(capsules.norm(dim=0).argmax())  # a pose dimension, read as a class
    shifted_all = capsules.clone()
    shifted_all[:, _DIM] += _DELTA
    wrong_order = mask_capsules(moved[None], torch.tensor([winner]))[0].view(*capsules.shape).T.reshape(-1)
    length = "the winner is the LONGEST capsule: capsules.norm(dim=-1).argmax(), one length per class"
    mistakes = [
        (lambda: decoder(moved.flatten()[None])[0],
         mistake("decoded-unmasked", "decode the winning capsule alone: zero every other capsule "
                 "first (the mask of lesson 05), as the network's decoder always sees it")),
        (lambda: decoder(shifted_all.flatten()[None])[0],
         mistake("moved-every-capsule", "you moved dimension `dim` of every capsule and decoded "
                 "them all: move the winner's only, and zero the others (the mask)")),
        (lambda: _decode_masked(decoder, _moved(capsules, by_wrong_axis, _DIM, _DELTA), by_wrong_axis),
         mistake("winner-norm-over-classes", length + " - you took the norm over the classes (dim=0)")),
        (lambda: _decode_masked(decoder, _moved(capsules, by_sum, _DIM, _DELTA), by_sum),
         mistake("winner-by-sum", length + " - not the largest sum of its entries")),
        (lambda: _decode_masked(decoder, _moved(capsules, by_entry, _DIM, _DELTA), by_entry),
         mistake("winner-by-largest-entry", length + " - not the one with the largest single entry")),
        (lambda: _decode_masked(decoder, capsules, winner),
         mistake("delta-not-applied", "that is the plain reconstruction: delta never reached the "
                 "decoded capsule; add it to capsules[winner, dim] (row = class, column = pose "
                 "dimension)")),
        (lambda: _decode_masked(decoder, squash(moved), winner),
         mistake("squashed-again", "do not squash again: Figure 4 moves the output capsule v "
                 "itself; squashing after the move changes its length back and blurs the effect")),
        (lambda: _decode_masked(decoder, _moved(capsules, winner, _DIM, -_DELTA), winner),
         mistake("delta-subtracted", "the sign is reversed: ADD delta to the dimension")),
        (lambda: decoder(wrong_order[None])[0],
         mistake("transposed-flatten", "flatten capsule by capsule: (J, D_out) -> J*D_out with "
                 "capsule j in entries j*D_out..(j+1)*D_out-1, as the decoder was trained (no "
                 "transpose)")),
        (lambda: _decode_masked(decoder, capsules + _DELTA * torch.nn.functional.one_hot(
            torch.tensor(winner), len(capsules))[:, None].float(), winner),
         mistake("moved-every-dimension",
                 "you moved every dimension of the winner: add delta to dimension `dim` only")),
    ]
    hint = diagnose(result, expected, mistakes, other("values", "the image differs from decoding "
                    "the masked winner with delta added to its dimension `dim`"), what="the "
                    "decoder's output for one image (take [0] of the batch it returns)", rtol=1e-4,
                    atol=1e-5)
    return verdict(hint, "perturb_and_decode moves one pose dimension of the winning capsule and "
                   "redraws it, as in Figure 4.", quiet=quiet)


def _shift_right(pictures: torch.Tensor, dx: int) -> torch.Tensor:
    r"""Pictures (N, H, W) moved ``dx`` whole pixels to the right (left when negative), zeros in."""
    out = torch.zeros_like(pictures)
    if dx > 0:
        out[..., dx:] = pictures[..., :-dx]
    elif dx < 0:
        out[..., :dx] = pictures[..., -dx:]
    else:
        out = pictures.clone()
    return out


def reference_aligned_shift(low: torch.Tensor, high: torch.Tensor, max_shift: int = 6) -> torch.Tensor:
    r"""For each pair of pictures (N, H, W), the whole-pixel shift dx in -max_shift..max_shift
    (right positive) for which ``low`` moved right by dx overlaps ``high`` most (the largest
    cross-correlation, sum of products): (N,) integers."""
    shifts = range(-max_shift, max_shift + 1)
    overlap = torch.stack([(_shift_right(low, dx) * high).sum(dim=(-2, -1)) for dx in shifts])  # (S, N)
    return overlap.argmax(dim=0) - max_shift  # (N,)


def _centre_shift(low: torch.Tensor, high: torch.Tensor) -> torch.Tensor:
    columns = torch.arange(low.shape[-1], dtype=low.dtype)  # (W,)

    def centre(x: torch.Tensor) -> torch.Tensor:
        return (x * columns).sum(dim=(-2, -1)) / x.sum(dim=(-2, -1))  # (N,)

    return centre(high) - centre(low)  # (N,)


def _glyph_pairs() -> tuple[torch.Tensor, torch.Tensor, int]:
    r"""Pairs of L-shaped glyphs (N, 28, 28): moved, made bolder on one side, or both."""
    glyph = torch.zeros(28, 28)
    glyph[5:21, 8:10] = 1.0  # a stem
    glyph[19:21, 8:20] = 1.0  # a foot to the right
    glyph[5:7, 8:13] = 0.6  # a short, lighter cap
    bold = glyph.clone()
    bold[16:24, 8:22] = torch.maximum(bold[16:24, 8:22], torch.tensor(0.9))  # a heavier foot
    down = torch.roll(_shift_right(glyph[None], 1)[0], 2, dims=0)  # 1 px right, 2 px down
    low = torch.stack([glyph] * 6)  # (N, H, W)
    high = torch.stack([_shift_right(glyph[None], 3)[0], _shift_right(glyph[None], -2)[0], bold,
                        _shift_right(bold[None], 2)[0], _shift_right(glyph[None], 6)[0], down])
    return low, high, 4


def check_aligned_shift(fn: Callable[[torch.Tensor, torch.Tensor, int], torch.Tensor], *,
                        quiet: bool = False) -> CheckResult:
    r"""``fn(low, high, max_shift)`` must return, per pair of pictures (N, H, W), the whole-pixel
    shift in -max_shift..max_shift (right positive) that best aligns ``low`` with ``high``."""
    low, high, max_shift = _glyph_pairs()
    result, hint = call_learner(fn, low.clone(), high.clone(), max_shift, what="your aligned_shift")
    if hint:
        return verdict(hint, "", quiet=quiet)
    expected = reference_aligned_shift(low, high, max_shift).double()  # (N,)
    try:
        result = torch.as_tensor(result).double()
    except (TypeError, ValueError, RuntimeError):
        pass  # diagnose names what came back instead
    mistakes = [
        (lambda: -expected, mistake("shift-sign-reversed", "the sign is reversed: dx > 0 means "
                                    "`high` sits to the RIGHT of `low`")),
        (lambda: expected + max_shift, mistake("index-not-shift", "that is the position in your "
         "list of candidate shifts: subtract max_shift to get the shift itself "
         "(-max_shift..max_shift)")),
        (lambda: reference_aligned_shift(low.transpose(-2, -1), high.transpose(-2, -1), max_shift).double(),
         mistake("vertical-shift", "that is the vertical shift: move the pictures along their "
                 "columns (the last dimension)")),
        (lambda: reference_aligned_shift(low, high, 6).double(), mistake("max-shift-ignored",
         "stay within -max_shift..max_shift (here 4): use the argument, not a number of your own")),
        (lambda: _centre_shift(low, high).round(), mistake("centre-of-ink", "that follows the "
         "centre of the ink, which moves whenever ink is added on one side (a bolder stroke): "
         "compare whole pictures, shifted")),
        (lambda: _centre_shift(low, high), mistake("centre-of-ink", "that is how far the centre of "
         "the ink moves: it moves whenever ink is added on one side (a bolder stroke); compare "
         "whole pictures, shifted")),
    ]
    hint = diagnose(result, expected, mistakes, other("values", "for each pair, keep the dx whose "
                    "shifted `low` overlaps `high` most (largest sum of products)"), what="one "
                    "whole-pixel shift per pair", rtol=0.0, atol=1e-6)
    return verdict(hint, "aligned_shift finds a move (3, -2, 2 px...) and ignores a bolder stroke "
                   "(0 px).", quiet=quiet)

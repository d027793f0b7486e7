r"""Checks for lesson 09 (MultiMNIST): a pair drawn by hand, the two-digit loss and a measure of
segmentation.

* :func:`check_pair` - ``fn(images, labels, generator)`` draws one MultiMNIST pair;
* :func:`check_two_digit_loss` - ``fn(model, images, targets)`` is Section 6's loss;
* :func:`check_own_share` - ``fn(reconstruction, own, other)`` says how much of a reconstruction
  lies on its own digit rather than on the other one.

Each check runs the learner's function on probes built to tell the likely mistakes apart and
prints a pass or a hint that names the mistake.

Shape legend:
    B      batch size (images)
    J      classes (10)
    D      digit-capsule dimension (16)
    S      canvas side (36)
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from capsedu.course.checks._kit import (
    CheckResult,
    call_learner,
    close,
    mistake,
    other,
    shape_of,
    verdict,
)
from capsedu.data.multimnist import PairTargets
from capsedu.nets.capsnet import CapsNet, CapsNetConfig
from capsedu.nets.losses import RECON_WEIGHT, margin_loss
from capsedu.training.objectives import TwoDigitObjective

SHIFT = 4  # the paper's largest shift, pixels in x and in y
CANVAS = 36


# --- a pair, by hand ------------------------------------------------------------------------------

def _block_digits() -> tuple[torch.Tensor, torch.Tensor]:
    r"""20 fake digits (20, 1, 28, 28): a 20 x 20 block of ink at rows and columns 4-23, digit k of
    brightness 0.5 + 0.01 k (so that a placed digit says which it was and where it went), two per
    class; and their labels (20,)."""
    images = torch.zeros(20, 1, 28, 28)
    for k in range(20):
        images[k, :, 4:24, 4:24] = 0.5 + 0.01 * k
    return images, torch.arange(20) % 10


def _read_digit(placed: torch.Tensor) -> tuple[int, int, int] | None:
    r"""(index, dx, dy) of a placed block digit (1, S, S), or None when it is not one whole block."""
    rows, cols = placed[0].nonzero(as_tuple=True)
    if len(rows) != 400:
        return None
    top, left = int(rows.min()), int(cols.min())
    block = placed[0, top:top + 20, left:left + 20]
    if block.shape != (20, 20) or not torch.allclose(block, block[0, 0].expand(20, 20)):
        return None
    offset = (CANVAS - 20) // 2  # where an unshifted block starts: 4 of padding + 4 inside the digit
    return round((float(block[0, 0]) - 0.5) / 0.01), left - offset, top - offset


def _pair_problem(fn: Callable, images: torch.Tensor, labels: torch.Tensor, seed: int,
                  draws: int) -> tuple[str, list[tuple[int, int, int, int]]]:
    r"""A hint ('' when right) and the shifts (dx1, dy1, dx2, dy2) of ``draws`` pairs."""
    generator = torch.Generator().manual_seed(seed)
    shifts = []
    for _ in range(draws):
        result, hint = call_learner(fn, images, labels, generator, what="your my_pair")
        if hint:
            return hint, shifts
        if not (isinstance(result, tuple) and len(result) == 3):
            return other("type", "return a tuple (image, labels, digits)"), shifts
        image, pair_labels, digits = result
        for got, want, what in ((image, (1, CANVAS, CANVAS), "the image"), (pair_labels, (2,), "the labels"),
                                (digits, (2, 1, CANVAS, CANVAS), "the two digits alone")):
            if not isinstance(got, torch.Tensor) or tuple(got.shape) != want:
                return other("shape", f"{what} must be a tensor of shape {want}, got "
                                      f"{shape_of(got)}"), shifts
        read = [_read_digit(d) for d in digits]
        if None in read:
            return mistake("digit-not-placed-whole", "a digit is cut off or not placed whole: centre "
                           "each 28 x 28 digit on the 36 x 36 canvas (4 pixels of padding) and shift "
                           "it by at most 4 pixels"), shifts
        (first, dx1, dy1), (second, dx2, dy2) = read
        if pair_labels.tolist() != [int(labels[first]), int(labels[second])]:
            return mistake("labels-not-of-placed-digits", "the labels you return are not the "
                           "classes of the two digits you placed, in order"), shifts
        if labels[first] == labels[second]:
            return mistake("same-class-digits", "two digits of the same class: the second digit "
                           "must be of a DIFFERENT class (draw again until the classes differ)"), shifts
        if float(image.max()) > 1.0 + 1e-6:
            return mistake("merge-not-clipped", "pixels above 1: the paper merges by min(a + b, 1) "
                           "— clip the sum (or take the pixel-wise maximum)"), shifts
        merged = (digits[0] + digits[1]).clamp(max=1.0), torch.maximum(digits[0], digits[1])
        if not any(torch.allclose(image, m, atol=1e-6) for m in merged):
            return other("values", "the image is not the merge of the two digits you return: "
                         "min(a + b, 1) of the two"), shifts
        shifts.append((dx1, dy1, dx2, dy2))
    return "", shifts


def check_pair(fn: Callable[[torch.Tensor, torch.Tensor, torch.Generator], tuple], *,
               quiet: bool = False) -> CheckResult:
    r"""``fn(images, labels, generator)`` must draw one MultiMNIST pair from digits ``images``
    (N, 1, 28, 28) with ``labels`` (N,), with random numbers from ``generator`` only, and return
    ``(image (1, S, S), labels (2,), digits (2, 1, S, S))``."""
    images, labels = _block_digits()
    hint, shifts = _pair_problem(fn, images, labels, seed=0, draws=300)
    if not hint:
        values = torch.tensor(shifts)  # (draws, 4): dx1, dy1, dx2, dy2
        if values.abs().max() > SHIFT:
            hint = mistake("shift-too-large", f"a shift of {int(values.abs().max())} pixels: each "
                           "digit moves by at most ±4 in x and in y from the centre of the canvas")
        elif values.max() < SHIFT:
            hint = mistake("randint-high-excluded", "no digit is ever shifted by +4: "
                           "torch.randint(low, high) never returns high — use randint(-4, 5)")
        elif values.min() > -SHIFT:
            hint = mistake("never-shifted-by-minus-4",
                           "no digit is ever shifted by -4: the shifts run from -4 to +4")
        elif torch.equal(values[:, :2], values[:, 2:]):
            hint = mistake("same-shift-for-both-digits",
                           "both digits always get the same shift: draw a shift for each digit")
        elif torch.equal(values[:, 0], values[:, 1]) and torch.equal(values[:, 2], values[:, 3]):
            hint = mistake("dx-equals-dy", "each digit moves as far in x as in y: draw dx and dy "
                           "separately")
    if not hint:
        again = _pair_problem(fn, images, labels, seed=0, draws=300)[1]
        if again != shifts:
            hint = mistake("generator-not-used", "the same generator seed gave different pairs: "
                           "draw every random number from the generator you are given "
                           "(torch.randint(..., generator=generator))")
    return verdict(hint, "my_pair draws two digits of different classes, each shifted by up to ±4 "
                   "pixels on its own, merged as the paper merges them.", quiet=quiet)


# --- the two-digit loss -------------------------------------------------------------------------

def probe_pair_capsnet(seed: int = 0) -> CapsNet:
    r"""A tiny CapsNet for 36 x 36 pairs, weights drawn with standard deviation 0.1 (long capsules)
    and 1 in the decoder (its image depends on the mask), eval mode; the global random state is
    untouched."""
    with torch.random.fork_rng(devices=[]):
        model = CapsNet(CapsNetConfig(image_size=CANVAS, conv1_channels=8, primary_types=2,
                                      decoder_hidden=(32,)))
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.copy_(0.1 * torch.randn(parameter.shape, generator=generator))
        for parameter in model.decoder.parameters():
            parameter.mul_(10.0)  # a decoder whose image depends strongly on which capsule is kept
    return model.eval()


def _probe_pairs(seed: int = 0) -> tuple[torch.Tensor, PairTargets]:
    r"""Four random pairs: images (4, 1, S, S) and their targets (sparse random 'digits', the
    first on the canvas's left half, the second on its right half)."""
    generator = torch.Generator().manual_seed(seed)
    digits = torch.rand(4, 2, 1, CANVAS, CANVAS, generator=generator)  # (B, 2, 1, S, S)
    digits = digits * (torch.rand(digits.shape, generator=generator) < 0.3)  # sparse ink
    digits[:, 0, ..., CANVAS // 2:] = 0  # the first digit on the left, the second on the right,
    digits[:, 1, ..., :CANVAS // 2] = 0  # so that swapping them changes the squared errors
    labels = torch.tensor([[3, 5], [0, 7], [9, 1], [2, 8]])  # (B, 2)
    multi_hot = torch.zeros(4, 10).scatter_(1, labels, 1.0)  # (B, J)
    images = (digits[:, 0] + digits[:, 1]).clamp(max=1.0)  # (B, 1, S, S)
    return images, PairTargets(multi_hot, labels, digits)


def _two_digit_variants(model: CapsNet, images: torch.Tensor, targets: PairTargets) -> dict[str, torch.Tensor]:
    r"""The right loss ('') and the loss with one typical mistake, keyed by its hint."""
    batch = len(images)
    v = model.class_capsules(images)  # (B, J, D)
    lengths = v.norm(dim=-1)  # (B, J)
    one_hot = torch.zeros_like(targets.multi_hot).scatter_(1, targets.labels[:, :1], 1.0)  # (B, J)

    def sse(recon: torch.Tensor, wanted: torch.Tensor) -> torch.Tensor:
        return (recon.view(batch, -1) - wanted.reshape(batch, -1)).square().sum(dim=1).mean()

    def mse(recon: torch.Tensor, wanted: torch.Tensor) -> torch.Tensor:
        return (recon.view(batch, -1) - wanted.reshape(batch, -1)).square().mean()

    own = [model.decode(v, targets.labels[:, k]) for k in (0, 1)]  # each (B, C*S*S)
    digits = [targets.digits[:, k] for k in (0, 1)]
    margin = margin_loss(lengths, targets.multi_hot)
    right_recon = sse(own[0], digits[0]) + sse(own[1], digits[1])
    both_kept = model.decoder((v * targets.multi_hot[..., None]).flatten(1))  # (B, C*S*S)
    return {
        "": margin + RECON_WEIGHT * right_recon,
        mistake("margin-first-digit-only",
                "the margin loss sees only the first digit: its target must be the two-hot "
                "multi_hot, with both classes present"):
            margin_loss(lengths, one_hot) + RECON_WEIGHT * right_recon,
        mistake("compared-with-merged-image",
                "each reconstruction is compared with the merged image: compare it with its own "
                "digit alone (targets.digits[:, k]) — that is what makes the capsules separate the "
                "digits"): margin + RECON_WEIGHT * (sse(own[0], images) + sse(own[1], images)),
        mistake("decoded-both-capsules-at-once",
                "you decoded both capsules at once and compared with the merged image: decode each "
                "digit from its own label's capsule, with the other capsule masked"):
            margin + RECON_WEIGHT * sse(both_kept, images),
        mistake("first-digit-only-reconstructed",
                "only the first digit is reconstructed: add the second digit's masked "
                "reconstruction"): margin + RECON_WEIGHT * sse(own[0], digits[0]),
        mistake("swapped-label-capsules",
                "each digit is decoded from the OTHER label's capsule: mask by targets.labels[:, k] "
                "for digit k"): margin + RECON_WEIGHT * (sse(own[1], digits[0]) + sse(own[0], digits[1])),
        mistake("mean-over-pixels",
                "the reconstruction error is a mean over pixels: the paper SUMS the squared errors "
                "(a mean × 0.0005 is 1,296 times too weak on 36 × 36 images)"):
            margin + RECON_WEIGHT * (mse(own[0], digits[0]) + mse(own[1], digits[1])),
        mistake("reconstruction-not-weighted",
                "the reconstruction term is not weighted: multiply the summed squared errors by "
                "0.0005"): margin + right_recon,
    }


def reference_two_digit_loss(model: CapsNet, images: torch.Tensor, targets: PairTargets) -> torch.Tensor:
    r"""capsedu's Section 6 loss in the learner's signature: :class:`TwoDigitObjective`'s value."""
    return TwoDigitObjective()(model, images, targets).value


def check_two_digit_loss(fn: Callable, *, quiet: bool = False) -> CheckResult:
    r"""``fn(model, images, targets)`` must return Section 6's loss as a scalar tensor autograd can
    differentiate: the margin loss on the multi-hot targets plus 0.0005 x the summed squared
    errors of each digit's reconstruction from its own capsule, batch mean."""
    model = probe_pair_capsnet()
    images, targets = _probe_pairs()
    with torch.no_grad():
        variants = {hint: value.detach() for hint, value in _two_digit_variants(model, images, targets).items()}
    result, hint = call_learner(fn, model, images, targets, what="your my_two_digit_loss")
    if not hint:
        if not isinstance(result, torch.Tensor) or result.dim() != 0:
            hint = other("shape",
                         f"return one number as a 0-d tensor (the batch mean), got {shape_of(result)}")
        elif not result.requires_grad:
            hint = mistake("loss-without-gradient", "the loss has no gradient: keep it a tensor "
                           "(no .item(), no torch.no_grad())")
        elif not close(result, variants[""], rtol=2e-5):
            hint = next((h for h, value in variants.items() if h and close(result, value, rtol=2e-5)),
                        other("values", "the loss differs from Section 6's: margin loss on "
                              "multi_hot + 0.0005 × (squared error of each digit's masked "
                              "reconstruction, summed over pixels), batch mean"))
    return verdict(hint, "my_two_digit_loss is Section 6's loss: margin loss on both classes plus "
                   "each digit reconstructed alone from its own capsule.", quiet=quiet)


# --- a measure of segmentation ------------------------------------------------------------------

def _bars() -> tuple[torch.Tensor, torch.Tensor]:
    r"""Two crossing strokes (1, 1, S, S): a thin vertical 'own' digit and a thick horizontal 'other'."""
    own, other = torch.zeros(1, 1, CANVAS, CANVAS), torch.zeros(1, 1, CANVAS, CANVAS)
    own[..., 4:32, 15:19] = 1.0
    other[..., 12:22, 4:32] = 0.8
    return own, other


def check_own_share(fn: Callable, *, quiet: bool = False) -> CheckResult:
    r"""``fn(reconstruction, own, other)`` (each (B, 1, S, S)) must return (B,) numbers: near 1
    when the reconstruction draws its own digit only (however faintly), near 0 when it draws the
    other digit, in between when it draws both."""
    own, other_digit = _bars()
    cases = {  # name -> (reconstruction, lowest allowed, highest allowed)
        "own": (own, 0.9, 1.0 + 1e-6), "other": (other_digit, -1e-6, 0.1),
        "faint own": (0.2 * own, 0.9, 1.0 + 1e-6),
        "both": ((own + other_digit).clamp(max=1.0), 0.1, 0.75),
    }
    reconstruction = torch.cat([case[0] for case in cases.values()])  # (4, 1, S, S)
    result, hint = call_learner(fn, reconstruction, own.expand_as(reconstruction).clone(),
                                other_digit.expand_as(reconstruction).clone(), what="your own_share")
    if not hint:
        if not isinstance(result, torch.Tensor) or tuple(result.shape) != (4,):
            hint = other("shape", f"return one number per reconstruction, shape (B,) = (4,), got "
                                  f"{shape_of(result)}")
        else:
            got = dict(zip(cases, result.detach().float().tolist()))
            ok = {name: lo <= got[name] <= hi for name, (_, lo, hi) in cases.items()}
            if not all(ok.values()) and got["own"] < 0.1 and got["other"] > 0.9:
                hint = mistake("own-and-other-swapped", "own and other are swapped: the measure is 1 "
                               "when the reconstruction draws its OWN digit")
            elif not ok["both"]:
                hint = mistake("both-digits-look-segmented",
                               f"a reconstruction that draws BOTH digits scores {got['both']:.2f}, as "
                               "if it were segmented: a measure that only asks 'is my digit drawn?' "
                               "cannot tell — compare the ink on the own digit with the ink on the "
                               "other digit")
            elif not ok["other"] and 0.1 < got["other"] < 0.4:
                hint = mistake("overlap-counted", "drawing only the OTHER digit still scores above "
                               "0.1: the pixels where both digits have ink belong to neither — leave "
                               "them out")
            elif not ok["own"] or not ok["other"]:
                hint = other("values", f"a reconstruction of its own digit alone should score near 1 "
                             f"(got {got['own']:.2f}) and one of the other digit alone near 0 (got "
                             f"{got['other']:.2f})")
            elif not ok["faint own"]:
                hint = mistake("depends-on-brightness", "a faint but clean reconstruction of its own "
                               f"digit scores {got['faint own']:.2f}: the measure should not depend on "
                               "how bright the reconstruction is (a share, not an amount of ink)")
    return verdict(hint, "own_share tells a reconstruction of its own digit (near 1) from one of the "
                   "other digit (near 0) and one of both (in between), however bright.", quiet=quiet)



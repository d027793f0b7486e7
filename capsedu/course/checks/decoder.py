r"""Checks for lesson 05's Build it: masking, the decoder and the reconstruction loss (Section 4.1).
The lesson's exercises (a reconstruction from a chosen capsule, the closest input) are checked in
:mod:`.decoder_exercises`.

Each Build-it check names the mistakes met in the wild: masking by the longest capsule while
training, masking nothing, a mask along the wrong axis; a decoder that reads one 16-D capsule
(a blog's), wrong sizes, a ReLU or nothing on the output; the mean squared error, alone or
times 0.0005 (784x too weak: a blog's and the "Advanced Capsule Networks" notebook's), a sum
over the batch, unsquared errors.

Shape legend:
    B      batch size
    J      digit capsules, one per class (10)
    D_out  digit capsule dimension (16)
    P      pixels per image (784 = 28 * 28)
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from capsedu.course.checks._kit import (
    STUB_HINT,
    CheckResult,
    call_learner,
    learner_tensor,
    mistake,
    other,
    reworded,
    verdict,
)
from capsedu.nets.capsnet import mask_capsules
from capsedu.nets.losses import reconstruction_loss

MaskFn = Callable[..., torch.Tensor]
LossFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
PAPER_WIDTHS = [(160, 512), (512, 1024), (1024, 784)]


def _probe_capsules() -> tuple[torch.Tensor, torch.Tensor]:
    r"""Capsules (B, J, D_out) = (6, 10, 16) whose true labels are never the longest capsule."""
    generator = torch.Generator().manual_seed(5)
    capsules = 0.3 * torch.randn(6, 10, 16, generator=generator)  # (B, J, D_out)
    longest = capsules.norm(dim=-1).argmax(dim=1)  # (B,)
    labels = (longest + 1 + torch.arange(6) % 9) % 10  # (B,), never the longest
    return capsules, labels


def _square_capsules() -> tuple[torch.Tensor, torch.Tensor]:
    r"""Capsules (B, J, D_out) = (10, 10, 10), labels never the longest: with B = J = D_out a
    mask built along the wrong axis runs without an error, so the check can say which axis."""
    generator = torch.Generator().manual_seed(6)
    capsules = 0.3 * torch.randn(10, 10, 10, generator=generator)  # (B, J, D_out)
    longest = capsules.norm(dim=-1).argmax(dim=1)  # (B,)
    return capsules, (longest + 1 + torch.arange(10) % 9) % 10  # (B,), never the longest


def _wrong_axis_hint(fn: Callable, labels_given: bool) -> str:
    r"""The hint for a mask built along the wrong axis, found on the square probe, or ''."""
    capsules, labels = _square_capsules()
    out, problem = learner_tensor(fn, *((capsules.clone(), labels.clone()) if labels_given else (capsules.clone(),)))
    if problem or out.shape != (10, 100):
        return ""
    lengths = capsules.norm(dim=-1)  # (B, J)
    keep = lengths.argmax(dim=1) if not labels_given else labels  # (B,)
    one_hot = nn.functional.one_hot(keep, 10).to(capsules)  # (B, J)
    wrong = {mistake("mask-broadcast-wrong-axis",
                     "the 0/1 mask zeroed capsule DIMENSIONS, not capsules: the (B, J) mask must be "
                     "broadcast along the last axis, as (B, J, 1) (unsqueeze(-1)), not as (B, 1, J)"):
             (capsules * one_hot.unsqueeze(1)).flatten(1)}
    if not labels_given:
        wrong |= {mistake("argmax-over-batch",
                          "without labels take the argmax over the CLASSES (dim=1 of the (B, J) "
                          "lengths), not over the batch (dim=0)"):
                  mask_capsules(capsules, lengths.argmax(dim=0)),
                  mistake("length-over-classes",
                          "a capsule's length is its norm over its D_out numbers (the LAST axis, "
                          "dim=-1), not over the classes (dim=1)"):
                  mask_capsules(capsules, capsules.norm(dim=1).argmax(dim=1))}
    return next((hint for hint, w in wrong.items() if torch.allclose(out, w, atol=1e-6)), "")


def _mask_problem(out: torch.Tensor, capsules: torch.Tensor, keep: torch.Tensor,
                  wrong: dict[str, torch.Tensor]) -> str:
    r"""A hint when ``out`` is not ``capsules`` masked to class ``keep`` (B,) and flattened."""
    batch, classes, dim = capsules.shape
    if out.shape == capsules.shape:
        return mistake("mask-not-flattened",
                       f"shape {tuple(out.shape)}: flatten the masked capsules to (B, J*D_out) = "
                       f"({batch}, {classes * dim}) - that is the decoder's input")
    if out.shape != (batch, classes * dim):
        return other("shape",
                     f"expected shape (B, J*D_out) = ({batch}, {classes * dim}), got {tuple(out.shape)}")
    if torch.allclose(out, capsules.flatten(1)):
        return mistake("nothing-masked",
                       "nothing was masked: set every capsule to zero except the one that is kept")
    for hint, kept in wrong.items():
        if torch.allclose(out, mask_capsules(capsules, kept), atol=1e-6):
            return hint
    if not torch.allclose(out, mask_capsules(capsules, keep), atol=1e-6):
        rows = out.view(batch, classes, dim)
        if ((rows.abs().sum(dim=-1) > 0).sum(dim=1) == 1).all():
            return mistake("kept-capsule-changed",
                           "one capsule is kept per image, but its values changed: copy the kept "
                           "capsule unchanged (multiply by a 0/1 mask, do not normalise or squash it "
                           "again)")
        return other("values",
                     "the masked capsules differ from capsedu.mask_capsules: keep exactly one capsule "
                     "per image, unchanged, and zero all the others")
    return ""


def check_mask(fn: MaskFn, *, quiet: bool = False) -> CheckResult:
    r"""Check ``fn(capsules, labels=None)`` against :func:`capsedu.mask_capsules`."""
    capsules, labels = _probe_capsules()
    lengths = capsules.norm(dim=-1)  # (B, J)
    out, problem = learner_tensor(fn, capsules.clone(), labels.clone())
    if problem and problem != STUB_HINT:
        problem = _wrong_axis_hint(fn, labels_given=True) or problem
    if not problem:
        problem = _mask_problem(out, capsules, labels, {
            mistake("kept-longest-with-labels",
                    "with labels you must keep the capsule of the TRUE class, not the longest one "
                    "(the longest is only for test time, when labels is None)"):
            lengths.argmax(dim=1)})
    if not problem:
        out, problem = learner_tensor(fn, capsules.clone())
        if problem:
            problem = (_wrong_axis_hint(fn, labels_given=False)
                       or reworded(problem, problem + " (called without labels, as at test time)"))
    if not problem:
        problem = _mask_problem(out, capsules, lengths.argmax(dim=1), {
            mistake("argmin-not-argmax",
                    "without labels keep the LONGEST capsule: use argmax, not argmin"):
            lengths.argmin(dim=1),
            mistake("picked-by-sum",
                    "without labels pick by the capsule's length (its norm over the last dimension), "
                    "not by the sum of its components"): capsules.sum(dim=-1).argmax(dim=1),
            mistake("picked-by-largest-component",
                    "without labels pick by the capsule's length (its norm over the last dimension), "
                    "not by its largest component"): capsules.amax(dim=-1).argmax(dim=1)})
    return verdict(problem, "masking matches capsedu.mask_capsules: the true class with labels, "
                            "the longest capsule without", quiet=quiet)


def _linear_problem(decoder: nn.Module) -> str:
    r"""A hint when the decoder's linear layers or activations are not 160->512->1024->784."""
    layers = [m for m in decoder.modules() if m is not decoder and not list(m.children())]
    linears = [m for m in layers if isinstance(m, nn.Linear)]
    widths = [(m.in_features, m.out_features) for m in linears]
    if widths and widths[0][0] == 16 and widths[1:] == PAPER_WIDTHS[1:]:
        return mistake("decoder-reads-one-capsule",
                       "your first layer reads 16 numbers, one capsule: it must read all J*D_out = 160 "
                       "(the nine zeroed capsules too), because WHERE the kept capsule sits tells the "
                       "decoder which digit to draw")
    if widths != PAPER_WIDTHS:
        return mistake("wrong-layer-widths",
                       f"your linear layers map {widths}; the paper's decoder is three fully "
                       "connected layers 160 -> 512 -> 1024 -> 784 (16-D capsule x 10 classes in, "
                       "28x28 pixels out)")
    between = [type(m) for m in layers[layers.index(linears[0]) + 1:layers.index(linears[2])]]
    if sum(t is nn.ReLU for t in between) < 2:
        return mistake("missing-hidden-relu",
                       "put a ReLU after each of the first two linear layers: without a non-linearity "
                       "the three layers collapse to a single linear map")
    if isinstance(layers[-1], nn.ReLU):
        return mistake("relu-on-output",
                       "the output layer ends in a ReLU: its pixels are unbounded above and stuck "
                       "at 0 wherever they go negative; ReLU belongs to the two hidden layers, the "
                       "784 outputs end in a Sigmoid")
    if not isinstance(layers[-1], nn.Sigmoid):
        return mistake("no-final-sigmoid",
                       "end with a Sigmoid: pixels are in [0, 1], and the sigmoid keeps the "
                       "reconstruction in that range")
    return ""


def _decoder_problem(decoder: object) -> str:
    if not isinstance(decoder, nn.Module):
        return other("type", f"pass an nn.Module (e.g. nn.Sequential), got {type(decoder).__name__}")
    problem = _linear_problem(decoder)
    if not problem:
        masked = torch.randn(4, 160, generator=torch.Generator().manual_seed(0))  # (B, J*D_out)
        out, problem = learner_tensor(decoder, masked)
        if not problem and out.reshape(4, -1).shape != (4, 784):
            problem = other("shape",
                            f"a (4, 160) input must give 4 images of 784 pixels, got {tuple(out.shape)}")
        elif not problem and (out.min() < 0 or out.max() > 1):
            problem = mistake("no-final-sigmoid",
                              "outputs outside [0, 1]: the last layer must be a Sigmoid")
    return problem


def _built(decoder: nn.Module | Callable[[], nn.Module]) -> tuple[object, str]:
    r"""The module itself, or what a builder ``decoder()`` returns (or a hint if it raises)."""
    if isinstance(decoder, nn.Module) or not callable(decoder):
        return decoder, ""
    with torch.random.fork_rng(devices=[]):  # building draws initial weights: keep the learner's RNG
        return call_learner(decoder, what="your build_decoder()")


def check_decoder(decoder: nn.Module | Callable[[], nn.Module], *, quiet: bool = False) -> CheckResult:
    r"""Check a decoder: 160 -> 512 -> 1024 -> 784 with ReLUs and a final sigmoid.

    ``decoder`` is the module, or a function of no argument that builds it (a Build-it stub)."""
    module, problem = _built(decoder)
    problem = problem or _decoder_problem(module)
    count = 0 if problem else sum(p.numel() for p in module.parameters())
    return verdict(problem, f"decoder 160 -> 512 -> 1024 -> 784 with {count:,} parameters", quiet=quiet)


def _loss_value(fn: LossFn, recon: torch.Tensor, images: torch.Tensor) -> tuple[float | None, str]:
    value, hint = call_learner(fn, recon, images, what=(
        f"with recon of shape {tuple(recon.shape)} and images of shape {tuple(images.shape)}, your function"))
    if hint:
        return None, (hint if "raised" not in hint
                      else reworded(hint, f"{hint}. Reshape both to (B, 784) before subtracting"))
    if not isinstance(value, torch.Tensor) or value.dim() != 0:
        return None, other("shape",
                           f"return one number as a 0-D tensor, got {getattr(value, 'shape', value)}")
    return float(value), ""


def _loss_hint(value: float, recon: torch.Tensor, images: torch.Tensor) -> str:
    r"""A hint naming the usual mistake that gives ``value`` instead of the SSE per image."""
    batch = images.shape[0]
    diff = recon.reshape(batch, -1) - images.reshape(batch, -1)  # (B, P)
    candidates = {
        mistake("mean-squared-error",
                "784x too small: that is the mean squared error (F.mse_loss's default); SUM the "
                "squared errors over each image's pixels, then average over the batch"):
            (diff ** 2).mean(),
        mistake("weighted-mean-squared-error",
                "784 x 2000 too small: 0.0005 x the mean squared error is a whole total-loss term, "
                "and a 784x too weak one at that; return the plain SUM of squared errors per image, "
                "averaged over the batch (the 0.0005 comes later)"): 0.0005 * (diff ** 2).mean(),
        mistake("summed-over-batch",
                f"{batch}x too large: sum over the pixels, then AVERAGE over the batch"):
            (diff ** 2).sum(),
        mistake("weight-in-reconstruction-loss",
                "2000x too small: the 0.0005 weight belongs to the total loss, not to the "
                "reconstruction loss itself"): 0.0005 * (diff ** 2).sum(dim=1).mean(),
        mistake("errors-not-squared",
                "square the errors: use (recon - images)² not |recon - images|"):
            diff.abs().sum(dim=1).mean(),
        mistake("euclidean-distance",
                "that is the Euclidean distance: use the SUM of squared errors, without a square "
                "root"): diff.norm(dim=1).mean()}
    for hint, wrong in candidates.items():
        if abs(value - float(wrong)) <= 1e-4 * abs(float(wrong)) + 1e-7:
            return hint
    expected = float(reconstruction_loss(recon, images))
    return other("values",
                 f"got {value:.5g}, expected {expected:.5g}: square the pixel errors, sum them over "
                 "each image's 784 pixels and average over the batch")


def check_reconstruction_loss(fn: LossFn, *, quiet: bool = False) -> CheckResult:
    r"""Check ``fn(recon, images)`` against :func:`capsedu.reconstruction_loss` (SSE per image)."""
    generator = torch.Generator().manual_seed(1)
    images = torch.rand(5, 1, 28, 28, generator=generator)  # (B, 1, 28, 28)
    recon = torch.rand(5, 784, generator=generator)  # (B, P), flat like the decoder's output
    value, problem = _loss_value(fn, recon, images)
    if not problem and abs(value - float(reconstruction_loss(recon, images))) > 1e-4 * abs(value):
        problem = _loss_hint(value, recon, images)
    return verdict(problem, "reconstruction loss matches capsedu.reconstruction_loss: sum of "
                            "squared pixel errors per image, averaged over the batch", quiet=quiet)

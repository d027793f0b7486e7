r"""Checks of lesson 05's exercises: every image redrawn from the capsule of a chosen digit, and
which input a reconstruction is closest to (do reconstructions describe the instance?).

Shape legend:
    B      batch size
    N      images of one class (closest_input)
    J      digit capsules, one per class (10)
    D_out  digit capsule dimension (16)
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from capsedu.course.checks._kit import (
    CheckResult,
    learner_tensor,
    mistake,
    other,
    verdict,
)
from capsedu.course.checks._probe import probe_capsnet
from capsedu.nets.capsnet import CapsNet


def check_reconstruct_as(fn: Callable[[CapsNet, torch.Tensor, int], torch.Tensor], *,
                         quiet: bool = False) -> CheckResult:
    r"""Check ``fn(model, images, digit)``: decode every image from the capsule of ``digit``."""
    model = probe_capsnet(2)
    images = torch.rand(3, 1, 28, 28, generator=torch.Generator().manual_seed(2))  # (B, 1, 28, 28)
    with torch.no_grad():
        capsules = model(images).capsules  # (B, J, D_out)
        longest = capsules.norm(dim=-1).argmax(dim=1)  # (B,)
        digit = int((longest[0] + 3) % 10)
        expected = model.decode(capsules, torch.full((3,), digit))  # (B, 1, 28, 28)
        out, problem = learner_tensor(fn, model, images, digit)
    if not problem and out.shape != expected.shape:
        problem = other("shape", f"return images of shape {tuple(expected.shape)} (B, 1, 28, 28), "
                                 f"got {tuple(out.shape)}")
    if not problem and torch.allclose(out, model.decode(capsules), atol=1e-6):
        problem = mistake("decoded-longest-capsule",
                          "you decoded the longest capsule (the prediction): pass labels = "
                          "torch.full((B,), digit) so the capsule of `digit` is kept")
    if not problem and not torch.allclose(out, expected, atol=1e-5):
        problem = other("values",
                        "the images differ from model.decode(capsules, labels) with every label "
                        "equal to `digit`: compute the capsules with model(images).capsules first")
    return verdict(problem, f"every image is redrawn from its digit-{digit} capsule", quiet=quiet)


def _closest_probe() -> tuple[torch.Tensor, torch.Tensor]:
    r"""Inputs and reconstructions (N, 1, 28, 28), N = 6, built so that each mistake below gives
    a different answer: reconstruction k is a blurred copy of input ORDER[k]."""
    generator = torch.Generator().manual_seed(11)
    images = torch.rand(6, 1, 28, 28, generator=generator)  # (N, 1, 28, 28)
    order = torch.tensor([0, 2, 2, 3, 0, 5])  # reconstructions 1 and 4 are closest to another input
    noise = torch.rand(6, 1, 28, 28, generator=generator)  # (N, 1, 28, 28)
    weights = torch.tensor([0.9, 0.6, 0.8, 0.7, 0.6, 0.9]).view(6, 1, 1, 1)
    return images, weights * images[order] + (1 - weights) * noise


def _closest_variants(recon: torch.Tensor, images: torch.Tensor) -> dict[str, torch.Tensor]:
    r"""The right answer and the usual mistakes, each an (N,) index tensor."""
    batch = len(images)
    errors = ((recon.reshape(batch, 1, -1) - images.reshape(1, batch, -1)) ** 2).sum(dim=-1)  # (N, N)
    others = errors + torch.diag(torch.full((batch,), float("inf")))  # (N, N), own input excluded
    return {"right": errors.argmin(dim=1),
            mistake("closest-per-input",
                    "that is, for each INPUT, its closest reconstruction (argmin over the wrong "
                    "axis): the question is, for each RECONSTRUCTION k, which input it is closest "
                    "to"): errors.argmin(dim=0),
            mistake("farthest-input",
                    "that is the input FARTHEST from each reconstruction: take the smallest squared "
                    "error (argmin), not the largest"): errors.argmax(dim=1),
            mistake("own-input-left-out",
                    "you left each reconstruction's own input out: it must compete too, since the "
                    "question is whether it wins"): others.argmin(dim=1)}


def _closest_problem(fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]) -> str:
    images, recon = _closest_probe()
    variants = _closest_variants(recon, images)
    out, problem = learner_tensor(fn, recon.clone(), images.clone())
    if problem:
        return problem
    expected = variants.pop("right")
    if out.shape == (6, 6):
        return mistake("returned-distance-table",
                       "you returned the (N, N) table of distances: return, for each "
                       "reconstruction, the INDEX of its closest input, shape (N,) (argmin over the "
                       "inputs)")
    if out.shape != expected.shape or out.is_floating_point():
        return other("shape" if out.shape != expected.shape else "dtype",
                     f"return one input index per reconstruction, an integer tensor of shape (N,) = "
                     f"{tuple(expected.shape)}, got {out.dtype} {tuple(out.shape)}")
    if torch.equal(out, expected):
        return ""
    return next((hint for hint, wrong in variants.items() if torch.equal(out, wrong)),
                other("values", "compare every reconstruction with every input: the sum of squared "
                      "pixel errors over the 784 pixels, then the index of the smallest, per "
                      "reconstruction"))


def check_closest_input(fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor], *,
                        quiet: bool = False) -> CheckResult:
    r"""Check ``fn(recon (N, 1, 28, 28), images (N, 1, 28, 28)) -> (N,)``: for each reconstruction,
    the index of the input with the smallest sum of squared pixel errors."""
    return verdict(_closest_problem(fn), "closest_input finds, for every reconstruction, the input "
                   "it is nearest to (smallest sum of squared pixel errors)", quiet=quiet)

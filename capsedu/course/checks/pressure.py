r"""Checks for lesson 13 (capsules under pressure): FGSM by hand, and dead and always-on capsules.

Each check runs the learner's function on seeded inputs, compares it with capsedu's answer, and
when it differs recomputes the step with the likely mistakes to name the one that was made.

Shape legend (the lesson's layout):
    B      batch size (images in a batch)
    N      images
    I      input capsules (the primary capsules a check reads)
    C, H, W  channels, height, width
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

from capsedu.course.checks._kit import CheckResult, call_learner, diagnose, verdict
from capsedu.course.checks._probe import probe_capsnet
from capsedu.explore.attacks import ScoresAsLogits, fgsm
from capsedu.explore.critique import capsule_activity

EPS = 0.1


def _pixel_gradient(model: torch.nn.Module, images: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    x = images.detach().clone().requires_grad_(True)
    return torch.autograd.grad(F.cross_entropy(ScoresAsLogits(model)(x), labels), x)[0]  # (B, C, H, W)


def check_fgsm(fn: Callable, *, quiet: bool = False) -> CheckResult:
    r"""Check ``fn(model, images, labels, eps) -> attacked images``: FGSM on the course's loss."""
    generator = torch.Generator().manual_seed(13)
    model = probe_capsnet(13).train()  # left in train mode: the attack must not change it
    images = torch.rand(4, 1, 28, 28, generator=generator)  # (B, C, H, W)
    labels = torch.tensor([3, 1, 4, 1])
    original = images.clone()
    result, hint = call_learner(fn, model, images, labels, EPS, what="your fgsm")
    if not hint and (not torch.equal(images, original) or images.requires_grad):
        hint = ("your fgsm changed the images it was given: work on a copy "
                "(images.detach().clone().requires_grad_(True))")
        images = original
    if not hint and not model.training:
        hint = ("your fgsm left the network in eval mode: put it back as you found it "
                "(with capsedu.eval_mode(model): ...)")
    if not hint and isinstance(result, torch.Tensor) and result.requires_grad:
        hint = "return the attacked images detached from the graph (.detach())"
    gradient = _pixel_gradient(model, images, labels)
    mistakes = [(lambda: images + EPS * gradient.sign(), "clip the attacked images to [0, 1]: they are "
                 "still images (.clamp(0, 1))"),
                (lambda: (images - EPS * gradient.sign()).clamp(0, 1), "that step goes DOWN the loss, "
                 "making the network surer: add eps * sign(gradient)"),
                (lambda: (images + EPS * gradient).clamp(0, 1), "take the SIGN of the gradient: every "
                 "pixel moves by exactly eps (an L-infinity step)"),
                (lambda: (images + EPS * gradient / gradient.norm()).clamp(0, 1), "take the SIGN of the "
                 "gradient, not the gradient scaled to length 1")]
    hint = hint or diagnose(result, fgsm(model, images, labels, EPS), mistakes,
                            "images + eps * sign of the gradient of F.cross_entropy(ScoresAsLogits(model)"
                            "(images), labels) with respect to the images, clipped to [0, 1]",
                            what="attacked images", atol=1e-6)
    return verdict(hint, "fgsm moves every pixel by eps the way that raises the loss most.", quiet=quiet)


def check_activity(fn: Callable, *, quiet: bool = False) -> CheckResult:
    r"""Check ``fn(lengths (N, I), threshold) -> (dead, always_on)``: the shares of capsules on for
    no image and for every image."""
    generator = torch.Generator().manual_seed(7)
    lengths = torch.rand(20, 12, generator=generator)  # (N, I)
    lengths[:, 0], lengths[:, 1] = 0.05, 0.95  # one dead, one always on
    lengths[:, 2], lengths[0, 2] = 0.5, 0.3  # on the threshold (not on) or below: dead
    lengths[:, 4] = torch.linspace(0.51, 0.99, 20)
    lengths[:, 5] = 0.0  # a second dead one: dead and always-on shares differ
    result, hint = call_learner(fn, lengths.clone(), 0.5, what="your activity")
    expected = torch.tensor(capsule_activity(lengths, 0.5)[:2], dtype=torch.float64)
    try:
        result = torch.tensor([float(x) for x in result], dtype=torch.float64)  # (dead, always_on)
    except (TypeError, ValueError, RuntimeError):
        pass  # diagnose names what came back instead

    def shares(on: torch.Tensor, dim: int) -> torch.Tensor:
        share = on.float().mean(dim=dim)
        return torch.tensor([float((share == 0).float().mean()), float((share == 1).float().mean())],
                            dtype=torch.float64)
    mistakes = [(lambda: shares(lengths > 0.5, 1), "that counts IMAGES with no capsule on: a capsule is "
                 "dead when it is off for every image - take the share of images per capsule (dim 0)"),
                (lambda: shares(lengths >= 0.5, 0), "a capsule is on when its length is ABOVE the "
                 "threshold (>), not at it"),
                (lambda: shares(lengths > 0.5, 0).flip(0), "the order is (dead, always_on)")]
    hint = hint or diagnose(result, expected, mistakes,
                            "per capsule, the share of images on which its length > threshold; dead: "
                            "share 0, always on: share 1; return the share of capsules of each kind",
                            what="a pair (dead, always_on)", atol=1e-9)
    return verdict(hint, "activity finds capsules that never switch on and ones that never switch off.",
                   quiet=quiet)

r"""Checks for lesson 13 (capsules under pressure): FGSM by hand, FGSM on the margin loss, the
vote attack's network (every coupling 1/J), and the class capsules' lengths before the squash.

Each check runs the learner's attack on a tiny seeded CapsNet, first for what an attack must not
do (change the images it was given, change the network's mode, leave gradients in its weights),
then compares the attacked images with capsedu's and, when they differ, recomputes the step with
the likely mistakes to name the one that was made.

Shape legend (the lesson's layout):
    B      batch size (images in a batch)
    J      classes (class capsules)
    C, H, W  channels, height, width
    I      input (lower) capsules
    D      a capsule's dimension
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

from capsedu.course.checks._kit import CheckResult, call_learner, diagnose, mistake, other, verdict
from capsedu.course.checks._probe import probe_capsnet
from capsedu.explore.adaptive import UniformCouplings
from capsedu.explore.attacks import ScoresAsLogits, fgsm
from capsedu.nets.losses import margin_loss
from capsedu.nets.squash import squash

EPS = 0.1


def _watched_probe(seed: int) -> tuple[torch.nn.Module, list[bool]]:
    r"""A probe CapsNet in training mode, and a list that records its mode at every forward pass."""
    model = probe_capsnet(seed).train()  # left in train mode: the attack must switch and restore it
    modes: list[bool] = []
    model.conv1.register_forward_pre_hook(lambda module, args: modes.append(module.training))
    return model, modes


def _gradient(model: torch.nn.Module, images: torch.Tensor, labels: torch.Tensor, loss: str) -> torch.Tensor:
    x = images.detach().clone().requires_grad_(True)
    scores = model.class_scores(x)  # (B, J)
    value = F.cross_entropy(scores.clamp_min(1e-30).log(), labels) if loss == "ce" else margin_loss(scores, labels)
    return torch.autograd.grad(value, x)[0]  # (B, C, H, W)


def _conduct(fn: Callable, model: torch.nn.Module, modes: list[bool], images: torch.Tensor,
             labels: torch.Tensor, what: str) -> tuple[object, str]:
    r"""The learner's attacked images and a hint about what the attack must not do ('' if none)."""
    original = images.clone()
    result, hint = call_learner(fn, model, images, labels, EPS, what=f"your {what}")
    if hint:
        return result, hint
    if not torch.equal(images, original) or images.requires_grad:
        return result, mistake("changed-given-images",
                               f"your {what} changed the images it was given: work on a detached "
                               "copy that requires a gradient, and leave the caller's tensor as it was")
    if not model.training:
        return result, mistake("left-network-in-eval-mode",
                               f"your {what} left the network in eval mode: put it back as you found "
                               "it (with capsedu.eval_mode(model): ... does both)")
    if any(modes):
        return result, mistake("gradient-in-training-mode",
                               f"your {what} took its gradient with the network in training mode: "
                               "switch to eval mode first (the CNN's dropout would make the gradient "
                               "random)")
    if any(p.grad is not None for p in model.parameters()):
        return result, mistake("gradients-left-in-weights",
                               f"your {what} left gradients in the network's weights (loss.backward() "
                               "fills them): take the gradient with respect to the images only "
                               "(torch.autograd.grad)")
    if isinstance(result, torch.Tensor) and result.requires_grad:
        return result, mistake("result-not-detached",
                               "return the attacked images detached from the graph (.detach())")
    model.eval()
    call_learner(fn, model, images, labels, EPS, what=f"your {what}")
    if model.training:
        return result, mistake("left-network-in-training-mode",
                               f"your {what} left a network that was in eval mode in training mode: "
                               "restore the mode it had, whichever it was (capsedu.eval_mode does)")
    return result, ""


def _check_attack(fn: Callable, loss: str, seed: int, what: str,
                  extra: Callable[..., list], otherwise: str, success: str, quiet: bool) -> CheckResult:
    r"""Run ``fn(model, images, labels, eps)`` on a probe and name its mistake, if any."""
    generator = torch.Generator().manual_seed(seed)
    model, modes = _watched_probe(seed)
    images = torch.rand(4, 1, 28, 28, generator=generator)  # (B, C, H, W)
    labels = torch.tensor([3, 1, 4, 1])
    result, hint = _conduct(fn, model, modes, images, labels, what)
    if not hint:
        model.eval()
        gradient = _gradient(model, images, labels, loss)  # (B, C, H, W)
        step = gradient.sign()
        mistakes = [
            (lambda: images + EPS * step, mistake(
                "not-clipped", "clip the attacked images to [0, 1]: they are still images")),
            (lambda: (images - EPS * step).clamp(0, 1), mistake(
                "stepped-down-the-loss", "that step goes DOWN the loss, making the network surer of "
                "the right answer: an attack climbs it")),
            (lambda: (images + EPS * gradient).clamp(0, 1), mistake(
                "gradient-not-signed", "take the SIGN of the gradient: every pixel moves by exactly "
                "eps (the whole L-infinity budget), however small its gradient")),
            (lambda: (images + EPS * gradient / gradient.norm()).clamp(0, 1), mistake(
                "normalised-gradient-not-signed", "take the SIGN of the gradient, not the gradient "
                "scaled to length 1: every pixel moves by exactly eps")),
            (lambda: (images * (1 + EPS * step)).clamp(0, 1), mistake(
                "relative-step", "eps is an absolute change of a pixel (pixels in [0, 1]), not a "
                "fraction of its value: a dark pixel may move by eps too")),
            *extra(model, images, labels),
        ]
        hint = diagnose(result, fgsm(model, images, labels, EPS, loss=loss), mistakes, otherwise,
                        what="attacked images", atol=1e-6)
    return verdict(hint, success, quiet=quiet)


def check_fgsm(fn: Callable, *, quiet: bool = False) -> CheckResult:
    r"""Check ``fn(model, images, labels, eps) -> attacked images``: FGSM on the course's loss,
    the cross-entropy of ``ScoresAsLogits(model)``."""
    def extra(model, images, labels):
        margin_gradient = _gradient(model, images, labels, "margin")  # (B, C, H, W)
        return [(lambda: (images + EPS * margin_gradient.sign()).clamp(0, 1), mistake(
                    "climbed-margin-loss", "that climbs the margin loss: FGSM here climbs "
                    "F.cross_entropy(ScoresAsLogits(model)(images), labels)"))]
    return _check_attack(fn, "ce", 13, "fgsm", extra,
                         other("values", "each pixel should move by eps, the way that raises the "
                               "cross-entropy of ScoresAsLogits(model) most, and stay in [0, 1]"),
                         "fgsm moves every pixel by eps the way that raises the loss most, and leaves "
                         "the images and the network as it found them.", quiet)


def check_margin_fgsm(fn: Callable, *, quiet: bool = False) -> CheckResult:
    r"""Check ``fn(model, images, labels, eps) -> attacked images``: one FGSM step that climbs the
    margin loss (Eq. 4) of the class capsules' lengths."""
    def extra(model, images, labels):
        ce_gradient = _gradient(model, images, labels, "ce")  # (B, C, H, W)
        x = images.clone().requires_grad_(True)
        on_logs = torch.autograd.grad(margin_loss(ScoresAsLogits(model)(x), labels), x)[0]  # (B, C, H, W)
        return [(lambda: (images + EPS * ce_gradient.sign()).clamp(0, 1), mistake(
                    "climbed-cross-entropy", "that is the cross-entropy FGSM of Build it: climb "
                    "capsedu.margin_loss of the class capsules' lengths instead")),
                (lambda: (images + EPS * on_logs.sign()).clamp(0, 1), mistake(
                    "margin-loss-on-log-scores", "the margin loss takes the lengths themselves, "
                    "model.class_scores(images) in [0, 1], not their logarithm"))]
    return _check_attack(fn, "margin", 14, "margin_fgsm", extra,
                         other("values", "each pixel should move by eps, the way that raises "
                               "capsedu.margin_loss of model.class_scores(images) most, and stay in "
                               "[0, 1]"),
                         "margin_fgsm climbs the capsules' own training loss by one signed step.", quiet)


def check_vote_scores(fn: Callable, *, quiet: bool = False) -> CheckResult:
    r"""Check ``fn(model, images) -> lengths (B, J)``: the CapsNet's class capsules with every coupling
    1/J (one routing iteration), the network the vote attack climbs (Gu, Wu & Tresp 2021)."""
    model = probe_capsnet(15)
    images = torch.rand(3, 1, 28, 28, generator=torch.Generator().manual_seed(15)).requires_grad_(True)
    result, hint = call_learner(fn, model, images, what="your vote_scores")
    if not hint and isinstance(result, torch.Tensor) and not result.requires_grad:
        hint = mistake("scores-without-gradient", "your scores carry no gradient back to the images "
                       "(torch.no_grad or .detach()?): the vote attack climbs their gradient")
    if not hint:
        with torch.no_grad():
            u_hat = model.class_caps.prediction_vectors(model.encode(images))  # (B, I, J, D)
            classes = u_hat.shape[2]  # J
            mistakes = [
                (lambda: (u_hat.sum(dim=1) / classes).norm(dim=-1), mistake(
                    "not-squashed", "squash the weighted sum of the votes (Eq. 1): a class capsule's "
                    "length lies in [0, 1)")),
                (lambda: squash(u_hat.mean(dim=1), dim=-1).norm(dim=-1), mistake(
                    "mean-over-inputs", "each coupling is 1/J - every input capsule shares itself "
                    "equally among the J classes - so s_j is the sum over i divided by J, not the "
                    "mean over the I input capsules")),
                (lambda: squash(u_hat.sum(dim=1), dim=-1).norm(dim=-1), mistake(
                    "couplings-missing", "weigh each vote by its coupling c_ij = 1/J before summing "
                    "over the input capsules")),
                (lambda: model.class_scores(images), mistake(
                    "routed-scores", "those are the routed network's lengths (three iterations): "
                    "with every coupling at 1/J there is no agreement step")),
            ]
            expected = UniformCouplings(model).class_scores(images)  # (B, J)
            hint = diagnose(result.detach() if isinstance(result, torch.Tensor) else result, expected, mistakes,
                            other("values", "each class capsule should be squash(sum_i u_hat_{j|i} / J), "
                                  "and the scores its length"),
                            what="class capsule lengths", atol=1e-6)
    return verdict(hint, "vote_scores squashes the votes summed with every coupling at 1/J: the network "
                   "the vote attack climbs.", quiet=quiet)


def reference_pre_squash(model: torch.nn.Module, images: torch.Tensor) -> torch.Tensor:
    r"""The CapsNet's class capsules' lengths before their last squash, (B, J): ``||s_j||`` of the
    votes summed with the couplings routing ends with."""
    u_hat = model.class_caps.prediction_vectors(model.encode(images))  # (B, I, J, D)
    c = model(images, return_couplings=True).couplings  # (B, I, J)
    return torch.einsum("bij,bijd->bjd", c, u_hat).norm(dim=-1)  # (B, J)


def check_pre_squash(fn: Callable, *, quiet: bool = False) -> CheckResult:
    r"""Check ``fn(model, images) -> (B, J)``: the lengths ``||s_j||`` of the class capsules before
    routing's last squash, with their gradient to the images."""
    model = probe_capsnet(16)
    images = torch.rand(3, 1, 28, 28, generator=torch.Generator().manual_seed(16)).requires_grad_(True)
    before = images.detach().clone()
    result, hint = call_learner(fn, model, images, what="your pre_squash_lengths")
    if not hint and not torch.equal(images.detach(), before):
        hint = mistake("changed-given-images", "your function changed the images in place")
    if not hint and isinstance(result, torch.Tensor) and not result.requires_grad:
        hint = mistake("lengths-without-gradient", "your lengths carry no gradient back to the images "
                       "(torch.no_grad or .detach()?): an attack climbs their gradient")
    if not hint:
        with torch.no_grad():
            u_hat = model.class_caps.prediction_vectors(model.encode(images))  # (B, I, J, D)
            mistakes = [
                (lambda: model.class_scores(images), mistake(
                    "after-the-squash", "those are the lengths after the squash, ||v_j||: the view asked "
                    "for is the one before it, the weighted sum of the votes")),
                (lambda: (u_hat.sum(dim=1) / u_hat.shape[2]).norm(dim=-1), mistake(
                    "uniform-couplings", "those are the couplings routing starts with, 1/J: use the ones it "
                    "ends with, model(images, return_couplings=True).couplings")),
                (lambda: u_hat.sum(dim=1).norm(dim=-1), mistake(
                    "couplings-missing", "weigh each vote by its coupling c_ij before summing over the input "
                    "capsules")),
            ]
            hint = diagnose(result.detach() if isinstance(result, torch.Tensor) else result,
                            reference_pre_squash(model, images), mistakes,
                            other("values", "the lengths differ from those of the couplings-weighted sums of "
                                            "the votes, summed over the input capsules"),
                            what="one length per image and class", rtol=1e-4, atol=1e-6)
    return verdict(hint, "pre_squash_lengths reads the class capsules before routing's last squash.", quiet=quiet)

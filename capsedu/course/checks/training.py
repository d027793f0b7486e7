r"""Checks for lesson 06: one training step (on the network's own ``loss``), where the margin loss still pulls, and the digit
capsules with uniform couplings (routing switched off).

Shape legend:
    B      batch size
    N      number of images over a whole loader
    J      number of classes (10)
    I      input (lower) capsules
    D      a capsule's dimension

The step's check names the usual mistakes: no ``zero_grad`` (gradients add up over batches),
``step`` before ``backward``, no ``step``, the loss returned as a tensor instead of a float, the
decoder masked by the prediction instead of the label, only the margin loss.

A training step minimises the total CapsNet loss, margin loss (Eq. 4) + 0.0005 x reconstruction
loss (Section 4.1), with the decoder masked by the true labels.
"""

from __future__ import annotations

import copy
from collections.abc import Callable

import torch

from capsedu.course.checks._kit import CheckResult, call_learner, mistake, other, verdict
from capsedu.course.checks._probe import probe_capsnet
from capsedu.nets.capsnet import CapsNet, capsnet_loss
from capsedu.nets.contract import Loss
from capsedu.nets.losses import margin_loss
from capsedu.nets.squash import squash

Batch = tuple[torch.Tensor, torch.Tensor]
StepFn = Callable[[CapsNet, torch.optim.Optimizer, torch.Tensor, torch.Tensor], object]


class _LossProbe(CapsNet):
    r"""A CapsNet with the ``loss(images, labels)`` method of lesson 06's MyCapsNet: capsnet_loss."""

    def loss(self, images: torch.Tensor, labels: torch.Tensor) -> Loss:
        value, lengths = capsnet_loss(self, images, labels)
        return Loss(value, (lengths.argmax(dim=1) == labels).sum())


def _loss_probe(seed: int) -> _LossProbe:
    tiny = probe_capsnet(seed)
    with torch.random.fork_rng(devices=[]):  # the learner's random state stays as it was
        model = _LossProbe(tiny.config)
    model.load_state_dict(tiny.state_dict())
    return model


def _probe_batch(seed: int, batch: int = 6) -> Batch:
    generator = torch.Generator().manual_seed(seed)
    images = torch.rand(batch, 1, 28, 28, generator=generator)  # (B, 1, 28, 28)
    return images, torch.randint(0, 10, (batch,), generator=generator)  # (B,)


def _params(model: CapsNet) -> torch.Tensor:
    return torch.cat([p.detach().flatten() for p in model.parameters()])


def _reference_steps(model: CapsNet, batches: list[Batch], accumulate: bool) -> torch.Tensor:
    r"""Parameters after SGD steps on ``capsnet_loss``; ``accumulate`` forgets ``zero_grad``."""
    model = copy.deepcopy(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    for images, labels in batches:
        if not accumulate:
            optimizer.zero_grad()
        capsnet_loss(model, images, labels)[0].backward()
        optimizer.step()
    return _params(model)


def _decoded_classes(before: CapsNet, after: CapsNet) -> set[int]:
    r"""Classes whose capsule's columns of the decoder's first layer changed in a step."""
    first = next(m for m in after.decoder if isinstance(m, torch.nn.Linear))
    index = list(after.decoder).index(first)
    change = (first.weight - before.decoder[index].weight).detach().abs()  # (hidden, J*D_out)
    per_class = change.sum(dim=0).view(after.config.num_classes, -1).sum(dim=1)  # (J,)
    return set(torch.nonzero(per_class).flatten().tolist())


def _loss_problem(returned: object, model: CapsNet, images: torch.Tensor,
                  labels: torch.Tensor) -> str:
    r"""A hint when the returned loss is not ``capsnet_loss`` of the model before the step."""
    if isinstance(returned, torch.Tensor):
        return mistake("returned-loss-tensor",
                       "you returned the loss tensor: return loss.item(), a Python float - a tensor "
                       "that needs grad keeps the whole autograd graph of the batch alive, and a loop "
                       "that adds them up keeps every batch's graph in memory")
    try:
        value = float(returned)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return other("type", f"return the batch's loss as a number (loss.item()), got "
                             f"{type(returned).__name__}")
    with torch.no_grad():
        expected = float(capsnet_loss(model, images, labels)[0])
        out = model(images)  # decoder masked by the longest capsule
        unmasked = float(margin_loss(out.lengths, labels)
                         + 0.0005 * ((out.reconstruction - images) ** 2).sum(dim=(1, 2, 3)).mean())
        margin_only = float(margin_loss(out.lengths, labels))
    if abs(value - expected) <= 1e-4 * abs(expected):
        return ""
    if abs(value - margin_only) <= 1e-4 * margin_only:
        return mistake("margin-loss-only", "the loss is only the margin loss: add 0.0005 x the "
                       "reconstruction loss (model.loss does both)")
    if abs(value - unmasked) <= 1e-4 * unmasked:
        return mistake("decoder-masked-by-prediction",
                       "the decoder was masked by the prediction: in training call "
                       "model(images, labels) so it redraws the TRUE class capsule (or use "
                       "model.loss(images, labels))")
    return other("values", f"the returned loss {value:.5g} is not model.loss(images, labels).value "
                           f"= {expected:.5g} computed before the update")


def _step_problem(fn: StepFn) -> str:
    r"""A hint when two calls of ``fn`` are not two plain steps on ``capsnet_loss``, else ''."""
    model = _loss_probe(0).train()
    batches = [_probe_batch(1), _probe_batch(2)]
    start = copy.deepcopy(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    steps = []  # one entry per optimizer.step() call
    optimizer.register_step_pre_hook(lambda *_: steps.append(1))
    returned, problem = call_learner(fn, model, optimizer, *batches[0])
    if problem:
        return problem
    problem = _loss_problem(returned, start, *batches[0])
    after_one, one_step = _params(model), copy.deepcopy(model)
    if not problem:
        _, problem = call_learner(fn, model, optimizer, *batches[1])
    after_two = _params(model)
    if not problem and torch.equal(after_one, _params(start)):
        graded = any(p.grad is not None and bool(p.grad.abs().sum() > 0) for p in model.parameters())
        if not steps:
            problem = mistake("no-optimizer-step", "the weights did not change: after "
                              "loss.backward() call optimizer.step()")
        elif graded:
            problem = mistake("step-before-backward",
                              "the weights did not change, yet the gradients are there: "
                              "optimizer.step() ran BEFORE loss.backward(), with no gradients to "
                              "follow; backward first, then step")
        else:
            problem = mistake("no-backward", "the weights did not change: call loss.backward() "
                              "and then optimizer.step()")
    if not problem and _decoded_classes(start, one_step) != set(batches[0][1].tolist()):
        problem = mistake("decoder-masked-by-prediction",
                          "the decoder learned from the wrong capsules: in training call "
                          "model(images, labels) so the mask keeps the TRUE class capsule (or use "
                          "model.loss(images, labels))")
    if not problem and not torch.allclose(after_one, _reference_steps(start, batches[:1], False),
                                          atol=1e-6):
        problem = other("gradient",
                        "one step changed the weights differently from a step on model.loss: "
                        "backpropagate the same loss you return, once per call")
    if not problem and torch.allclose(after_two, _reference_steps(start, batches, True), atol=1e-6):
        problem = mistake("no-zero-grad",
                          "gradients from the previous batch were added to this one: call "
                          "optimizer.zero_grad() before loss.backward()")
    if not problem and not torch.allclose(after_two, _reference_steps(start, batches, False), atol=1e-6):
        problem = other("values", "the second step went wrong: zero the gradients, backward, "
                        "step - in that order, every call")
    return problem


def check_train_step(fn: StepFn, *, quiet: bool = False) -> CheckResult:
    r"""Check ``fn(model, optimizer, images, labels) -> loss``: one step on ``model.loss``
    (the total CapsNet loss, labels masking the decoder)."""
    return verdict(_step_problem(fn), "one training step: loss = model.loss(images, labels).value "
                                      "(labels mask the decoder), zero_grad -> backward -> step", quiet=quiet)


MarginFn = Callable[[torch.Tensor, torch.Tensor], object]
UniformFn = Callable[[CapsNet, torch.Tensor], object]
# six digits' capsule lengths (B, J) and labels: where does Eq. 4 still pull?
_LENGTHS = torch.tensor([[0.95] + [0.05] * 9,  # right and past both margins: no loss
                         [0.85] + [0.05] * 9,  # the true capsule too short
                         [0.95, 0.15] + [0.05] * 8,  # an absent class too long
                         [0.90] + [0.10] * 9,  # exactly at both margins: no loss
                         [0.50] + [0.05] * 9,  # classified right, but still pulled up
                         [0.92, 0.95] + [0.05] * 8])  # past m+, yet a rival is longer
_PULLED = [False, True, True, False, True, True]
_MARGIN_MISTAKES = {
    (False, True, False, False, True, False): mistake(
        "true-capsule-only", "you check only the true capsule against m+ = 0.9: "
        "Eq. 4 also pulls every ABSENT class whose capsule is longer than m- = 0.1"),
    (False, False, True, False, False, True): mistake(
        "absent-classes-only", "you check only the absent classes against m- = 0.1: "
        "the true capsule must also reach m+ = 0.9"),
    (False, True, True, True, True, True): mistake(
        "margin-inclusive", "a length exactly at a margin costs nothing "
        "(max(0, 0.9 - 0.9) = 0): use < 0.9 and > 0.1, not <= and >="),
    (False, False, False, False, False, True): mistake(
        "misclassified-only", "a misclassified digit is not the only one the loss "
        "pulls on: lengths on the wrong side of a margin cost something even when the argmax is right"),
}


def _margin_problem(fn: MarginFn) -> str:
    labels = torch.zeros(len(_LENGTHS), dtype=torch.long)
    result, problem = call_learner(fn, _LENGTHS.clone(), labels, what="your margin_violations")
    if problem:
        return problem
    if not isinstance(result, torch.Tensor) or result.shape != labels.shape:
        return other("shape",
                     f"return one True/False per digit, a (B,) = {tuple(labels.shape)} tensor, got "
                     f"{tuple(result.shape) if isinstance(result, torch.Tensor) else type(result).__name__}")
    got = tuple(bool(x) for x in result.tolist())
    if list(got) == _PULLED:
        return ""
    return _MARGIN_MISTAKES.get(got, other("values", "a digit is pulled when its true capsule is "
                                           "shorter than 0.9 or any other capsule longer than 0.1 (the "
                                           "two terms of Eq. 4)"))


def check_margin_violations(fn: MarginFn, *, quiet: bool = False) -> CheckResult:
    r"""Check ``fn(lengths (B, J), labels (B,)) -> (B,)`` bool: where the margin loss is not zero."""
    return verdict(_margin_problem(fn), "margin_violations finds every digit the margin loss still "
                   "pulls on: true capsule < 0.9, or another capsule > 0.1", quiet=quiet)


def _uniform_variants(model: CapsNet, images: torch.Tensor) -> dict[str, torch.Tensor]:
    r"""The right answer, routing with r = 1, and the usual mistakes, as lengths (B, J)."""
    with torch.no_grad():
        u_hat = model.class_caps.prediction_vectors(model.encode(images))  # (B, I, J, D)
        s = u_hat.sum(dim=1) / u_hat.shape[2]  # (B, J, D): c_ij = 1/J for every i, j
        return {"right": squash(s).norm(dim=-1),
                mistake("mean-over-inputs", "the mean over the I inputs (c = 1/I) instead of "
                        "c_ij = 1/J: s_j = sum_i u_hat / J"): squash(u_hat.mean(dim=1)).norm(dim=-1),
                mistake("not-squashed", "lengths longer than 1: squash s_j (Eq. 1) before taking "
                        "its length"): s.norm(dim=-1),
                mistake("routed-with-iterations",
                        "that is the network's own routing (3 iterations): with every c_ij = 1/J "
                        "there is no iteration, s_j is the plain sum of the votes divided by J"):
                    model(images).lengths}


def _uniform_problem(fn: UniformFn) -> str:
    model, (images, _) = probe_capsnet(5), _probe_batch(7, batch=4)
    variants = _uniform_variants(model, images)
    torch.testing.assert_close(variants["right"], model(images, routing_iterations=1).lengths)
    with torch.no_grad():
        result, problem = call_learner(fn, model, images.clone(), what="your uniform_lengths")
    if problem:
        return problem
    expected = variants.pop("right")
    if not isinstance(result, torch.Tensor) or result.shape != expected.shape:
        return other("shape",
                     f"return the digit capsules' LENGTHS, shape (B, J) = {tuple(expected.shape)}, got "
                     f"{tuple(result.shape) if isinstance(result, torch.Tensor) else type(result).__name__}")
    if torch.allclose(result.detach(), expected, atol=1e-5):
        return ""
    return next((hint for hint, wrong in variants.items() if torch.allclose(result.detach(), wrong, atol=1e-5)),
                other("values", "with uniform couplings s_j = (1/J) sum_i u_hat_{j|i}, "
                      "v_j = squash(s_j); return |v_j|"))


def check_uniform_lengths(fn: UniformFn, *, quiet: bool = False) -> CheckResult:
    r"""Check ``fn(model, images) -> (B, J)``: digit-capsule lengths with every coupling 1/J."""
    return verdict(_uniform_problem(fn), "uniform couplings give exactly the network's output with "
                   "r = 1: s_j = (1/J) sum_i u_hat_{j|i}, no agreement step", quiet=quiet)

r"""Checks for lesson 06: one training step, accuracy over a loader and the confusion matrix.

Shape legend:
    B      batch size
    N      number of images over a whole loader
    J      number of classes (10)

A training step minimises the total CapsNet loss, margin loss (Eq. 4) + 0.0005 x reconstruction
loss (Section 4.1), with the decoder masked by the true labels.
"""

from __future__ import annotations

import copy
from collections.abc import Callable

import torch

from capsedu.course.checks._kit import CheckResult, call_learner, verdict
from capsedu.course.checks._probe import probe_capsnet
from capsedu.nets.capsnet import CapsNet, capsnet_loss
from capsedu.nets.losses import margin_loss
from capsedu.training.loop import evaluate

Batch = tuple[torch.Tensor, torch.Tensor]
StepFn = Callable[[CapsNet, torch.optim.Optimizer, torch.Tensor, torch.Tensor], object]


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
    try:
        value = float(returned)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return f"return the batch's loss as a number (loss.item()), got {type(returned).__name__}"
    with torch.no_grad():
        expected = float(capsnet_loss(model, images, labels)[0])
        out = model(images)  # decoder masked by the longest capsule
        unmasked = float(margin_loss(out.lengths, labels)
                         + 0.0005 * ((out.reconstruction - images) ** 2).sum(dim=(1, 2, 3)).mean())
        margin_only = float(margin_loss(out.lengths, labels))
    if abs(value - expected) <= 1e-4 * abs(expected):
        return ""
    if abs(value - margin_only) <= 1e-4 * margin_only:
        return "the loss is only the margin loss: add 0.0005 x the reconstruction loss (capsnet_loss does both)"
    if abs(value - unmasked) <= 1e-4 * unmasked:
        return ("the decoder was masked by the prediction: in training call model(images, labels) so "
                "it redraws the TRUE class capsule (or use capsedu.capsnet_loss)")
    return (f"the returned loss {value:.5g} is not capsnet_loss(model, images, labels) = {expected:.5g} "
            "computed before the update")


def _step_problem(fn: StepFn) -> str:
    r"""A hint when two calls of ``fn`` are not two plain steps on ``capsnet_loss``, else ''."""
    model = probe_capsnet(0).train()
    batches = [_probe_batch(1), _probe_batch(2)]
    start = copy.deepcopy(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    returned, problem = call_learner(fn, model, optimizer, *batches[0])
    if problem:
        return problem
    problem = _loss_problem(returned, start, *batches[0])
    after_one, one_step = _params(model), copy.deepcopy(model)
    if not problem:
        _, problem = call_learner(fn, model, optimizer, *batches[1])
    after_two = _params(model)
    if not problem and torch.equal(after_one, _params(start)):
        problem = "the weights did not change: call loss.backward() and then optimizer.step()"
    if not problem and _decoded_classes(start, one_step) != set(batches[0][1].tolist()):
        problem = ("the decoder learned from the wrong capsules: in training call "
                   "model(images, labels) so the mask keeps the TRUE class capsule (or use "
                   "capsedu.capsnet_loss)")
    if not problem and not torch.allclose(after_one, _reference_steps(start, batches[:1], False),
                                          atol=1e-6):
        problem = ("one step changed the weights differently from a step on capsnet_loss: "
                   "backpropagate the same loss you return, once per call")
    if not problem and torch.allclose(after_two, _reference_steps(start, batches, True), atol=1e-6):
        problem = ("gradients from the previous batch were added to this one: call "
                   "optimizer.zero_grad() before loss.backward()")
    if not problem and not torch.allclose(after_two, _reference_steps(start, batches, False), atol=1e-6):
        problem = "the second step went wrong: zero the gradients, backward, step - in that order, every call"
    return problem


def check_train_step(fn: StepFn, *, quiet: bool = False) -> CheckResult:
    r"""Check ``fn(model, optimizer, images, labels) -> loss``: one step on ``capsnet_loss``."""
    return verdict(_step_problem(fn), "one training step: loss = capsnet_loss (labels mask the "
                                      "decoder), zero_grad -> backward -> step", quiet=quiet)


def _probe_loader(model: CapsNet) -> tuple[list[Batch], float]:
    r"""Batches of 4, 4 and 2 images whose labels are right for 4/4, 2/4 and 1/2 of them."""
    images, _ = _probe_batch(3, batch=10)
    with torch.no_grad():
        lengths = model(images).lengths  # (N, J)
    best, worst = lengths.argmax(dim=1), lengths.argmin(dim=1)  # (N,)
    right = torch.tensor([1, 1, 1, 1, 1, 0, 1, 0, 1, 0], dtype=torch.bool)
    labels = torch.where(right, best, (best + 1 + (best + 1 == worst).long()) % 10)  # (N,)
    batches = [(images[i:i + 4], labels[i:i + 4]) for i in (0, 4, 8)]
    return batches, 0.7


def _accuracy_problem(fn: Callable[[CapsNet, list[Batch]], object]) -> str:
    model = probe_capsnet(4)
    loader, expected = _probe_loader(model)
    value, problem = call_learner(fn, model, loader)
    if problem:
        return problem if "raised" not in problem else (
            f"{problem}; it should return one number, the fraction of images classified right")
    try:
        value = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return f"return one number (the fraction right), got {type(value).__name__}"
    reference = evaluate(model, loader)["accuracy"]
    hints = {70.0: "that is a percentage: return the fraction in [0, 1] (correct / total)",
             7 / 3: "you divided by the number of batches: divide by the number of IMAGES",
             (1 + 0.5 + 0.5) / 3: "you averaged the per-batch accuracies, but the last batch is "
                                  "smaller: count correct images over all batches, then divide",
             0.5: "only one batch was counted: add up correct predictions over every batch",
             0.0: "no image counted as right: predict with the LONGEST capsule, "
                  "lengths.argmax(dim=1)"}
    if abs(value - reference) <= 1e-6 and abs(reference - expected) <= 1e-6:
        return ""
    return next((h for v, h in hints.items() if abs(value - v) < 1e-6),
                f"got {value:.4g}, expected {expected}: predict with lengths.argmax(dim=1), count the "
                "matches with the labels over all batches and divide by the number of images")


def check_accuracy(fn: Callable[[CapsNet, list[Batch]], object], *, quiet: bool = False) -> CheckResult:
    r"""Check ``fn(model, loader) -> fraction right`` against :func:`capsedu.evaluate`."""
    return verdict(_accuracy_problem(fn), "accuracy matches capsedu.evaluate: correct images / "
                                          "all images", quiet=quiet)


def _confusion_problem(fn: Callable[[torch.Tensor, torch.Tensor, int], torch.Tensor]) -> str:
    generator = torch.Generator().manual_seed(6)
    labels = torch.randint(0, 9, (50,), generator=generator)  # (N,), class 9 never occurs
    predictions = torch.where(torch.rand(50, generator=generator) < 0.7, labels,
                              torch.randint(0, 10, (50,), generator=generator))  # (N,)
    expected = torch.zeros(10, 10, dtype=torch.long)
    expected.index_put_((labels, predictions), torch.ones(50, dtype=torch.long), accumulate=True)
    matrix, problem = call_learner(fn, predictions.clone(), labels.clone(), 10)
    if problem:
        return problem
    try:
        matrix = torch.as_tensor(matrix)
    except (TypeError, ValueError, RuntimeError):
        return f"return a (10, 10) tensor of counts, got {type(matrix).__name__}"
    if matrix.shape != (10, 10):
        return (f"expected a (num_classes, num_classes) = (10, 10) matrix, got {tuple(matrix.shape)}: "
                "size it with num_classes, not with the largest label seen")
    if torch.allclose(matrix.double(), expected.T.double()):
        return "rows and columns are swapped: row = TRUE label, column = prediction"
    if torch.allclose(matrix.double().sum(dim=1), torch.ones(10).double() * (expected.sum(dim=1) > 0)):
        return "return counts, not fractions (each row sums to 1 in yours)"
    if abs(float(matrix.double().sum()) - 50) > 1e-6:
        return (f"the counts add up to {float(matrix.sum()):g}, not to the 50 images: add 1 at "
                "[label, prediction] for every image")
    if not torch.allclose(matrix.double(), expected.double()):
        return ("some counts are off: entry [t, p] must count images with label t predicted as p "
                "(index_put_ with accumulate=True or a double loop)")
    return ""


def check_confusion_matrix(fn: Callable[[torch.Tensor, torch.Tensor, int], torch.Tensor], *,
                           quiet: bool = False) -> CheckResult:
    r"""Check ``fn(predictions, labels, num_classes) -> (J, J)`` counts, rows true, columns predicted."""
    return verdict(_confusion_problem(fn), "confusion matrix right: row = true label, column = "
                                           "prediction, counts", quiet=quiet)

r"""One training loop for every network: :func:`fit` and :func:`evaluate`.

The loop knows nothing about the network. What it minimises is an *objective*,
``objective(model, images, targets) -> Loss(value, correct)``: one of
:mod:`capsedu.training.objectives` (told the epoch, for schedules such as the spread loss's
margin), any function of that signature, or, when none is given, the network's own
``loss(images, targets)`` method or its kind's :func:`~capsedu.training.objectives.default_objective`.
Optimiser: Adam. Learning-rate schedules:

* ``"exponential"`` multiplies the rate by ``lr_decay`` after every epoch. The paper says only
  that it used Adam "with its TensorFlow default parameters, including the exponentially decaying
  learning rate"; its official code decays the rate 0.001 continuously by 0.96 every 2,000
  steps of 128 images (x0.990 per 60,000-image epoch) over 300,000 steps. The course's default
  ``lr_decay=0.96`` per epoch decays much faster, to suit runs of a few epochs.
* ``"onecycle"`` rises to ``lr`` over the first 20 % of the batches, then anneals to ~0 by the
  last batch (stepped every batch): the recipe of the shipped networks.

``precision="bfloat16"`` runs each training batch's forward pass under ``torch.autocast``
(convolutions and linear layers in bfloat16; the capsule layers route in float32, and the
losses stay in float32), where the machine computes bfloat16 natively
(:func:`~capsedu.training.hardware.bfloat16_problem`); elsewhere it warns, naming why, and trains
in float32. Evaluation is always float32.

The default optimiser is ``torch.optim.Adam`` with ``fused=True`` on CPUs and CUDA GPUs: one
kernel updates every parameter (the same algorithm as the per-parameter loop, with fewer
passes over memory; ``benchmarks/fit_speed.py`` measures what it saves).

Shape legend:
    B      batch size
"""

from __future__ import annotations

import contextlib
import time
import warnings
from collections.abc import Callable, Iterable
from typing import Any

import torch
from tqdm.auto import tqdm

from capsedu._validate import require_int
from capsedu.nets.contract import Loss
from capsedu.training.hardware import bfloat16_problem
from capsedu.training.modes import eval_mode
from capsedu.training.objectives import Objective, default_objective

Batch = tuple[torch.Tensor, Any]
LossFn = Callable[[torch.nn.Module, torch.Tensor, Any], Loss]
EpochCallback = Callable[[int, dict], "bool | None"]
SCHEDULES = ("exponential", "onecycle")
PRECISIONS = ("float32", "bfloat16")


def to_device(value: Any, device: torch.device) -> Any:
    r"""Move a tensor, or the tensors inside a tuple/list/dict of targets, to ``device``."""
    if isinstance(value, torch.Tensor):
        return value.to(device, non_blocking=True)
    if isinstance(value, dict):
        return {key: to_device(item, device) for key, item in value.items()}
    if isinstance(value, tuple) and hasattr(value, "_fields"):  # a NamedTuple, e.g. PairTargets
        return type(value)(*(to_device(item, device) for item in value))
    if isinstance(value, (tuple, list)):
        return type(value)(to_device(item, device) for item in value)
    return value


def _own_loss(model: torch.nn.Module, images: torch.Tensor, targets: Any) -> Loss:
    return model.loss(images, targets)


def resolve_objective(model: torch.nn.Module, objective: Objective | LossFn | None) -> Objective | LossFn:
    r"""``objective`` itself, else the model's ``loss`` method, else its kind's default objective."""
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if objective is not None:
        if not callable(objective):
            raise TypeError(f"objective must be an Objective or a function (model, images, targets) "
                            f"-> Loss, got {type(objective).__name__}")
        return objective
    if callable(getattr(model, "loss", None)):
        return _own_loss
    found = default_objective(model)
    if found is None:
        raise TypeError(f"{type(model).__name__} has no loss(images, targets) method and no default "
                        "objective: pass objective= (capsedu.training.objectives, or a function "
                        "(model, images, targets) -> capsedu.Loss)")
    return found


def _for_epoch(objective: Objective | LossFn, epoch: int) -> LossFn:
    r"""The loss function of one training epoch: an :class:`Objective` is told the epoch."""
    if isinstance(objective, Objective):
        return lambda model, images, targets: objective(model, images, targets, epoch=epoch)
    return objective


def _run_epoch(model: torch.nn.Module, loader: Iterable[Batch], device: torch.device,
               loss_fn: LossFn, bar: tqdm, optimizer: torch.optim.Optimizer | None = None,
               augment: Callable[[torch.Tensor], torch.Tensor] | None = None,
               batch_scheduler: torch.optim.lr_scheduler.LRScheduler | None = None,
               precision: str = "float32") -> dict:
    r"""One pass over ``loader``; trains when ``optimizer`` is given. Mean loss and accuracy."""
    total_loss, correct, seen = 0.0, 0, 0
    for images, targets in loader:
        images, targets = to_device(images, device), to_device(targets, device)
        if optimizer is not None and augment is not None:
            images = augment(images)
        with _autocast(device, precision):
            loss, right = loss_fn(model, images, targets)
        loss = loss.float()
        if optimizer is not None:
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            if batch_scheduler is not None:
                batch_scheduler.step()
        value = float(loss.detach())
        if value != value or abs(value) == float("inf"):
            raise FloatingPointError(f"the loss became {value} after {seen} images of this pass: "
                                     "lower the learning rate, or check the data for NaN/inf")
        total_loss += value * len(images)
        correct += int(right)
        seen += len(images)
        bar.update(1)
        bar.set_postfix(loss=f"{total_loss / seen:.4f}", acc=f"{correct / seen:.3f}", refresh=False)
    if seen == 0:
        raise ValueError("the data loader yielded no batches; expected at least one (images, targets)")
    bar.refresh()  # the last batch's count and postfix, which update(refresh=False) may not have drawn
    return {"loss": total_loss / seen, "accuracy": correct / seen}


def _autocast(device: torch.device, precision: str) -> contextlib.AbstractContextManager:
    if precision == "float32":
        return contextlib.nullcontext()
    return torch.autocast(device.type, dtype=torch.bfloat16)


def _precision(requested: str, device: torch.device) -> str:
    r"""The precision ``fit`` trains in: ``requested``, or float32 with a warning saying why."""
    if requested not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}, got {requested!r}")
    problem = bfloat16_problem(device) if requested == "bfloat16" else ""
    if problem:
        warnings.warn(f"precision='bfloat16' asked for, but {problem}; training in float32",
                      RuntimeWarning, stacklevel=3)
        return "float32"
    return requested


def _length(loader: object) -> int | None:
    return len(loader) if hasattr(loader, "__len__") else None  # type: ignore[arg-type]


@torch.no_grad()
def evaluate(model: torch.nn.Module, loader: Iterable[Batch], *,
             device: str | torch.device = "cpu", objective: Objective | LossFn | None = None,
             progress: bool = False) -> dict[str, float]:
    r"""Mean loss and accuracy of ``model`` over ``loader``, in eval mode; its mode is restored.

    ``objective`` as for :func:`fit`; an :class:`Objective` is evaluated in its final form.
    """
    loss_fn = resolve_objective(model, objective)
    with eval_mode(model), torch.no_grad(), tqdm(total=_length(loader), desc="evaluate",
                                                 disable=not progress) as bar:
        return _run_epoch(model, loader, torch.device(device), loss_fn, bar)


def default_optimizer(model: torch.nn.Module, lr: float, device: torch.device) -> torch.optim.Adam:
    r"""Adam, fused into one kernel where PyTorch has one (CPU, CUDA)."""
    fused = device.type in ("cpu", "cuda") and all(p.is_floating_point() for p in model.parameters())
    return torch.optim.Adam(model.parameters(), lr=lr, fused=fused or None)


def _scheduler(optimizer: torch.optim.Optimizer, schedule: str, lr: float, lr_decay: float,
               epochs: int, steps: int | None) -> tuple[torch.optim.lr_scheduler.LRScheduler, bool]:
    r"""The learning-rate scheduler and whether it is stepped every batch (else every epoch)."""
    if schedule == "exponential":
        return torch.optim.lr_scheduler.ExponentialLR(optimizer, gamma=lr_decay), False
    if not steps:
        raise ValueError("lr_schedule='onecycle' needs a train_loader with a length (len(loader) > 0)")
    return torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=lr, epochs=epochs,
                                               steps_per_epoch=steps, pct_start=0.2), True


def fit(model: torch.nn.Module, train_loader: Iterable[Batch], *, epochs: int,
        device: str | torch.device = "cpu", lr: float = 1e-3, lr_decay: float = 0.96,
        lr_schedule: str = "exponential", objective: Objective | LossFn | None = None,
        val_loader: Iterable[Batch] | None = None,
        augment: Callable[[torch.Tensor], torch.Tensor] | None = None,
        optimizer: torch.optim.Optimizer | None = None, precision: str = "float32",
        progress: bool = True, on_epoch_end: EpochCallback | None = None) -> dict[str, list]:
    r"""Train ``model`` for ``epochs`` epochs with Adam; return the per-epoch history.

    Args:
        objective: what to minimise - an :class:`~capsedu.training.objectives.Objective` (told
            each epoch's number) or a function ``(model, images, targets) -> Loss``; defaults to
            ``model.loss`` when the model has one, else to its kind's default objective.
        augment: applied to each training batch of images (e.g. :func:`capsedu.random_shift`).
        optimizer: defaults to :func:`default_optimizer` (Adam with learning rate ``lr``).
        lr_schedule: ``"exponential"`` or ``"onecycle"`` (module docstring); ``lr_decay`` is the
            per-epoch factor of the first and is ignored by the second.
        precision: ``"float32"`` or ``"bfloat16"`` (mixed precision where the machine has it;
            module docstring).
        progress: show a ``tqdm.auto`` progress bar (a widget in Jupyter, text elsewhere).
        on_epoch_end: called as ``on_epoch_end(epoch, history)`` after each epoch (and its
            validation); returning True stops training early.

    Returns:
        Per-epoch lists: ``epoch``, ``train_loss``, ``train_accuracy``, ``lr`` (at the epoch's
        start), ``seconds`` (wall time, validation included), ``train_seconds`` (the training
        pass alone), ``train_cpu_seconds`` (process CPU time of the training pass, all
        threads), ``precision`` (what each epoch trained in) and, with ``val_loader``,
        ``val_loss`` and ``val_accuracy``. The model is left
        in train mode, as training leaves it.
    """
    objective = resolve_objective(model, objective)
    require_int("epochs", epochs, minimum=1)
    if lr_schedule not in SCHEDULES:
        raise ValueError(f"lr_schedule must be one of {SCHEDULES}, got {lr_schedule!r}")
    device = torch.device(device)
    precision = _precision(precision, device)
    model.to(device)
    optimizer = optimizer or default_optimizer(model, lr, device)
    steps = _length(train_loader)
    scheduler, per_batch = _scheduler(optimizer, lr_schedule, lr, lr_decay, epochs, steps)
    history: dict[str, list] = {key: [] for key in ("epoch", "train_loss", "train_accuracy", "lr",
                                                    "seconds", "train_seconds", "train_cpu_seconds",
                                                    "precision")}
    for epoch in range(1, epochs + 1):
        start, cpu_start = time.perf_counter(), time.process_time()
        history["lr"].append(optimizer.param_groups[0]["lr"])
        model.train()
        with tqdm(total=steps, desc=f"epoch {epoch}/{epochs}", disable=not progress) as bar:
            train = _run_epoch(model, train_loader, device, _for_epoch(objective, epoch), bar,
                               optimizer, augment, scheduler if per_batch else None, precision)
        history["train_seconds"].append(time.perf_counter() - start)
        history["train_cpu_seconds"].append(time.process_time() - cpu_start)
        history["epoch"].append(epoch)
        history["precision"].append(precision)
        history["train_loss"].append(train["loss"])
        history["train_accuracy"].append(train["accuracy"])
        if not per_batch:
            scheduler.step()
        if val_loader is not None:
            val = evaluate(model, val_loader, device=device, objective=_for_epoch(objective, epoch))
            history.setdefault("val_loss", []).append(val["loss"])
            history.setdefault("val_accuracy", []).append(val["accuracy"])
        history["seconds"].append(time.perf_counter() - start)
        if on_epoch_end is not None and on_epoch_end(epoch, history):
            break
    return history

r"""One training loop for every network: :func:`fit` and :func:`evaluate`.

The loop knows nothing about the network. What it minimises is an *objective*,
``objective(model, images, targets) -> Loss(value, correct)``: one of
:mod:`capsedu.training.objectives` (told the epoch, for schedules such as the spread loss's
margin), any function of that signature, or, when none is given, the network's own
``loss(images, targets)`` method or its kind's :func:`~capsedu.training.objectives.default_objective`.
Optimiser and learning-rate schedule: :mod:`capsedu.training.schedule` (Adam with
learning rate ``lr``, or the user's own ``optimizer``, used as given).

The loss of each training batch is checked before its backward pass, and its gradients before the
optimizer's step: a NaN or infinite loss, or a finite loss whose gradient holds a NaN or an
infinity, raises ``FloatingPointError`` naming the batch, and the weights stay as the batch before
left them.

``device=None`` (the default of :func:`fit` and :func:`evaluate`) means the model's own device
(:func:`~capsedu.training.hardware.model_device`): ``fit`` moves the model to an explicit
``device``; ``evaluate`` runs where the model is and refuses a ``device`` that is not the model's.

``precision="bfloat16"`` runs each training batch's forward pass under ``torch.autocast``
(convolutions and linear layers in bfloat16; the capsule layers route in float32, and the
losses stay in float32), where the machine computes bfloat16 natively
(:func:`~capsedu.training.hardware.bfloat16_problem`); elsewhere it warns, naming why, and trains
in float32. Evaluation is always float32.

Shape legend:
    B      batch size
"""

from __future__ import annotations

import contextlib
import math
import time
import warnings
from collections.abc import Callable, Iterable
from typing import Any

import torch
from tqdm.auto import tqdm

from capsedu._history import History
from capsedu._validate import require_int
from capsedu.nets.contract import Loss
from capsedu.training.hardware import bfloat16_problem, model_device, require_model_device
from capsedu.training.modes import eval_mode
from capsedu.training.objectives import Objective, default_objective
from capsedu.training.schedule import DEFAULT_LR, default_optimizer, lr_scheduler, require_plan

Batch = tuple[torch.Tensor, Any]
LossFn = Callable[[torch.nn.Module, torch.Tensor, Any], Loss]
EpochCallback = Callable[[int, History], "bool | None"]
# fit's History columns, in this order (then val_loss and val_accuracy, with a val_loader)
COLUMNS = ("epoch", "train_loss", "train_accuracy", "lr", "seconds", "train_seconds",
           "train_cpu_seconds", "precision")
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
    for index, (images, targets) in enumerate(loader):
        images, targets = to_device(images, device), to_device(targets, device)
        if optimizer is not None and augment is not None:
            images = augment(images)
        with _autocast(device, precision):
            loss, right = loss_fn(model, images, targets)
        loss = loss.float()
        value = _finite_loss(loss, index, seen)  # before the step: a bad batch changes no weight
        if optimizer is not None:
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            _finite_gradients(optimizer, index, seen)  # a finite loss can still have NaN gradients
            optimizer.step()
            if batch_scheduler is not None:
                batch_scheduler.step()
        total_loss += value * len(images)
        correct += int(right)
        seen += len(images)
        bar.update(1)
        bar.set_postfix(loss=f"{total_loss / seen:.4f}", acc=f"{correct / seen:.3f}", refresh=False)
    if seen == 0:
        raise ValueError("the data loader yielded no batches; expected at least one (images, targets)")
    bar.refresh()  # the last batch's count and postfix, which update(refresh=False) may not have drawn
    return {"loss": total_loss / seen, "accuracy": correct / seen}


def _finite_loss(loss: torch.Tensor, index: int, seen: int) -> float:
    r"""The loss as a float; ``FloatingPointError`` naming the batch if it is NaN or infinite."""
    value = float(loss.detach())
    if not math.isfinite(value):
        raise FloatingPointError(f"the loss became {value} at batch {index} of this pass (counting "
                                 f"from 0, after {seen} images); no step was taken from it. When "
                                 "training, lower the learning rate; check the data for NaN/inf")
    return value


def _finite_gradients(optimizer: torch.optim.Optimizer, index: int, seen: int) -> None:
    r"""``FloatingPointError`` naming the batch if a gradient the optimizer would apply holds a NaN
    or an infinity (a finite loss can: the square root of a zero, a division by a zero length)."""
    grads = [p.grad for group in optimizer.param_groups for p in group["params"] if p.grad is not None]
    norm = float(torch.nn.utils.get_total_norm(grads)) if grads else 0.0
    if not math.isfinite(norm):
        raise FloatingPointError(f"the gradient became non-finite (norm {norm}) at batch {index} of this "
                                 f"pass (counting from 0, after {seen} images) although the loss was "
                                 "finite; no step was taken from it. Look for a square root or a "
                                 "division at zero in the objective or the network (lesson 01's ε)")


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
             device: str | torch.device | None = None, objective: Objective | LossFn | None = None,
             progress: bool = False) -> dict[str, float]:
    r"""Mean loss and accuracy of ``model`` over ``loader``, in eval mode; its mode is restored.

    ``objective`` as for :func:`fit`; an :class:`Objective` is evaluated in its final form.
    It runs where the model is: ``device=None`` is the model's device, and a ``device`` that is
    not the model's raises ``ValueError``.
    """
    loss_fn = resolve_objective(model, objective)
    device = require_model_device(model, device)
    with eval_mode(model), torch.no_grad(), tqdm(total=_length(loader), desc="evaluate",
                                                 disable=not progress) as bar:
        return _run_epoch(model, loader, device, loss_fn, bar)


def fit(model: torch.nn.Module, train_loader: Iterable[Batch], *, epochs: int,
        device: str | torch.device | None = None, lr: float | None = None, lr_decay: float = 0.96,
        lr_schedule: str | None = None, objective: Objective | LossFn | None = None,
        val_loader: Iterable[Batch] | None = None,
        augment: Callable[[torch.Tensor], torch.Tensor] | None = None,
        optimizer: torch.optim.Optimizer | None = None, precision: str = "float32",
        progress: bool = True, on_epoch_end: EpochCallback | None = None) -> History:
    r"""Train ``model`` for ``epochs`` epochs; return its per-epoch history.

    Args:
        device: where to train; the model is moved there. None: where the model already is.
        objective: what to minimise - an :class:`~capsedu.training.objectives.Objective` (told
            each epoch's number) or a function ``(model, images, targets) -> Loss``; defaults to
            ``model.loss`` when the model has one, else to its kind's default objective.
        augment: applied to each training batch of images (e.g. :func:`capsedu.random_shift`).
        lr: the learning rate of ``fit``'s own Adam (:func:`default_optimizer`; 1e-3 when None).
        optimizer: your own optimizer, used as given: its rates are its own, so ``lr`` must be
            left out (ValueError otherwise), and it gets no schedule unless ``lr_schedule`` asks.
        lr_schedule: None (``"exponential"`` for fit's own Adam, nothing for your ``optimizer``),
            ``"exponential"`` or ``"onecycle"`` (module docstring); ``lr_decay`` is the per-epoch
            factor of ``"exponential"`` and is ignored otherwise.
        precision: ``"float32"`` or ``"bfloat16"`` (mixed precision where the machine has it;
            module docstring).
        progress: show a ``tqdm.auto`` progress bar (a widget in Jupyter, text elsewhere).
        on_epoch_end: called as ``on_epoch_end(epoch, history)`` after each epoch (and its
            validation); returning True stops training early.

    Returns:
        A :class:`~capsedu._history.History` (a dict of per-epoch lists, the type the NumPy
        ``fit`` of lesson 10 returns too) with the columns ``epoch``, ``train_loss``,
        ``train_accuracy``, ``lr`` (at the epoch's start), ``seconds`` (wall time, validation
        included), ``train_seconds`` (the training pass alone), ``train_cpu_seconds`` (process
        CPU time of the training pass, all threads), ``precision`` (what each epoch trained in)
        and, with ``val_loader``, ``val_loss`` and ``val_accuracy``. The model is left in train
        mode, as training leaves it. A NaN or infinite training loss raises
        ``FloatingPointError`` before its step (module docstring).
    """
    objective = resolve_objective(model, objective)
    require_int("epochs", epochs, minimum=1)
    require_plan(optimizer, lr, lr_schedule)
    device = model_device(model) if device is None else torch.device(device)
    precision = _precision(precision, device)
    model.to(device)
    own = optimizer is None
    if own:  # fit's own Adam decays exponentially unless told otherwise
        optimizer = default_optimizer(model, DEFAULT_LR if lr is None else lr, device)
        lr_schedule = lr_schedule or "exponential"
    steps = _length(train_loader)
    scheduler, per_batch = lr_scheduler(optimizer, lr_schedule, lr_decay, epochs, steps, own=own)
    history = History({name: [] for name in COLUMNS})
    for epoch in range(1, epochs + 1):
        start, cpu_start = time.perf_counter(), time.process_time()
        rate = optimizer.param_groups[0]["lr"]
        model.train()
        with tqdm(total=steps, desc=f"epoch {epoch}/{epochs}", disable=not progress) as bar:
            train = _run_epoch(model, train_loader, device, _for_epoch(objective, epoch), bar,
                               optimizer, augment, scheduler if per_batch else None, precision)
        record = {"epoch": epoch, "train_loss": train["loss"], "train_accuracy": train["accuracy"],
                  "lr": rate, "train_seconds": time.perf_counter() - start,
                  "train_cpu_seconds": time.process_time() - cpu_start, "precision": precision}
        if scheduler is not None and not per_batch:
            scheduler.step()
        if val_loader is not None:
            val = evaluate(model, val_loader, device=device, objective=_for_epoch(objective, epoch))
            record |= {"val_loss": val["loss"], "val_accuracy": val["accuracy"]}
        history.append({**record, "seconds": time.perf_counter() - start})
        if on_epoch_end is not None and on_epoch_end(epoch, history):
            break
    return history

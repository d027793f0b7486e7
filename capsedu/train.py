r"""Training and evaluation loops for :class:`~capsedu.model.CapsNet`.

Shape legend:
    B      batch size
    J      number of classes
The total loss is ``margin_loss + recon_weight * reconstruction_loss`` with recon_weight 0.0005
(Section 4.1 of the paper). Adam with an exponentially decaying learning rate, as in the paper,
or a one-cycle schedule (warm-up then annealing, stepped every batch) that converges in fewer epochs.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

import torch
from tqdm.auto import tqdm

from capsedu._validate import require_int
from capsedu.losses import margin_loss, reconstruction_loss
from capsedu.model import CapsNet

Batch = tuple[torch.Tensor, torch.Tensor]


def capsnet_loss(model: CapsNet, images: torch.Tensor, labels: torch.Tensor,
                 recon_weight: float = 0.0005) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Total loss for one batch and the batch's capsule lengths (B, J)."""
    out = model(images, labels)
    loss = margin_loss(out.lengths, labels) + recon_weight * reconstruction_loss(out.reconstruction, images)
    return loss, out.lengths


def _check_model(model: object) -> None:
    if not isinstance(model, CapsNet):
        raise TypeError(f"model must be a capsedu.CapsNet, got {type(model).__name__}")


def _run_epoch(model: CapsNet, loader: Iterable[Batch], device: torch.device,
               optimizer: torch.optim.Optimizer | None, recon_weight: float,
               augment: Callable[[torch.Tensor], torch.Tensor] | None, bar: tqdm,
               batch_scheduler: torch.optim.lr_scheduler.LRScheduler | None = None) -> dict[str, float]:
    r"""One pass over ``loader``; trains when ``optimizer`` is given. Returns mean loss and accuracy."""
    total_loss, correct, seen = 0.0, 0, 0
    for images, labels in loader:
        images, labels = images.to(device), labels.to(device)
        if optimizer is not None and augment is not None:
            images = augment(images)
        loss, lengths = capsnet_loss(model, images, labels, recon_weight)
        if optimizer is not None:
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            if batch_scheduler is not None:
                batch_scheduler.step()
        total_loss += float(loss.detach()) * len(labels)
        correct += int((lengths.argmax(dim=1) == labels).sum())
        seen += len(labels)
        bar.update(1)
        bar.set_postfix(loss=f"{total_loss / seen:.4f}", acc=f"{correct / seen:.3f}")
    if seen == 0:
        raise ValueError("the data loader yielded no batches; expected at least one (B, C, H, W) batch")
    return {"loss": total_loss / seen, "accuracy": correct / seen}


@torch.no_grad()
def evaluate(model: CapsNet, loader: Iterable[Batch], *, device: str | torch.device = "cpu",
             recon_weight: float = 0.0005, progress: bool = False) -> dict[str, float]:
    r"""Mean loss and accuracy of ``model`` over ``loader`` (decoder masked by the true labels)."""
    _check_model(model)
    model.eval()
    total = len(loader) if hasattr(loader, "__len__") else None  # type: ignore[arg-type]
    with tqdm(total=total, desc="evaluate", disable=not progress, leave=False) as bar:
        return _run_epoch(model, loader, torch.device(device), None, recon_weight, None, bar)


SCHEDULES = ("exponential", "onecycle")
EpochCallback = Callable[[int, dict], "bool | None"]


def _scheduler(optimizer: torch.optim.Optimizer, schedule: str, lr: float, lr_decay: float,
               epochs: int, steps: int | None) -> tuple[torch.optim.lr_scheduler.LRScheduler, bool]:
    r"""The learning-rate scheduler and whether it is stepped every batch (else every epoch)."""
    if schedule == "exponential":
        return torch.optim.lr_scheduler.ExponentialLR(optimizer, gamma=lr_decay), False
    if not steps:
        raise ValueError("lr_schedule='onecycle' needs a train_loader with a length (len(loader) > 0)")
    return torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=lr, epochs=epochs,
                                               steps_per_epoch=steps, pct_start=0.2), True


def fit(model: CapsNet, train_loader: Iterable[Batch], *, epochs: int,
        device: str | torch.device = "cpu", lr: float = 1e-3, lr_decay: float = 0.96,
        recon_weight: float = 0.0005, val_loader: Iterable[Batch] | None = None,
        augment: Callable[[torch.Tensor], torch.Tensor] | None = None,
        optimizer: torch.optim.Optimizer | None = None, progress: bool = True,
        lr_schedule: str = "exponential",
        on_epoch_end: EpochCallback | None = None) -> dict[str, list]:
    r"""Train ``model`` for ``epochs`` epochs with Adam and a decaying learning rate.

    Args:
        augment: applied to each training batch of images (e.g. :func:`capsedu.data.random_shift`).
        optimizer: defaults to ``Adam(model.parameters(), lr)``.
        progress: show a ``tqdm.auto`` progress bar (a widget in Jupyter, text elsewhere).
        lr_schedule: ``"exponential"`` (multiply by ``lr_decay`` after every epoch, the paper's) or
            ``"onecycle"`` (rise to ``lr`` over the first 20 % of batches, then anneal to ~0 by the
            last batch; ``lr_decay`` is ignored).
        on_epoch_end: called as ``on_epoch_end(epoch, history)`` after each epoch (and its
            validation); returning True stops training early.

    Returns:
        A history dict of per-epoch lists: ``epoch``, ``train_loss``, ``train_accuracy``, ``lr``,
        ``seconds`` (wall time of the epoch, validation included), ``train_seconds`` (wall time
        of the training pass alone), ``train_cpu_seconds`` (process CPU time of the training
        pass, all threads) and, with ``val_loader``, ``val_loss`` and ``val_accuracy``.
    """
    _check_model(model)
    require_int("epochs", epochs, minimum=1)
    if lr_schedule not in SCHEDULES:
        raise ValueError(f"lr_schedule must be one of {SCHEDULES}, got {lr_schedule!r}")
    device = torch.device(device)
    model.to(device)
    optimizer = optimizer or torch.optim.Adam(model.parameters(), lr=lr)
    steps = len(train_loader) if hasattr(train_loader, "__len__") else None  # type: ignore[arg-type]
    scheduler, per_batch = _scheduler(optimizer, lr_schedule, lr, lr_decay, epochs, steps)
    history: dict[str, list] = {"epoch": [], "train_loss": [], "train_accuracy": [], "lr": [],
                                "seconds": [], "train_seconds": [], "train_cpu_seconds": []}
    for epoch in range(1, epochs + 1):
        start, cpu_start = time.perf_counter(), time.process_time()
        history["lr"].append(optimizer.param_groups[0]["lr"])
        model.train()
        with tqdm(total=steps, desc=f"epoch {epoch}/{epochs}", disable=not progress) as bar:
            train = _run_epoch(model, train_loader, device, optimizer, recon_weight, augment, bar,
                               scheduler if per_batch else None)
        history["train_seconds"].append(time.perf_counter() - start)
        history["train_cpu_seconds"].append(time.process_time() - cpu_start)
        history["epoch"].append(epoch)
        history["train_loss"].append(train["loss"])
        history["train_accuracy"].append(train["accuracy"])
        if not per_batch:
            scheduler.step()
        if val_loader is not None:
            val = evaluate(model, val_loader, device=device, recon_weight=recon_weight)
            history.setdefault("val_loss", []).append(val["loss"])
            history.setdefault("val_accuracy", []).append(val["accuracy"])
        history["seconds"].append(time.perf_counter() - start)
        if on_epoch_end is not None and on_epoch_end(epoch, history):
            break
    return history

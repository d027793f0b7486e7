r"""The optimiser :func:`capsedu.fit` trains with, and its learning-rate schedule.

Optimiser: Adam with learning rate ``lr``, or the user's own ``optimizer``, used as given.
Learning-rate schedules (``lr_schedule``):

* ``None`` (the default): ``"exponential"`` for ``fit``'s own Adam; no schedule at all for a
  user's ``optimizer``, whose rates stay as they were set.

* ``"exponential"`` multiplies the rate by ``lr_decay`` after every epoch. The paper says only
  that it used Adam "with its TensorFlow default parameters, including the exponentially decaying
  learning rate"; its official code decays the rate 0.001 continuously by 0.96 every 2,000
  steps of 128 images (x0.990 per 60,000-image epoch) over 300,000 steps. The course's default
  ``lr_decay=0.96`` per epoch decays much faster, to suit runs of a few epochs.
* ``"onecycle"`` rises to the optimizer's rate (``lr`` for ``fit``'s own Adam, each parameter
  group's own ``lr`` for a user's optimizer) over the first 20 % of the batches, then anneals to
  ~0 by the last batch (stepped every batch): the recipe of the shipped networks.

The default optimiser is ``torch.optim.Adam`` with ``fused=True`` on CPUs and CUDA GPUs: one
kernel updates every parameter (the same algorithm as the per-parameter loop, with fewer
passes over memory; ``benchmarks/fit_speed.py`` measures what it saves).

Shape legend:
    E      epochs (an exponential schedule steps once per epoch)
"""

from __future__ import annotations

import torch

SCHEDULES = ("exponential", "onecycle")
DEFAULT_LR = 1e-3  # fit's own Adam, when no lr is given


def default_optimizer(model: torch.nn.Module, lr: float, device: torch.device) -> torch.optim.Adam:
    r"""Adam, fused into one kernel where PyTorch has one (CPU, CUDA)."""
    fused = device.type in ("cpu", "cuda") and all(p.is_floating_point() for p in model.parameters())
    return torch.optim.Adam(model.parameters(), lr=lr, fused=fused or None)


def require_plan(optimizer: object, lr: float | None, lr_schedule: str | None) -> None:
    r"""Refuse an unknown schedule, a non-optimizer, and ``lr`` beside a user's optimizer."""
    if lr_schedule is not None and lr_schedule not in SCHEDULES:
        raise ValueError(f"lr_schedule must be one of {SCHEDULES} or None, got {lr_schedule!r}")
    if optimizer is None:
        return
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise TypeError(f"optimizer must be a torch.optim.Optimizer or None, "
                        f"got {type(optimizer).__name__}")
    if lr is not None:
        rates = sorted({group["lr"] for group in optimizer.param_groups})
        raise ValueError(f"lr={lr!r} and optimizer= were both given, but the optimizer already has "
                         f"its learning rate ({', '.join(map(str, rates))}): set the rate when "
                         "building the optimizer and leave lr out (lr is for fit's own Adam)")


def lr_scheduler(optimizer: torch.optim.Optimizer, schedule: str | None, lr_decay: float, epochs: int,
               steps: int | None, *, own: bool = True
               ) -> tuple[torch.optim.lr_scheduler.LRScheduler | None, bool]:
    r"""The learning-rate scheduler (None for no schedule) and whether it is stepped every batch
    (else every epoch). One-cycle peaks at each parameter group's own rate; it also cycles the
    momentum (Adam's beta1) of ``fit``'s own Adam, as the shipped recipes trained, but never that
    of a user's optimizer (``own=False``), whose settings other than the rate stay as given."""
    if schedule is None:
        return None, False
    if schedule == "exponential":
        return torch.optim.lr_scheduler.ExponentialLR(optimizer, gamma=lr_decay), False
    if not steps:
        raise ValueError("lr_schedule='onecycle' needs a train_loader with a length (len(loader) > 0)")
    peaks = [group["lr"] for group in optimizer.param_groups]
    return torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=peaks, epochs=epochs,
                                               steps_per_epoch=steps, pct_start=0.2,
                                               cycle_momentum=own), True

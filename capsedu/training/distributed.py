r"""Training on several devices with PyTorch's own engine: torchrun and DistributedDataParallel.

``python -m torch.distributed.run --nproc_per_node N ...`` (``torchrun``) starts N processes and
tells each its place in the environment (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``); nothing here
launches processes. :func:`world` reads that place, :func:`init` joins the process group
(``gloo`` on CPUs, ``nccl`` on CUDA GPUs; nothing without torchrun), :func:`finish` leaves it.

How one step on N devices equals one step on one device:

* Data: every rank draws the same *global* batches (the recipe's seeded loader and augmentation,
  exactly as one process draws them) and trains on its contiguous 1/N of each
  (:class:`ShardedBatches`); the global batch must be divisible by N. The augmentation runs on
  the whole global batch before it is cut, so its random draws are those of one process.
* Gradients: DistributedDataParallel (DDP) averages the gradients over the ranks, but only of
  what runs through *its* ``forward``. The objectives call ``model(images, labels)`` and also
  ``model.class_capsules``, ``model.decode``, ``model.class_scores``, which a DDP wrapper neither
  forwards nor synchronises; so DDP wraps :class:`LossModule`, whose ``forward`` runs the whole
  objective on the network and returns its :class:`~capsedu.nets.contract.Loss`
  (:func:`data_parallel`). Every objective's loss is a batch *mean* (margin, reconstruction,
  spread, cross-entropy, binary cross-entropy: :mod:`capsedu.nets.losses`), so the mean of the N
  ranks' gradients is the gradient of the global batch, up to the order of float sums. Every
  recipe's objective reaches every parameter of its network, so ``find_unused_parameters`` stays
  off (it would cost a pass over the graph each step).
* Batch norm (Efficient-CapsNet): on CUDA the network's ``BatchNorm`` layers are converted to
  ``torch.nn.SyncBatchNorm`` (statistics of the global batch, same parameters and buffers); on
  CPUs PyTorch has no SyncBatchNorm, so each rank normalises with its own share's statistics
  and the run differs from one process's (the other networks have no batch norm).
* The epoch's last, short batch is cut to a multiple of N (``55,000 % 32 = 24``: nothing is
  cut on 2, 4 or 8 devices; 8 images an epoch on 16).

Shape legend:
    B      global batch size (the recipe's), of which one rank gets B / world_size (the number
           of processes - N above - is a word here, not a shape letter)
    C      channels
    H      height
    W      width
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from capsedu._history import History
from capsedu._numbers import require_int
from capsedu.nets.contract import Loss
from capsedu.training.objectives import Objective

LossFn = Callable[[nn.Module, torch.Tensor, Any], Loss]
EpochCallback = Callable[[int, History], "bool | None"]
ENV = ("RANK", "WORLD_SIZE", "LOCAL_RANK")  # what torchrun sets in each process


@dataclass(frozen=True)
class World:
    r"""This process's place: ``rank`` of ``world_size`` processes, ``local_rank`` on its node."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    def __post_init__(self) -> None:
        require_int("world_size", self.world_size, minimum=1)
        require_int("rank", self.rank, minimum=0, maximum=self.world_size - 1)
        require_int("local_rank", self.local_rank, minimum=0)


def world(environ: Mapping[str, str] | None = None) -> World:
    r"""This process's :class:`World` from torchrun's environment (``os.environ`` when None);
    ``World(0, 1, 0)`` without torchrun."""
    environ = os.environ if environ is None else environ
    values = {}
    for name, default in zip(ENV, ("0", "1", "0")):
        text = environ.get(name, default)
        if not text.strip().isdigit():
            raise ValueError(f"the environment variable {name} must be a whole number >= 0 "
                             f"(torchrun sets it), got {text!r}")
        values[name] = int(text)
    return World(values["RANK"], values["WORLD_SIZE"], values["LOCAL_RANK"])


def rank_device(device: str | torch.device, place: World) -> torch.device:
    r"""The device this rank trains on: ``"cuda"`` without an index is GPU ``local_rank``."""
    device = torch.device(device)
    if device.type == "cuda" and device.index is None:
        return torch.device("cuda", place.local_rank)
    return device


def init(device: str | torch.device = "cpu", backend: str | None = None,
         environ: Mapping[str, str] | None = None) -> World:
    r"""Join torchrun's process group when there are several processes; return this :class:`World`.

    ``backend``: None for ``nccl`` on CUDA (this rank's GPU made current) and ``gloo`` elsewhere.
    One process (no torchrun): nothing is initialised. Rendezvous (``MASTER_ADDR``,
    ``MASTER_PORT``) is read from the environment torchrun sets.
    """
    place = world(environ)
    if place.world_size == 1 or dist.is_initialized():
        return place
    device = rank_device(device, place)
    if device.type == "cuda":
        torch.cuda.set_device(device)
    dist.init_process_group(backend or ("nccl" if device.type == "cuda" else "gloo"),
                            rank=place.rank, world_size=place.world_size)
    return place


def backend() -> str | None:
    r"""The process group's backend (``"gloo"``, ``"nccl"``), or None in a single process."""
    return str(dist.get_backend()) if dist.is_initialized() else None


def barrier() -> None:
    r"""Wait until every rank is here (nothing in a single process)."""
    if dist.is_initialized():
        dist.barrier()


def finish() -> None:
    r"""Leave the process group (nothing in a single process)."""
    if dist.is_initialized():
        dist.destroy_process_group()


def require_group(place: World) -> None:
    r"""Refuse several ranks without a process group (ValueError naming :func:`init`)."""
    if place.world_size > 1 and not dist.is_initialized():
        raise ValueError(f"world_size is {place.world_size} but no process group is initialised: "
                         "call capsedu.training.distributed.init() first (under torchrun)")


def rows(value: Any, start: int, stop: int) -> Any:
    r"""Rows ``start:stop`` of a tensor, or of each tensor in a tuple/NamedTuple/list/dict."""
    if isinstance(value, torch.Tensor):
        return value[start:stop]
    if isinstance(value, dict):
        return {key: rows(item, start, stop) for key, item in value.items()}
    if isinstance(value, tuple) and hasattr(value, "_fields"):  # a NamedTuple, e.g. PairTargets
        return type(value)(*(rows(item, start, stop) for item in value))
    if isinstance(value, (tuple, list)):
        return type(value)(rows(item, start, stop) for item in value)
    raise TypeError(f"targets must be tensors (or tuples, lists, dicts of them), "
                    f"got {type(value).__name__}")


def shard(images: torch.Tensor, targets: Any, place: World) -> tuple[torch.Tensor, Any]:
    r"""This rank's contiguous share of a global batch: images (B / world_size, ...) and their
    targets."""
    size, ranks = len(images), place.world_size
    if size % ranks:
        raise ValueError(f"a global batch of {size} images cannot be split evenly over {ranks} "
                         f"ranks: make the batch size a multiple of the world size")
    share = size // ranks
    start = place.rank * share
    return images[start:start + share], rows(targets, start, start + share)  # (B / world_size, ...)


class ShardedBatches:
    r"""Each rank's share (:func:`shard`) of every global batch of ``batches``.

    ``batches``: the global batches (a seeded loader: the same on every rank), ``batch_size``
    of them to an epoch of ``epoch_size`` images. ``augment`` runs on the whole global batch
    before it is cut (its random draws are one process's). The epoch's last, short batch is cut
    to a multiple of the world size; ``len()`` counts the steps this gives.
    """

    def __init__(self, batches: Iterable[tuple[torch.Tensor, Any]], place: World, *,
                 batch_size: int, epoch_size: int,
                 augment: Callable[[torch.Tensor], torch.Tensor] | None = None) -> None:
        require_int("batch_size", batch_size, minimum=1)
        require_int("epoch_size", epoch_size, minimum=1)
        if batch_size % place.world_size:
            raise ValueError(f"batch_size (the global batch) must be a multiple of the world size "
                             f"{place.world_size}, got {batch_size}")
        self.batches, self.place, self.augment = batches, place, augment
        self.batch_size, self.epoch_size = batch_size, epoch_size

    def __len__(self) -> int:
        last = self.epoch_size % self.batch_size
        return self.epoch_size // self.batch_size + int(last >= self.place.world_size)

    def __iter__(self) -> Iterator[tuple[torch.Tensor, Any]]:
        for images, targets in self.batches:
            if self.augment is not None:
                images = self.augment(images)  # (B, C, H, W): every image's draw, as one process
            kept = len(images) - len(images) % self.place.world_size
            if kept:
                yield shard(images[:kept], rows(targets, 0, kept), self.place)


class LossModule(nn.Module):
    r"""A network and its objective as one module: ``forward(images, targets, epoch)`` is the
    objective's :class:`~capsedu.nets.contract.Loss` - what DDP must wrap to synchronise it."""

    def __init__(self, network: nn.Module, objective: Objective | LossFn) -> None:
        super().__init__()
        if not callable(objective):
            raise TypeError(f"objective must be an Objective or a function (model, images, "
                            f"targets) -> Loss, got {type(objective).__name__}")
        self.network, self.objective = network, objective

    def forward(self, images: torch.Tensor, targets: Any, epoch: int | None = None) -> Loss:
        if isinstance(self.objective, Objective):
            return self.objective(self.network, images, targets, epoch=epoch)
        return self.objective(self.network, images, targets)


@dataclass(frozen=True)
class Through(Objective):
    r"""The objective :func:`capsedu.fit` is given for a wrapped :class:`LossModule`: its own
    forward, told the epoch (not stored: checkpoints keep the network's real objective)."""

    name = "through_forward"

    def __call__(self, model: nn.Module, images: torch.Tensor, targets: Any,
                 epoch: int | None = None) -> Loss:
        return model(images, targets, epoch=epoch)


def data_parallel(network: nn.Module, objective: Objective | LossFn,
                  device: torch.device) -> nn.parallel.DistributedDataParallel:
    r"""``network`` (moved to ``device``) and ``objective`` wrapped for DDP: gradients averaged over
    the ranks. On CUDA its batch norm layers become SyncBatchNorm (in place; module docstring)."""
    network.to(device)
    if device.type == "cuda":
        torch.nn.SyncBatchNorm.convert_sync_batchnorm(network)  # children replaced in place
    ids = [device.index] if device.type == "cuda" else None
    return nn.parallel.DistributedDataParallel(LossModule(network, objective), device_ids=ids)


def epoch_end_together(callback: EpochCallback | None, device: torch.device) -> EpochCallback:
    r"""An ``on_epoch_end`` for every rank: the epoch's train loss and accuracy averaged over the
    ranks (equal shares: the global batches' values), then this rank's ``callback`` (None: none);
    every rank stops when one's callback asks. ``device``: this rank's (nccl reduces on GPUs)."""
    def together(epoch: int, history: History) -> bool:
        measured = torch.tensor([history["train_loss"][-1], history["train_accuracy"][-1]],
                                dtype=torch.float64, device=device)
        dist.all_reduce(measured)  # a sum over the ranks
        mean = (measured / dist.get_world_size()).tolist()
        history["train_loss"][-1], history["train_accuracy"][-1] = mean
        asked = bool(callback(epoch, history)) if callback is not None else False
        stop = torch.tensor([int(asked)], device=device)
        dist.all_reduce(stop, op=dist.ReduceOp.MAX)
        return bool(stop)
    return together

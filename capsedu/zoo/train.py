r"""Train a shipped network's recipe: :func:`train_recipe` (the library part of the zoo).

Every shipped network (:mod:`capsedu.zoo.shipped`) has a recipe (:mod:`capsedu.zoo.recipes`): its
kind and config, its objective, its data, and how it is trained (:func:`capsedu.fit` with Adam
and a one-cycle learning rate). :func:`recipe_network` builds the recipe's network, seeded;
:func:`train_recipe` trains it on the training digits (or fresh MultiMNIST pairs) with the
recipe's augmentation. Equal recipes give equal runs, on one process or, under torchrun, on
several (``world``: :mod:`capsedu.training.distributed`), whose steps are one process's.

The command that trains the shipped networks and writes their records (``NAME.pt`` and
``NAME.json``) is a tool of the repository, not of the package:
``python -m coursetools.train_zoo NAME [NAME...]|all`` (:mod:`coursetools.train_zoo`).

Shape legend:
    B      batch size
    C      channels;  H, W  height and width
    N      images of a dataset (or pairs, items)
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator
from functools import partial

import torch

from capsedu._history import History
from capsedu._validate import require_int
from capsedu.data.augment import random_flip, random_warp
from capsedu.data.mnist import MNISTData, batch_loader, random_shift
from capsedu.data.multimnist import FreshPairs
from capsedu.data.transforms import CANVAS
from capsedu.nets.registry import build_network
from capsedu.training.distributed import (
    ShardedBatches,
    Through,
    World,
    data_parallel,
    epoch_end_together,
    require_group,
)
from capsedu.training.hardware import model_device
from capsedu.training.loop import EpochCallback, fit, resolve_objective
from capsedu.training.objectives import Objective, objective_from_dict
from capsedu.zoo.recipes import Recipe


def recipe_network(recipe: Recipe) -> torch.nn.Module:
    r"""A fresh network of ``recipe.kind``, its weights drawn from ``recipe.seed``; the caller's
    random state is left as it was (the draws happen on a forked copy of torch's generator)."""
    with _seeded(recipe.seed, torch.device("cpu")):
        return build_network(recipe.kind, recipe.config)


@contextlib.contextmanager
def _seeded(seed: int, device: torch.device) -> Iterator[None]:
    r"""Inside the block torch's generators (the CPU's, and ``device``'s if it is a GPU) start
    from ``seed``; after it they are as they were before."""
    require_int("seed", seed, minimum=0, maximum=2 ** 32 - 1)
    gpus = [device.index or 0] if device.type == "cuda" else []
    with torch.random.fork_rng(devices=gpus):
        torch.manual_seed(seed)
        yield


def require_canvas(canvas: int) -> int:
    r"""``canvas`` if a recipe may train on it (28, or the 40 x 40 of lesson 08's protocol)."""
    if canvas not in (28, CANVAS):
        raise ValueError(f"recipe.canvas must be 28 or {CANVAS}, got {canvas!r}")
    return canvas


def padded(digits: MNISTData, canvas: int) -> MNISTData:
    r"""``digits`` centred on a black ``canvas`` x ``canvas`` image (28: unchanged)."""
    if require_canvas(canvas) == digits.images.shape[-1]:
        return digits
    pad = (canvas - digits.images.shape[-1]) // 2
    return MNISTData(torch.nn.functional.pad(digits.images, [pad] * 4), digits.labels,  # (N, C, 40, 40)
                     f"{digits.source}, padded to {canvas}x{canvas}")


def recipe_objective(recipe: Recipe) -> Objective | None:
    r"""The objective ``recipe`` names; None (then :func:`capsedu.fit` uses the network's own loss or
    its kind's default objective) when it names none."""
    return objective_from_dict(recipe.objective) if recipe.objective else None


def train_recipe(recipe: Recipe, train_data: MNISTData, *, model: torch.nn.Module | None = None,
                 on_epoch_end: EpochCallback | None = None, progress: bool = True,
                 device: str | torch.device | None = None,
                 world: World | None = None) -> tuple[torch.nn.Module, History]:
    r"""A network of ``recipe.kind`` trained by ``recipe``: ``(model, history)``.

    ``model`` is :func:`recipe_network`'s network (built by the caller when a callback needs it
    before training), else built here: equal recipes give equal runs. ``device``: where to train
    (None: where ``model`` is - the CPU for a network built here).

    ``world``: this process's place under torchrun (:func:`capsedu.training.distributed.init`);
    None is one process. With several, every rank draws the recipe's global batches and trains
    on its share of each through DistributedDataParallel (:mod:`capsedu.training.distributed`):
    a step equals one process's step on the whole batch. ``on_epoch_end`` runs on every rank
    (give it on one rank, None on the others); ``progress`` shows on rank 0 only.
    """
    where = torch.device(device) if device is not None else (
        model_device(model) if model is not None else torch.device("cpu"))
    with _seeded(recipe.seed, where):
        # equal recipes give equal runs: the weights (when built here) and the training's own draws
        # (dropout) come from recipe.seed, and the caller's random state is left as it was
        if model is None:
            model = build_network(recipe.kind, recipe.config)
        return _train(recipe, train_data, model, on_epoch_end, progress, device, world)


def _train(recipe: Recipe, train_data: MNISTData, model: torch.nn.Module,
           on_epoch_end: EpochCallback | None, progress: bool, device: str | torch.device | None,
           world: World | None) -> tuple[torch.nn.Module, History]:
    r""":func:`train_recipe`'s work, on one process or several, once the random state is seeded."""
    device = model_device(model) if device is None else torch.device(device)
    world = World() if world is None else world
    batches, augment, epoch_size = _recipe_batches(recipe, padded(train_data, recipe.canvas))
    schedule = {"epochs": recipe.epochs, "device": device, "lr": recipe.lr,
                "lr_schedule": recipe.lr_schedule, "precision": recipe.precision}
    if world.world_size == 1:
        history = fit(model, batches, objective=recipe_objective(recipe), augment=augment,
                      on_epoch_end=on_epoch_end, progress=progress, **schedule)
        return model, history
    require_group(world)
    shares = ShardedBatches(batches, world, batch_size=recipe.batch_size, epoch_size=epoch_size,
                            augment=augment)
    wrapped = data_parallel(model, resolve_objective(model, recipe_objective(recipe)), device)
    history = fit(wrapped, shares, objective=Through(), progress=progress and world.rank == 0,
                  on_epoch_end=epoch_end_together(on_epoch_end, device), **schedule)
    return model, history


def _recipe_batches(recipe: Recipe, train_data: MNISTData) -> tuple[Iterable, Callable | None, int]:
    r"""The recipe's seeded global batches, its augmentation (None: none, or part of the pairs)
    and the images of an epoch."""
    generator = torch.Generator().manual_seed(recipe.seed)
    if recipe.pairs:  # new pairs every epoch; the shifts (and warps) are part of the pairs
        pairs = FreshPairs(train_data, batch_size=recipe.batch_size, seed=recipe.seed + 1,
                           max_angle=recipe.max_angle, max_scale=recipe.max_scale, **recipe.pairs)
        return pairs, None, pairs.pairs_per_epoch
    batches = batch_loader(train_data, recipe.batch_size, generator)
    if recipe.max_shift > 0 or recipe.max_angle or recipe.max_scale or recipe.flip:
        return batches, _augmentation(recipe), len(train_data)
    return batches, None, len(train_data)


def _augmentation(recipe: Recipe) -> Callable[[torch.Tensor], torch.Tensor]:
    r"""The training images' random shift, after a random warp and a random mirroring when the
    recipe asks for them (in that order: mirror, warp, shift)."""
    steps = []
    if recipe.flip:
        steps.append(partial(random_flip, generator=torch.Generator().manual_seed(recipe.seed + 3)))
    if recipe.max_angle or recipe.max_scale:
        steps.append(partial(random_warp, max_angle=recipe.max_angle, max_scale=recipe.max_scale,
                             generator=torch.Generator().manual_seed(recipe.seed + 2)))
    steps.append(partial(random_shift, max_shift=recipe.max_shift,
                         generator=torch.Generator().manual_seed(recipe.seed + 1)))

    def augment(images: torch.Tensor) -> torch.Tensor:  # (B, C, H, W)
        for step in steps:
            images = step(images)
        return images
    return augment


r"""Train the CPU CapsNet reproducibly and write the checkpoint shipped in ``capsedu/weights/``.

Run it as ``python -m capsedu.pretrain --test-from-epoch 1`` (the defaults are the shipped recipe;
``--out`` defaults to ``capsedu/weights/capsnet_cpu.pt``)
(with ``CAPSEDU_DATA`` or ``--data-root`` pointing at the official MNIST files, so that the test
accuracy is measured on the official 10,000-image split). It writes the checkpoint and, next to
it, a JSON of metrics (data used, epochs, wall and CPU time, load average, test accuracy and the
checkpoint's SHA-256, which :func:`capsedu.pretrained.pretrained` verifies before loading).

Shape legend:
    N      number of images
    B      batch size
The recipe (:class:`Recipe`) is the CPU profile's: Adam with a one-cycle learning rate, random
shifts of up to 2 pixels (Section 5 of the paper), the margin + 0.0005 x reconstruction loss.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import platform
import threading
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import torch
from torch.utils.data import DataLoader

from capsedu.checkpoint import load_checkpoint, save_checkpoint
from capsedu.data import MNISTData, load_mnist, random_shift
from capsedu.model import CapsNet, CapsNetConfig
from capsedu.runtime import set_seed
from capsedu.train import EpochCallback, evaluate, fit

DEFAULT_OUT = Path(__file__).parent / "weights" / "capsnet_cpu.pt"


@dataclass(frozen=True)
class Recipe:
    r"""How the CPU profile is trained (the defaults are the tuned ones)."""

    epochs: int = 30
    batch_size: int = 32
    lr: float = 2e-3
    lr_schedule: str = "onecycle"
    max_shift: int = 2
    seed: int = 0


class LoadSampler:
    r"""Samples ``os.getloadavg()`` (1-minute) every ``interval`` seconds in a daemon thread."""

    def __init__(self, interval: float = 5.0) -> None:
        self.interval, self.samples = interval, [os.getloadavg()[0]]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.samples.append(os.getloadavg()[0])

    def __enter__(self) -> LoadSampler:  # noqa: PYI034
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.samples.append(os.getloadavg()[0])

    def summary(self) -> dict[str, float]:
        return {"mean": round(sum(self.samples) / len(self.samples), 2),
                "min": round(min(self.samples), 2), "max": round(max(self.samples), 2)}


def loader(data: MNISTData, batch_size: int, generator: torch.Generator | None = None) -> DataLoader:
    r"""Batches (B, 1, 28, 28) of ``data``, shuffled by ``generator`` when one is given."""
    return DataLoader(data, batch_size=batch_size, shuffle=generator is not None,
                      generator=generator)


def train_profile(train_data: MNISTData, recipe: Recipe = Recipe(), *,
                  model: CapsNet | None = None, val_data: MNISTData | None = None,
                  on_epoch_end: EpochCallback | None = None,
                  progress: bool = True) -> tuple[CapsNet, dict[str, list]]:
    r"""Train ``model`` (default: a fresh :meth:`CapsNetConfig.cpu` CapsNet) with ``recipe``.

    The seed is set before the weights are (re)initialised, so equal recipes give equal runs.
    Returns ``(model, history)``.
    """
    generator = set_seed(recipe.seed)
    model = model or CapsNet(CapsNetConfig.cpu())
    model.load_state_dict(CapsNet(model.config).state_dict())  # seeded initial weights
    augment: Callable[[torch.Tensor], torch.Tensor] | None = None
    if recipe.max_shift > 0:
        augment = partial(random_shift, max_shift=recipe.max_shift,
                          generator=torch.Generator().manual_seed(recipe.seed + 1))
    val = loader(val_data, 500) if val_data is not None else None
    history = fit(model, loader(train_data, recipe.batch_size, generator), epochs=recipe.epochs,
                  lr=recipe.lr, lr_schedule=recipe.lr_schedule, augment=augment, val_loader=val,
                  on_epoch_end=on_epoch_end, progress=progress)
    return model, history


def sha256(path: str | os.PathLike) -> str:
    r"""Hex SHA-256 of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def metrics_path(checkpoint: str | os.PathLike) -> Path:
    r"""The JSON of metrics that sits next to ``checkpoint`` (same name, ``.json``)."""
    return Path(checkpoint).with_suffix(".json")


def _describe(data: MNISTData) -> dict[str, Any]:
    return {"images": len(data), "source": data.source}


def test_every_epoch(model: CapsNet, test_data: MNISTData, *, start: int = 1,
                     report: Callable[[str], None] | None = None) -> EpochCallback:
    r"""An ``on_epoch_end`` callback: test accuracy from epoch ``start`` on, stored in the history.

    Adds ``test_accuracy`` (None for epochs not tested) and ``load_average`` (1-minute) to the
    history; evaluation happens after ``train_seconds`` is recorded, so it is not counted.
    """
    test_loader = loader(test_data, 500)

    def callback(epoch: int, history: dict[str, list]) -> None:
        accuracy = evaluate(model, test_loader)["accuracy"] if epoch >= start else None
        history.setdefault("test_accuracy", []).append(accuracy)
        history.setdefault("load_average", []).append(round(os.getloadavg()[0], 2))
        if report is not None:
            report(epoch_line(history))
    return callback


def epoch_line(history: dict[str, list]) -> str:
    r"""One line about the last epoch: cumulative training time (wall and CPU) and test accuracy."""
    accuracy = history["test_accuracy"][-1]
    shown = "not tested" if accuracy is None else f"{accuracy:.2%}"
    return (f"epoch {history['epoch'][-1]:3d}  train {sum(history['train_seconds']):7.1f} s wall "
            f"{sum(history['train_cpu_seconds']):7.1f} s CPU  test {shown}  "
            f"load {history['load_average'][-1]:.1f}")


def time_to(history: dict[str, list], target: float) -> dict[str, Any] | None:
    r"""Epoch and cumulative training time (wall/CPU, evaluation excluded) of the first test >= target."""
    for index, accuracy in enumerate(history.get("test_accuracy", [])):
        if accuracy is not None and accuracy >= target:
            return {"epoch": history["epoch"][index],
                    "train_wall_seconds": round(sum(history["train_seconds"][:index + 1]), 1),
                    "train_cpu_seconds": round(sum(history["train_cpu_seconds"][:index + 1]), 1)}
    return None


def pretrain(recipe: Recipe, out: str | os.PathLike = DEFAULT_OUT, *,
             data_root: str | os.PathLike | None = None, half: bool = True,
             train_images: int | None = None, test_images: int | None = None,
             test_from_epoch: int | None = None, progress: bool = True,
             report: Callable[[str], None] | None = None) -> dict[str, Any]:
    r"""Train with ``recipe``, save the checkpoint to ``out`` and its metrics JSON; return the metrics.

    ``train_images``/``test_images`` restrict training/testing to a class-balanced subset (for
    quick smoke runs); by default all training images are used and the whole test split.
    ``test_from_epoch`` tests after every epoch from that one on (time-to-accuracy figures).
    """
    train_data = load_mnist("train", data_root, download=False)
    test_data = load_mnist("test", data_root, download=False)
    if train_images is not None:
        train_data = train_data.subset(train_images, seed=recipe.seed)
    if test_images is not None:
        test_data = test_data.subset(test_images, seed=recipe.seed)
    model = CapsNet(CapsNetConfig.cpu())
    callback = (None if test_from_epoch is None else
                test_every_epoch(model, test_data, start=test_from_epoch, report=report))
    with LoadSampler() as load:
        model, history = train_profile(train_data, recipe, model=model, on_epoch_end=callback,
                                       progress=progress)
    train_seconds = sum(history["train_seconds"])
    tested = history.get("test_accuracy", [None])[-1]  # the last epoch's test, when there was one
    float_accuracy = tested if tested is not None else evaluate(model, loader(test_data, 500))["accuracy"]
    path = save_checkpoint(out, model, history=history, half=half,
                           metadata={"recipe": dataclasses.asdict(recipe)})
    shipped, _ = load_checkpoint(path)  # measure the weights exactly as they are shipped
    shipped_accuracy = evaluate(shipped, loader(test_data, 500))["accuracy"]
    metrics = {
        "name": path.stem, "checkpoint": path.name, "sha256": sha256(path),
        "size_bytes": path.stat().st_size, "half_precision": half,
        "config": model.config.to_dict(), "recipe": dataclasses.asdict(recipe),
        "train_data": _describe(train_data), "test_data": _describe(test_data),
        "epochs": len(history["epoch"]), "test_accuracy": shipped_accuracy,
        "test_accuracy_float32": float_accuracy,
        "train_wall_seconds": round(train_seconds, 1),
        "train_cpu_seconds": round(sum(history["train_cpu_seconds"]), 1),
        "train_images_per_second": round(len(train_data) * len(history["epoch"]) / train_seconds, 1),
        "load_average_1min_during_training": load.summary(), "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(), "torch_version": torch.__version__,
        "python_version": platform.python_version(),
        "time_to_98.0": time_to(history, 0.98), "time_to_98.5": time_to(history, 0.985),
        "history": {k: history[k] for k in ("epoch", "train_loss", "train_accuracy", "lr",
                                             "train_seconds", "train_cpu_seconds",
                                             "test_accuracy", "load_average") if k in history},
    }
    metrics_path(path).write_text(json.dumps(metrics, indent=2) + "\n")
    return metrics


def main(argv: list[str] | None = None) -> dict[str, Any]:
    defaults = Recipe()
    parser = argparse.ArgumentParser(prog="python -m capsedu.pretrain", description=__doc__.split("\n")[0])
    parser.add_argument("--seed", type=int, default=defaults.seed)
    parser.add_argument("--epochs", type=int, default=defaults.epochs)
    parser.add_argument("--batch-size", type=int, default=defaults.batch_size)
    parser.add_argument("--lr", type=float, default=defaults.lr, help="peak learning rate")
    parser.add_argument("--max-shift", type=int, default=defaults.max_shift)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="checkpoint path (.pt)")
    parser.add_argument("--data-root", type=Path, default=None,
                        help="MNIST data root (default: $CAPSEDU_DATA or ~/.cache/capsedu)")
    parser.add_argument("--train-images", type=int, default=None, help="train on a subset (smoke runs)")
    parser.add_argument("--test-images", type=int, default=None, help="test on a subset (smoke runs)")
    parser.add_argument("--test-from-epoch", type=int, default=None,
                        help="test after every epoch from this one on (time to 98.0/98.5 %%)")
    parser.add_argument("--float32", action="store_true", help="store float32 instead of float16")
    args = parser.parse_args(argv)
    recipe = Recipe(epochs=args.epochs, batch_size=args.batch_size, lr=args.lr,
                    max_shift=args.max_shift, seed=args.seed)
    metrics = pretrain(recipe, args.out, data_root=args.data_root, half=not args.float32,
                       train_images=args.train_images, test_images=args.test_images,
                       test_from_epoch=args.test_from_epoch, report=print)
    print(json.dumps({k: v for k, v in metrics.items() if k not in ("history", "config")}, indent=2))
    return metrics


if __name__ == "__main__":
    main()

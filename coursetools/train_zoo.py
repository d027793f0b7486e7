r"""Train the shipped networks, write their records: ``python -m coursetools.train_zoo NAME|all``.

A tool of the repository, not of the package: it writes into the source tree's
``capsedu/zoo/weights/`` (or ``--out-dir``), never into an installed capsedu (an out-dir inside a
``site-packages`` folder is refused).

Every shipped network (:mod:`capsedu.zoo.shipped`) has a recipe (:mod:`capsedu.zoo.recipes`),
which :func:`capsedu.zoo.train.train_recipe` trains. This command trains it reproducibly (seeded)
on the three splits of :mod:`capsedu.data.splits`: it learns from the 55,000-image train split,
is measured on the 5,000-image validation split after every epoch (the curve every recipe choice
is made on), and on the official test split once, at the end, with the weights exactly as
shipped. It writes the checkpoint ``NAME.pt`` and, beside it, ``NAME.json``: the recipe, each
split's source and size, the validation and test accuracy with their standard errors, the
validation accuracy per epoch and the time it took to reach 98, 98.5, 99 and 99.5 %, wall and CPU
time, the 1-, 5- and 15-minute load averages before and after training, the machine, the tries
made on validation before this recipe (``benchmarks/tries.json``, written by
``python -m benchmarks.recipe_search``), the checkpoint's SHA-256, and which test images it got
right (``test_correct``: base64 of ``numpy.packbits`` of one boolean per image, in test-split
order; pairs with both digits right for MultiMNIST; read by
:func:`capsedu.zoo.shipped.correct_on_test`). Without the official training files
(``CAPSEDU_DATA``) it stops and says so.

On several devices, PyTorch's launcher runs it once per device:
``python -m torch.distributed.run --nproc_per_node N -m coursetools.train_zoo NAME`` (``torchrun``;
``--device cuda`` gives rank r GPU ``LOCAL_RANK``). Each rank trains on its share of every global
batch through DistributedDataParallel (:mod:`capsedu.training.distributed`: the same steps as one
process on the recipe's batch); rank 0 alone validates, tests and writes ``NAME.pt`` and
``NAME.json``, whose ``world_size`` and ``backend`` say how it was trained (its CPU seconds are
rank 0's); the other ranks wait for it, then leave.

Shape legend:
    N      number of images
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from capsedu.data.files import file_sha256
from capsedu.data.mnist import MNISTData
from capsedu.data.multimnist import MultiMNIST
from capsedu.nets.multi_digit import pair_hits
from capsedu.training import distributed
from capsedu.training.checkpoint import STORAGE, load_checkpoint, save_checkpoint
from capsedu.training.hardware import model_device, reuse_large_allocations
from capsedu.training.loop import EpochCallback
from capsedu.training.modes import eval_mode
from capsedu.training.paired import pack_correct
from capsedu.training.prediction import predict
from capsedu.training.uncertainty import standard_error
from capsedu.zoo.recipes import RECIPES, Recipe
from capsedu.zoo.shipped import shipped_paths
from capsedu.zoo.train import recipe_network, recipe_objective, train_recipe
from coursetools.out_paths import outside_installed_packages
from coursetools.recipe_data import recipe_data

ROOT = Path(__file__).resolve().parents[1]  # the repository
WEIGHTS_DIR = ROOT / "capsedu" / "zoo" / "weights"  # the source tree's, not an installed package's
TRIES = ROOT / "benchmarks" / "tries.json"  # the tries made on validation (benchmarks.recipe_search)
THRESHOLDS = (0.98, 0.985, 0.99, 0.995)  # validation accuracies whose time to reach is recorded


def hits_on(model: torch.nn.Module, test: MNISTData | MultiMNIST,
            device: str | torch.device | None = None) -> torch.Tensor:
    r"""Per image of ``test`` (N,), in order, how many of its labels ``model`` gets right: 0 or 1
    for single digits (the predicted class), 0 to 2 for pairs (the paper's rule, as
    :func:`capsedu.pair_accuracy` counts it, in its batches). ``device``: where ``model`` is
    (None: its own device, :func:`~capsedu.training.hardware.model_device`)."""
    device = model_device(model) if device is None else device
    if not isinstance(test, MultiMNIST):
        return (predict(model, test.images, batch_size=100, device=device) == test.labels).long()
    hits = []
    with eval_mode(model), torch.inference_mode():
        for images, targets in test.batches(500):  # pair_accuracy's batches
            hits.append(pair_hits(model.class_scores(images.to(device)).cpu(), targets.labels))
    return torch.cat(hits)  # (N,)


def scores_of(hits: torch.Tensor, pairs: bool) -> dict[str, float]:
    r"""``{"accuracy": ...}`` from :func:`hits_on`'s counts: the share of images right (pairs: both
    digits right), and for pairs ``"at_least_one"``."""
    if not pairs:
        return {"accuracy": int(hits.sum()) / len(hits)}
    return {"accuracy": int((hits == 2).sum()) / len(hits),
            "at_least_one": int((hits >= 1).sum()) / len(hits)}


def accuracy_on(model: torch.nn.Module, test: MNISTData | MultiMNIST,
                device: str | torch.device | None = None) -> dict[str, float]:
    r""":func:`scores_of` ``model`` on ``test`` (one pass, :func:`hits_on`)."""
    return scores_of(hits_on(model, test, device), isinstance(test, MultiMNIST))


def record_accuracy(model: torch.nn.Module, data: MNISTData | MultiMNIST, key: str = "validation_accuracy",
                    report: Callable[[str], None] | None = None,
                    device: str | torch.device | None = None) -> EpochCallback:
    r"""An ``on_epoch_end`` callback recording ``model``'s accuracy on ``data`` under ``history[key]``
    (measured where ``model`` trains: ``device``, or None for where its parameters are)."""
    def callback(epoch: int, history: dict) -> None:
        accuracy = accuracy_on(model, data, device)["accuracy"]
        history.setdefault(key, []).append(accuracy)
        if report is not None:
            report(f"epoch {epoch}: train {history['train_accuracy'][-1]:.2%}, {key.replace('_', ' ')} "
                   f"{accuracy:.2%}, {sum(history['train_seconds']):.0f} s of training")
    return callback


def each_of(callbacks: list[EpochCallback]) -> EpochCallback:
    r"""One ``on_epoch_end`` callback calling each of ``callbacks``; it stops training when one asks."""
    def callback(epoch: int, history: dict) -> bool:
        return any([bool(c(epoch, history)) for c in callbacks])  # a list: every callback runs
    return callback


def time_to(history: dict, accuracy: float, key: str = "validation_accuracy") -> dict[str, float] | None:
    r"""Training seconds and epoch at which ``history[key]`` first reached ``accuracy``."""
    for index, measured in enumerate(history.get(key, [])):
        if measured is not None and measured >= accuracy:
            return {"epoch": history["epoch"][index],
                    "train_seconds": round(sum(history["train_seconds"][: index + 1]), 1)}
    return None


def _load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def _cpu() -> str:
    cpuinfo = Path("/proc/cpuinfo")
    lines = cpuinfo.read_text().splitlines() if cpuinfo.is_file() else []
    return next((line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")),
                platform.processor() or "unknown processor")


def _device_name(device: str | torch.device) -> str:
    r"""What trained the network: ``"cpu"``, or the accelerator's name (``"cuda: NVIDIA H200"``)."""
    device = torch.device(device)
    return f"cuda: {torch.cuda.get_device_name(device)}" if device.type == "cuda" else device.type


def _split(data: MNISTData | MultiMNIST, accuracy: float | None = None) -> dict[str, Any]:
    entry: dict[str, Any] = {"source": data.source, "images": len(data)}
    if accuracy is not None:
        entry |= {"accuracy": accuracy, "standard_error": standard_error(accuracy, len(data))}
    return entry


def _tries(name: str, path: Path = TRIES) -> list[dict[str, Any]]:
    return json.loads(path.read_text()).get(name, []) if path.is_file() else []


def _metrics(name: str, recipe: Recipe, path: Path, history: dict, data: dict[str, Any],
             scores: dict[str, float], loads: list[list[float]], tries: Path) -> dict[str, Any]:
    r"""The record ``NAME.json``: what was trained, on what, how well, how fast and on which machine
    (``scores``: the shipped file's test ``accuracy`` and ``validation`` accuracy)."""
    train_seconds = sum(history["train_seconds"])
    seen = recipe.pairs.get("pairs_per_epoch", len(data["train"])) * len(history["epoch"])
    return {
        "name": name, "kind": recipe.kind, "checkpoint": path.name, "sha256": file_sha256(path),
        "size_bytes": path.stat().st_size, "recipe": dataclasses.asdict(recipe),
        "train_data": _split(data["train"]),
        "validation_data": _split(data["validation"], scores["validation"]),
        "test_data": _split(data["test"], scores["accuracy"]),
        "epochs": len(history["epoch"]), "test_accuracy": scores["accuracy"],
        "test_standard_error": standard_error(scores["accuracy"], len(data["test"])),
        "train_wall_seconds": round(train_seconds, 1),
        "train_cpu_seconds": round(sum(history["train_cpu_seconds"]), 1),
        "train_images_per_second": round(seen / train_seconds, 1),
        "load_average_before": loads[0], "load_average_after": loads[1],
        "cpu": _cpu(), "cpu_count": os.cpu_count(), "torch_threads": torch.get_num_threads(),
        "torch_version": torch.__version__, "python_version": platform.python_version(),
        **{f"time_to_{100 * t:.1f}": time_to(history, t) for t in THRESHOLDS},
        "tries": _tries(name, tries),
        "history": {k: history[k] for k in ("epoch", "train_loss", "train_accuracy", "lr", "precision",
                                             "train_seconds", "train_cpu_seconds",
                                             "validation_accuracy", "validation_affnist_accuracy")
                    if k in history},
    }


def with_changes(recipe: Recipe, settings: list[str]) -> tuple[Recipe, dict[str, str]]:
    r"""``recipe`` with ``settings`` applied, and the settings as ``{key: value text}``.

    Each setting is ``field=value`` or ``part.field=value`` (``part``: ``config``, ``objective`` or
    ``pairs``), the value in JSON: ``batch_size=128``, ``config.conv1_channels=256``.
    """
    fields: dict[str, Any] = {}
    known = {f.name for f in dataclasses.fields(recipe)}
    for setting in settings:
        key, equals, text = setting.partition("=")
        part, _, inner = key.partition(".")
        if not equals or part not in known or (inner and not isinstance(getattr(recipe, part), dict)):
            raise ValueError(f"settings: expected field=value or config.field=value with a field of "
                             f"Recipe ({', '.join(sorted(known))}), got {setting!r}")
        try:
            value = json.loads(text)
        except json.JSONDecodeError as error:
            raise ValueError(f"settings: the value of {key!r} must be JSON (e.g. 128, true, "
                             f"\"text\"), got {text!r}") from error
        fields[part] = {**fields.get(part, getattr(recipe, part)), inner: value} if inner else value
    return dataclasses.replace(recipe, **fields), dict(s.split("=", 1) for s in settings)


def writable_out_dir(out_dir: str | os.PathLike) -> Path:
    r"""``out_dir`` as a path, refused (ValueError) when it lies inside an installed package's
    folder (``site-packages``): the records belong to the repository, not to an installation."""
    return outside_installed_packages(out_dir, "out_dir")


def lossless(float32: float, stored: float, images: int) -> bool:
    r"""True when accuracy ``stored`` (from half-precision weights) equals ``float32`` to the
    printed digit (a percentage with two decimals) or within a tenth of a standard error."""
    return (round(100 * float32, 2) == round(100 * stored, 2)
            or abs(float32 - stored) <= 0.1 * standard_error(float32, images))


def ship(checkpoint: Path, model: torch.nn.Module, splits: dict[str, MNISTData | MultiMNIST],
         storage: str, device: torch.device, **saved: Any) -> dict[str, Any]:
    r"""Write ``model`` to ``checkpoint`` in ``storage``'s dtype when that loses nothing.

    The accuracies on ``splits`` (validation and test) are measured from the float32 weights in
    memory and again from the written file; a half-precision file is kept only when every split's
    is :func:`lossless`, else the float32 file replaces it. Returns the record's ``storage``,
    ``float32_accuracy`` and ``stored_accuracy`` (per split), and ``hits``: the shipped file's
    per-image hits per split (:func:`hits_on`). ``saved``: :func:`save_checkpoint`'s keywords."""
    pairs = isinstance(splits["test"], MultiMNIST)
    float32 = {k: scores_of(hits_on(model, v, device), pairs)["accuracy"] for k, v in splits.items()}
    for candidate in dict.fromkeys([storage, "float32"]):
        save_checkpoint(checkpoint, model, storage=candidate, **saved)
        shipped, _ = load_checkpoint(checkpoint)  # measure the weights exactly as they are shipped
        hits = {k: hits_on(shipped.to(device), v, device) for k, v in splits.items()}
        accuracy = {k: scores_of(h, pairs)["accuracy"] for k, h in hits.items()}
        if all(lossless(float32[k], accuracy[k], len(splits[k])) for k in splits):
            break
    return {"storage": candidate, "storage_asked": storage, "float32_accuracy": float32,
            "stored_accuracy": accuracy, "hits": hits}


def train_shipped(name: str, recipe: Recipe, out_dir: str | os.PathLike = WEIGHTS_DIR, *,
                  data_root: str | os.PathLike | None = None, storage: str = "float16", progress: bool = True,
                  report: Callable[[str], None] | None = None, tries: Path = TRIES,
                  device: str | torch.device | None = None,
                  world: distributed.World | None = None) -> dict[str, Any]:
    r"""Train ``recipe`` on the train split (on ``device``; None: the CPU, where a fresh network
    is), validating every epoch; test the shipped weights once; write ``NAME.pt`` and ``NAME.json``
    into ``out_dir``; return the metrics. ``world``: this rank under torchrun (None: one process;
    module docstring): rank 0 alone measures and writes, the others return ``{}``."""
    if recipe.train_data != "train":
        raise ValueError(f"recipe.train_data must be 'train' (capsedu.data.splits), got {recipe.train_data!r}")
    world = distributed.World() if world is None else world
    out_dir = writable_out_dir(out_dir)
    data = recipe_data(recipe, data_root)
    model = recipe_network(recipe)
    device = distributed.rank_device("cpu" if device is None else device, world)
    loads = [_load_average()]
    callbacks = _validation(model, data, report, device) if world.rank == 0 else None
    model, history = train_recipe(recipe, data["train"], model=model, device=device, world=world,
                                  progress=progress, on_epoch_end=callbacks)
    loads.append(_load_average())
    if world.rank != 0:
        distributed.barrier()  # until rank 0 has written the record
        return {}
    checkpoint, json_path = shipped_paths(name, out_dir)
    splits = {"validation": data["validation"], "test": data["test"]}
    stored = ship(checkpoint, model, splits, storage, device, objective=recipe_objective(recipe),
                  history=history, metadata={"recipe": dataclasses.asdict(recipe)})
    hits = stored.pop("hits")  # the shipped file's, per split
    pairs = isinstance(data["test"], MultiMNIST)
    scores = scores_of(hits["test"], pairs)
    validation = scores_of(hits["validation"], pairs)["accuracy"]
    metrics = _metrics(name, recipe, checkpoint, history, data, scores | {"validation": validation},
                       loads, tries) | stored | {
        "device": _device_name(device), "world_size": world.world_size,
        "backend": distributed.backend()}
    if "at_least_one" in scores:
        metrics["test_at_least_one"] = scores["at_least_one"]
    metrics["test_correct"] = pack_correct(hits["test"] == (2 if pairs else 1))  # per image
    temporary = json_path.with_suffix(".json.tmp")
    temporary.write_text(json.dumps(metrics, indent=2) + "\n")
    temporary.replace(json_path)  # atomic, like the checkpoint: never a half-written record
    distributed.barrier()  # the other ranks leave once the record is written
    return metrics


def _validation(model: torch.nn.Module, data: dict[str, Any], report: Callable[[str], None] | None,
                device: torch.device) -> EpochCallback:
    r"""The ``on_epoch_end`` that records ``model``'s validation accuracy (and affNIST-like's)."""
    callbacks = [record_accuracy(model, data["validation"], report=report, device=device)]
    if "validation_affnist" in data:
        callbacks.append(record_accuracy(model, data["validation_affnist"],
                                         "validation_affnist_accuracy", report=report, device=device))
    return each_of(callbacks)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m coursetools.train_zoo",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("names", nargs="+", choices=[*sorted(RECIPES), "all"],
                        help="the shipped networks to train, or 'all' (one after the other)")
    parser.add_argument("--out-dir", type=Path, default=WEIGHTS_DIR,
                        help="folder for NAME.pt and NAME.json "
                             "(default: the repository's capsedu/zoo/weights)")
    parser.add_argument("--data-root", type=Path, default=None,
                        help="MNIST data root with the official training and test files "
                             "(default: $CAPSEDU_DATA)")
    parser.add_argument("--epochs", type=int, default=None, help="override the recipes' epochs")
    parser.add_argument("--seed", type=int, default=None, help="override the recipes' seed")
    parser.add_argument("--set", dest="settings", action="append", default=[],
                        help="change a recipe: field=value or config.field=value (JSON values, "
                             "e.g. batch_size=128); repeatable; NAME.json records the changed recipe")
    parser.add_argument("--storage", choices=sorted(STORAGE), default="float16",
                        help="dtype to store the weights in (default float16); a half-precision file "
                             "is kept only when its validation and test accuracies equal float32's")
    parser.add_argument("--device", default="cpu",
                        help="train and measure on this torch device, e.g. 'cuda' (default: cpu)")
    parser.add_argument("--tries", type=Path, default=TRIES,
                        help="the record of tries on validation to copy into NAME.json")
    return parser


def main(argv: list[str] | None = None) -> dict[str, dict[str, Any]]:
    args = _parser().parse_args(argv)
    writable_out_dir(args.out_dir)  # refused before any training, not after the first network
    reuse_large_allocations()  # EM routing's large tensors: half the step time (hardware.py)
    names = sorted(RECIPES) if "all" in args.names else list(dict.fromkeys(args.names))
    overrides = {k: v for k, v in (("epochs", args.epochs), ("seed", args.seed)) if v is not None}
    world = distributed.init(args.device)  # torchrun's process group; nothing in one process
    say = print if world.rank == 0 else _silent
    results = {}
    try:
        for name in names:
            recipe = dataclasses.replace(with_changes(RECIPES[name], args.settings)[0], **overrides)
            say(f"== {name}: {recipe}")
            metrics = train_shipped(name, recipe, args.out_dir, data_root=args.data_root,
                                    storage=args.storage, report=say, tries=args.tries,
                                    device=args.device, world=world)
            shown = {k: v for k, v in metrics.items() if k not in ("history", "test_correct")}
            say(json.dumps(shown, indent=2))
            results[name] = metrics
    finally:
        distributed.finish()
    return results


def _silent(*_: object) -> None:
    r"""``print`` on the ranks other than 0: nothing."""


if __name__ == "__main__":
    main()

r"""Adaptive attacks on the shipped networks: each image's worst case over many attacks, through
the gradient of the function each network computes (lesson 13).

    CAPSEDU_DATA=/path/to/data .venv/bin/python -m benchmarks.adaptive_attacks
    CAPSEDU_DATA=/path/to/data .venv/bin/python -m benchmarks.adaptive_attacks --datasets fashion
    CAPSEDU_DATA=/path/to/data .venv/bin/python -m benchmarks.adaptive_attacks --images 40 --out /tmp/a.json

``--datasets`` measures only the named datasets and keeps the others that ``--out`` records with
the same settings; each dataset's entry says what it ran on and how long it took.

On the first ``--images`` images of each dataset's official test split, the same images for every
network (the EM network too), at each eps (L-infinity, pixels in [0, 1]):

1. **Attacks on every image**, each measured alone (``attacks``): PGD (10 steps of eps/4 from a
   random start, ``torchattacks``) through each *view* of the network - for a dynamic-routing
   CapsNet the true gradient of its routing (``full_routing_gradient``) and the training-time
   surrogate (couplings held fixed); for the EM network its pre-sigmoid logits and the
   log-sigmoid scores (the latter at the headline eps only: a step costs 30-40 times a CapsNet's);
   the vote attack on the CapsNets (PGD on the one-iteration network, ``UniformCouplings``,
   shown to the routed one; Gu, Wu & Tresp 2021); transfer attacks (PGD on the dataset's CNN and
   on its CapsNet, shown to every other network).
2. **The worst case** (``worst``): on the images every attack of step 1 left right (and, from the
   second eps on, that the smaller eps left right: a smaller ball lies inside a larger one), a chain
   of stronger attacks, each meeting only what the chain before it left (AutoAttack's way):
   Auto-PGD on the DLR loss and on the cross-entropy (50 steps), the DLR margin of the capsule
   lengths themselves (capsule networks with lengths), targeted Auto-PGD towards the runner-up
   class, and at the headline eps Auto-PGD again with 200 steps (DLR: the better of 2 restarts;
   cross-entropy: 1), then the gradient-free Square attack (1,000 queries). ``added`` counts the images each link
   broke that everything before it had missed: the last links' counts say whether more effort
   still lowers the accuracy.
3. **Sanity checks** (``checks``): eps = 0 changes no answer (PGD, first 100 images); an unbounded
   attack (eps = 1, PGD with 20 steps) leaves no image right (on the images the largest eps left).

The white-box attacks of step 2 follow the first view (the true gradient). Each row keeps its
per-image results (packed, :func:`capsedu.unpack_correct`) so that networks compare paired. The
result is ``capsedu/zoo/studies/adaptive.json`` by default.

Shape legend: none (no tensor shapes of its own).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

import capsedu
from benchmarks.measure import machine_record, write_study
from capsedu.explore.adaptive import (
    LengthsAsLogits,
    PreSigmoidLogits,
    UniformCouplings,
    full_routing_gradient,
)
from capsedu.explore.attacks import TORCHATTACKS, apgd, apgd_targeted, attacked_correct, pgd, square
from capsedu.nets.capsnet import CapsNet
from capsedu.nets.matrix_capsnet import MatrixCapsNet
from capsedu.training.paired import pack_correct
from capsedu.zoo.shipped import STUDIES_DIR
from coursetools.out_paths import outside_installed_packages


@dataclass(frozen=True)
class Setting:
    networks: tuple[str, ...]
    sources: tuple[str, ...]  # the networks transfer attacks are crafted on
    eps: tuple[float, ...]
    headline: float  # the eps where the lesson's table reads, and the longest attacks run


DATASETS = {
    "mnist": Setting(("capsnet", "cnn", "efficient", "em"), ("cnn", "capsnet"), (0.05, 0.1, 0.2), 0.1),
    "fashion": Setting(("fashion_capsnet", "fashion_cnn", "fashion_efficient"), ("fashion_cnn", "fashion_capsnet"),
                       (0.02, 0.05, 0.1), 0.05),
}
PGD_STEPS, APGD_STEPS, SQUARE_QUERIES = 10, 50, 1000
LONG = {"dlr": (200, 2), "ce": (200, 1)}  # the headline eps's longer Auto-PGD: loss -> (steps, restarts)
UNBOUNDED_EPS, UNBOUNDED_STEPS, SANITY_IMAGES = 1.0, 20, 100


def views(model: nn.Module) -> dict[str, tuple[nn.Module, nn.Module | None]]:
    r"""The gradients a white-box attack can follow, the function the network computes first:
    name -> (network, logits; None: log class_scores)."""
    if isinstance(model, CapsNet):
        return {"true gradient": (full_routing_gradient(model), None), "surrogate": (model, None)}
    if isinstance(model, MatrixCapsNet):
        return {"pre-sigmoid": (model, PreSigmoidLogits(model)), "log-sigmoid": (model, None)}
    return {"": (model, None)}


def crafted(attack, images: torch.Tensor, labels: torch.Tensor, batch_size: int) -> torch.Tensor:
    r"""``attack``'s images for all of ``images`` (N, C, H, W), batch by batch."""
    return torch.cat([attack(x, y) for x, y in zip(images.split(batch_size), labels.split(batch_size))])


def chain(model: nn.Module, eps: float, headline: bool) -> dict:
    r"""Step 2's attacks in order: name -> attack, all through the first view."""
    network, logits = next(iter(views(model).values()))
    links = {"Auto-PGD, DLR": apgd(network, eps, steps=APGD_STEPS, logits=logits),
             "Auto-PGD, cross-entropy": apgd(network, eps, steps=APGD_STEPS, loss="ce", logits=logits)}
    if not isinstance(model, MatrixCapsNet) and model.kind != "cnn":
        links["length margin (DLR of the lengths)"] = apgd(network, eps, steps=APGD_STEPS,
                                                           logits=LengthsAsLogits(network))
    links["targeted Auto-PGD"] = apgd_targeted(network, eps, steps=APGD_STEPS, logits=logits)
    if headline:
        for loss, label in (("dlr", "DLR"), ("ce", "cross-entropy")):
            steps, restarts = LONG[loss]
            links[f"Auto-PGD, {label}, {steps} steps x {restarts}"] = apgd(
                network, eps, steps=steps, restarts=restarts, loss=loss, logits=logits)
        links[f"Square ({SQUARE_QUERIES} queries)"] = square(network, eps, queries=SQUARE_QUERIES, logits=logits)
    return links


def batch_size(model: nn.Module) -> int:
    r"""Images per attack call: small for the EM network (measured about twice as fast a gradient
    per image at 25 as at 250 on 2 cores), large for the others."""
    return 25 if isinstance(model, MatrixCapsNet) else 250


def alone(model: nn.Module, name: str, eps: float, headline: bool, crafted_by: dict[str, torch.Tensor],
          images: torch.Tensor, labels: torch.Tensor) -> dict[str, torch.Tensor]:
    r"""Step 1 at ``eps``: attack name -> which images (N,) ``model`` still reads right."""
    size = batch_size(model)
    right = {}
    for k, (view, (network, logits)) in enumerate(views(model).items()):
        if k > 0 and isinstance(model, MatrixCapsNet) and not headline:
            continue  # the log-sigmoid view of the EM network: at the headline eps only
        right[f"PGD {view}".strip()] = attacked_correct(model, images, labels,
                                                       pgd(network, eps, steps=PGD_STEPS, logits=logits),
                                                       batch_size=size)
    if isinstance(model, CapsNet):
        right["vote attack"] = attacked_correct(model, images, labels,
                                                pgd(UniformCouplings(model), eps, steps=PGD_STEPS), batch_size=size)
    for source, adversarial in crafted_by.items():
        if source != name:
            right[f"transfer from {source}"] = attacked_correct(model, adversarial, labels, None, batch_size=size)
    return right


def sanity_checks(model: nn.Module, images: torch.Tensor, labels: torch.Tensor, clean: torch.Tensor,
           alive: torch.Tensor) -> dict:
    r"""Step 3: eps = 0 (first images) and an unbounded attack (on the images ``alive`` (N,) at the largest eps)."""
    network, logits = next(iter(views(model).values()))
    size, first = batch_size(model), slice(0, SANITY_IMAGES)
    at_zero = attacked_correct(model, images[first], labels[first], pgd(network, 0.0, steps=PGD_STEPS, logits=logits),
                               batch_size=size)
    unbounded = attacked_correct(model, images, labels,
                                 pgd(network, UNBOUNDED_EPS, steps=UNBOUNDED_STEPS, logits=logits),
                                 batch_size=size, where=alive) if bool(alive.any()) else alive
    return {"eps 0: images": len(at_zero), "eps 0: answers changed": int((at_zero != clean[first]).sum()),
            "unbounded: eps": UNBOUNDED_EPS, "unbounded: attacked": int(alive.sum()),
            "unbounded: still right": int(unbounded.sum())}


def row_for(name: str, model: nn.Module, setting: Setting, crafted_by: dict[str, torch.Tensor],
            images: torch.Tensor, labels: torch.Tensor) -> dict:
    r"""One network's row: clean, then per eps step 1's accuracies, step 2's chain and the worst case."""
    start = time.perf_counter()
    clean = attacked_correct(model, images, labels, None, batch_size=batch_size(model))
    row = {"images": len(images), "clean": float(clean.float().mean()), "clean_correct": pack_correct(clean),
           "views": list(views(model)), "by_eps": {}}
    alive_before = clean
    for eps in setting.eps:
        headline = eps == setting.headline
        right = alone(model, name, eps, headline, crafted_by[eps], images, labels)
        alive = alive_before.clone()
        for kept in right.values():
            alive &= kept
        after_alone, added = int(alive.sum()), {}
        for link, attack in chain(model, eps, headline).items():
            before = int(alive.sum())
            alive = attacked_correct(model, images, labels, attack, batch_size=batch_size(model), where=alive)
            added[link] = before - int(alive.sum())
        row["by_eps"][str(eps)] = {
            "attacks": {key: float(kept.float().mean()) for key, kept in right.items()},
            "correct": {key: pack_correct(kept) for key, kept in right.items()},
            "right after step 1": after_alone, "added": added,
            "worst": float(alive.float().mean()), "worst_correct": pack_correct(alive)}
        alive_before = alive
        print(f"  {name} eps {eps}: {json.dumps(row['by_eps'][str(eps)]['attacks'])} after step 1 "
              f"{after_alone}, chain {json.dumps(added)} -> worst {int(alive.sum())} "
              f"({time.perf_counter() - start:.0f} s)", flush=True)
    row["checks"] = sanity_checks(model, images, labels, clean, alive_before)
    row["seconds"] = round(time.perf_counter() - start, 1)
    return row


def run(images: int, dataset: str) -> dict:
    r"""The study's rows for ``dataset``."""
    setting = DATASETS[dataset]
    load = capsedu.load_mnist if dataset == "mnist" else capsedu.load_fashion_mnist
    test = load("test", download=False, verbose=False)
    x, y = test.images[:images], test.labels[:images]
    models = {name: capsedu.pretrained(name) for name in setting.networks}
    crafted_by = {eps: {} for eps in setting.eps}  # eps -> source -> its PGD images
    for source in setting.sources:
        network, logits = next(iter(views(models[source]).values()))
        for eps in setting.eps:
            crafted_by[eps][source] = crafted(pgd(network, eps, steps=PGD_STEPS, logits=logits), x, y, 250)
    rows = {}
    for name, model in models.items():
        rows[name] = row_for(name, model, setting, crafted_by, x, y)
        print(dataset, name, f"{rows[name]['seconds']} s", json.dumps(rows[name]["checks"]), flush=True)
    return {"test_data": test.source, "eps": list(setting.eps), "headline": setting.headline,
            "sources": list(setting.sources), "networks": rows}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--images", type=int, default=1000, help="test images (the same for every network)")
    parser.add_argument("--datasets", nargs="+", choices=list(DATASETS), default=list(DATASETS))
    parser.add_argument("--out", type=Path, default=STUDIES_DIR / "adaptive.json")
    args = parser.parse_args(argv)
    args.out = outside_installed_packages(args.out, "--out")  # before any work
    torch.set_num_threads(2)
    load_before, start = os.getloadavg(), time.perf_counter()
    settings = {"library": TORCHATTACKS, "pgd_steps": PGD_STEPS, "apgd_steps": APGD_STEPS,
                "long": {loss: list(steps) for loss, steps in LONG.items()}, "square_queries": SQUARE_QUERIES,
                "unbounded": [UNBOUNDED_EPS, UNBOUNDED_STEPS], "sanity_images": SANITY_IMAGES, "seed": 0}
    result = kept_datasets(args.out, settings, args.datasets)
    for dataset in args.datasets:  # written after each dataset: a long run keeps what it finished
        result[dataset] = {**run(args.images, dataset), **machine_record(start, load_before)}
        write_study(result, args.out, seconds=result[dataset]["seconds"])
    return result


def kept_datasets(out: Path, settings: dict, datasets: list[str]) -> dict:
    r"""The study to write: the datasets ``out`` already records that this run does not measure, if
    it used the same ``settings`` (one dataset at a time fits a working session), else none."""
    recorded = json.loads(out.read_text()) if out.is_file() else {}
    if recorded.get("attacks") != settings:
        recorded = {}
    return {"attacks": settings, **{name: row for name, row in recorded.items()
                                    if name in DATASETS and name not in datasets}}


if __name__ == "__main__":
    main()

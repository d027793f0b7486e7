r"""Do deeper capsule stacks learn a parse tree? CapsNets with one, two and three routed layers, trained briefly.

    CAPSEDU_DATA=/path/to/data .venv/bin/python -m benchmarks.deep_capsules
    .venv/bin/python -m benchmarks.deep_capsules --images 500 --epochs 1 --seeds 0 --out /tmp/d.json

Mitterreiter et al. (2023, *Why Capsule Neural Networks Do Not Scale*) argue that stacking routed
capsule layers starves the lower ones of gradient and that no parse tree (each part coupled to
one whole) appears. This script trains :class:`capsedu.nets.deep_capsnet.DeepCapsNet` - the
CPU CapsNet's convolution and primary capsules, then 0, 1 or 2 hidden routed layers of 32
capsules of 12 dimensions, then the class capsules; margin loss, no decoder - on the first
``--images`` images of the train split, for each seed, from two starts - DigitCaps's
default (every routed layer's W normal with standard deviation 0.01) and one calibrated so that every layer's capsules start
half long (:func:`calibrate`: without it the squash, about ``|s| s`` near zero, shrinks the
capsules layer after layer) - and records: the validation accuracy
after each epoch (5,000 images), the gradient norm of each routed layer's W and of conv1 on one
fixed batch before training and after each epoch, and, on 1,000 validation images after
training, each routed layer's coupling spread and normalised coupling entropy
(:mod:`capsedu.explore.critique`) and each capsule level's dead and always-on shares. The
result is the study JSON that lesson 13 prints (``capsedu/zoo/studies/deep_capsules.json``).

Shape legend:
    B      batch size
    J      output (upper) capsules: the classes in the last layer
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import time
from pathlib import Path

import torch

import capsedu
from benchmarks.measure import machine_record, write_study
from capsedu.data.splits import load_split
from capsedu.explore.critique import capsule_activity, coupling_entropy, coupling_spread
from capsedu.nets.capsnet import CapsNetConfig
from capsedu.nets.deep_capsnet import DeepCapsConfig, DeepCapsNet
from capsedu.zoo.shipped import STUDIES_DIR
from coursetools.out_paths import outside_installed_packages

HIDDEN = {1: (), 2: ((32, 12),), 3: ((32, 12), (32, 12))}  # routed layers -> hidden (capsules, dim)
INITS = ("default", "calibrated")


@torch.no_grad()
def calibrate(model: DeepCapsNet, images: torch.Tensor) -> None:
    r"""Scale each routed layer's W, bottom up, so that its mean \|s_j\| on ``images`` is 1 (each
    capsule half long, the squash's midpoint) instead of DigitCaps's default start (standard deviation 0.01)."""
    for k, layer in enumerate(model.routed):
        for _ in range(3):  # the couplings move a little with the scale: a few passes settle it
            lengths = model(images)[0][k + 1].norm(dim=-1)  # (B, J_k): |v| = |s|^2 / (1 + |s|^2)
            s_norm = (lengths / (1 - lengths).clamp_min(1e-6)).sqrt().mean()
            layer.W.mul_(1 / s_norm.clamp_min(1e-12))


def gradient_norms(model: DeepCapsNet, images: torch.Tensor, labels: torch.Tensor) -> dict[str, float]:
    r"""The gradient norm of conv1's weight and of each routed layer's W on one batch."""
    model.zero_grad()
    model.loss(images, labels).value.backward()
    norms = {"conv1": float(model.conv1.weight.grad.norm())}
    norms.update({f"routed{k + 1}": float(layer.W.grad.norm()) for k, layer in enumerate(model.routed)})
    model.zero_grad()
    return norms


@torch.no_grad()
def structure(model: DeepCapsNet, images: torch.Tensor) -> dict:
    r"""Each routed layer's coupling statistics and each capsule level's activity, in eval mode."""
    with capsedu.eval_mode(model):
        capsules, couplings = model(images)
    layers = [{"spread": float(coupling_spread(c)), "entropy": float(coupling_entropy(c)),
               "mean_max_coupling": float(c.max(dim=-1).values.mean()), "uniform": 1 / c.shape[-1]}
              for c in couplings]
    levels = []
    for u in capsules:
        activity = capsule_activity(u.norm(dim=-1))
        levels.append({"capsules": u.shape[1], "dead": activity.dead, "always_on": activity.always_on})
    return {"routing": layers, "capsule_levels": levels}


def train_one(depth: int, init: str, seed: int, train: capsedu.MNISTData, validation: capsedu.MNISTData,
              epochs: int) -> dict:
    capsedu.set_seed(seed)
    config = DeepCapsConfig(**dataclasses.asdict(CapsNetConfig.cpu()), hidden_caps=HIDDEN[depth])
    model = DeepCapsNet(config)
    probe = train.images[:128], train.labels[:128]
    if init == "calibrated":
        calibrate(model, probe[0])
    norms = [gradient_norms(model, *probe)]
    start = time.perf_counter()
    history = capsedu.fit(model, capsedu.batch_loader(train, 32, torch.Generator().manual_seed(seed)),
                          epochs=epochs, lr=1e-3, lr_schedule="onecycle", progress=False,
                          val_loader=capsedu.batch_loader(validation, 500),
                          on_epoch_end=lambda epoch, history: norms.append(gradient_norms(model, *probe)))
    return {"routed_layers": depth, "init": init, "seed": seed, "parameters": sum(p.numel() for p in model.parameters()),
            "validation_accuracy": history["val_accuracy"], "train_seconds": round(time.perf_counter() - start, 1),
            "gradient_norms": norms, **structure(model, validation.images[:1000])}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--images", type=int, default=6_000, help="training images (the train split's first)")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--out", type=Path, default=STUDIES_DIR / "deep_capsules.json")
    args = parser.parse_args(argv)
    args.out = outside_installed_packages(args.out, "--out")  # before any work
    torch.set_num_threads(2)
    train = load_split("train", download=False, verbose=False)
    train = capsedu.MNISTData(train.images[:args.images], train.labels[:args.images],
                              f"{train.source}, its first {args.images:,}")
    validation = load_split("validation", download=False, verbose=False)
    load_before, start = os.getloadavg(), time.perf_counter()
    runs = []
    for seed in args.seeds:
        for init in INITS:
            for depth in HIDDEN:
                runs.append(train_one(depth, init, seed, train, validation, args.epochs))
                print(json.dumps({k: runs[-1][k] for k in ("routed_layers", "init", "seed",
                                                           "validation_accuracy", "train_seconds")}), flush=True)
    result = {"hidden_caps": {str(k): v for k, v in HIDDEN.items()}, "inits": {
                  "default": "every W drawn from a normal distribution of standard deviation 0.01 (DigitCaps's start)",
                  "calibrated": "each routed layer's W then scaled, bottom up, to a mean |s_j| of 1 on the probe batch"},
              "train_data": train.source,
              "validation_data": validation.source, "epochs": args.epochs, "runs": runs,
              **machine_record(start, load_before)}
    write_study(result, args.out)
    return result


if __name__ == "__main__":
    main()

r"""capsedu - the helper package of the Capsule Networks course.

Every piece a lesson builds is implemented here once, tested, and imported by later lessons.
The package reads as the course's architecture, each layer importing only from those before it:

* :mod:`capsedu.data` - MNIST with and without a network, transformed digits, MultiMNIST;
* :mod:`capsedu.nets` - the networks and their pieces (squash, primary capsules, routing,
  losses, the CapsNet, the contract every network keeps and the registry of network kinds);
* :mod:`capsedu.training` - objectives, the training loop, prediction, checkpoints, seeding,
  run profiles and the machine;
* :mod:`capsedu.zoo` - the shipped trained networks and the recipes that trained them;
* :mod:`capsedu.explore` - probes, figures and widgets for looking inside trained networks;
* :mod:`capsedu.course` - the exercise checks the lessons call.

The names below are the public API (``from capsedu import squash, CapsNet, fit, ...``).
Importing ``capsedu`` imports none of them (PEP 562): each is loaded from its module the first
time it is used, so ``import capsedu`` is cheap and a lesson depends only on what it uses.

Shape legend: none (no tensor shapes of its own).
"""

from __future__ import annotations

import importlib
from typing import Any

_MODULES = {  # where each public name lives
    "capsedu._version": ("__version__",),
    "capsedu.data.files": ("DataFileError",),
    "capsedu.data.mnist": ("MNISTData", "batch_loader", "learner_subset", "load_mnist",
                           "load_offline", "random_shift"),
    "capsedu.data.fashion_mnist": ("load_fashion_mnist",),
    "capsedu.data.multimnist": ("FreshPairs", "MultiMNIST", "PairTargets"),
    "capsedu.nets.squash": ("squash",),
    "capsedu.nets.primary": ("PrimaryCaps",),
    "capsedu.nets.routing": ("DigitCaps", "dynamic_routing"),
    "capsedu.nets.losses": ("margin_loss", "reconstruction_loss"),
    "capsedu.nets.capsnet": ("CapsNet", "CapsNetConfig", "CapsNetOutput", "capsnet_loss", "mask_capsules"),
    "capsedu.nets.cnn": ("BaselineCNN", "CNNConfig"),
    "capsedu.nets.contract": ("Loss", "NetworkConfig"),
    "capsedu.nets.registry": ("register_network",),
    "capsedu.training.objectives": ("Objective", "MarginObjective", "TwoDigitObjective",
                                    "CrossEntropyObjective", "MultiLabelObjective", "SpreadObjective"),
    "capsedu.training.loop": ("evaluate", "fit"),
    "capsedu.training.prediction": ("predict", "pair_accuracy"),
    "capsedu.training.uncertainty": ("standard_error", "with_error", "compare_accuracies"),
    "capsedu.training.paired": ("compare_paired", "PairedComparison", "shared_source_se",
                                "pack_correct", "unpack_correct"),
    "capsedu.training.step": ("train_step",),
    "capsedu.training.checkpoint": ("CheckpointError", "load_checkpoint", "save_checkpoint"),
    "capsedu.training.seeding": ("set_seed", "deterministic_algorithms"),
    "capsedu.training.modes": ("eval_mode",),
    "capsedu.training.profile": ("choose", "fast_profile"),
    "capsedu.training.hardware": ("default_device",),
    "capsedu.zoo.shipped": ("pretrained", "pretrained_metrics", "shipped_summary", "correct_on_test"),
}
_PUBLIC = {name: module for module, names in _MODULES.items() for name in names}
_SUBPACKAGES = ("data", "nets", "training", "zoo", "explore", "course")

__all__ = sorted(name for name in _PUBLIC if not name.startswith("_"))


def __getattr__(name: str) -> Any:
    r"""Load a public name from its module on first use (and keep it: later uses are plain lookups)."""
    if name in _PUBLIC:
        value = getattr(importlib.import_module(_PUBLIC[name]), name)
    elif name in _SUBPACKAGES:
        value = importlib.import_module(f"{__name__}.{name}")
    else:
        raise AttributeError(f"module 'capsedu' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_PUBLIC, *_SUBPACKAGES})

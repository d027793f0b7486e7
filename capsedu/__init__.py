r"""capsedu - the helper package of the Capsule Networks course.

Every piece a lesson builds is implemented here once, tested, and imported by later lessons.
The package reads as the course's architecture:

* :mod:`capsedu.nets` - the networks and their pieces (squash, primary capsules, routing,
  losses, the CapsNet, the registry of network kinds);
* :mod:`capsedu.data` - MNIST with and without a network, transformed digits, MultiMNIST;
* :mod:`capsedu.training` - the training loop, checkpoints, seeding and run profiles;
* :mod:`capsedu.zoo` - the shipped trained networks and the recipes that trained them;
* :mod:`capsedu.explore` - probes, figures and widgets for looking inside trained networks;
* :mod:`capsedu.course` - the course's tooling: exercise checks, handouts, lesson execution.

The names below are the public API (``from capsedu import squash, CapsNet, fit, ...``).
"""

from capsedu.data.mnist import (
    DataFileError,
    MNISTData,
    batch_loader,
    learner_subset,
    load_mnist,
    load_offline,
    random_shift,
)
from capsedu.data.multimnist import FreshPairs, MultiMNIST, PairTargets
from capsedu.nets.capsnet import CapsNet, CapsNetConfig, CapsNetOutput, capsnet_loss, mask_capsules
from capsedu.nets.cnn import BaselineCNN, CNNConfig
from capsedu.nets.losses import margin_loss, reconstruction_loss
from capsedu.nets.multi_digit import pair_accuracy
from capsedu.nets.primary import PrimaryCaps
from capsedu.nets.registry import Loss, NetworkConfig, register_network
from capsedu.nets.routing import DigitCaps, dynamic_routing
from capsedu.nets.squash import squash
from capsedu.training.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from capsedu.training.loop import evaluate, fit, predict
from capsedu.training.runtime import (
    choose,
    default_device,
    deterministic_algorithms,
    eval_mode,
    fast_profile,
    set_seed,
)
from capsedu.zoo.shipped import pretrained, pretrained_metrics

__version__ = "0.2.0"

__all__ = [
    "BaselineCNN", "CNNConfig", "CapsNet", "CapsNetConfig", "CapsNetOutput", "CheckpointError", "DataFileError", "DigitCaps",
    "FreshPairs", "Loss", "MNISTData", "MultiMNIST", "NetworkConfig", "PairTargets", "PrimaryCaps", "batch_loader", "capsnet_loss", "choose",
    "default_device", "deterministic_algorithms", "dynamic_routing",
    "eval_mode", "evaluate", "fast_profile", "fit", "learner_subset", "load_checkpoint",
    "load_mnist", "load_offline", "margin_loss", "mask_capsules", "pair_accuracy", "predict", "pretrained",
    "pretrained_metrics", "random_shift", "reconstruction_loss", "register_network",
    "save_checkpoint", "set_seed", "squash",
]

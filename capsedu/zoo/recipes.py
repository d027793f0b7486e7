r"""The shipped networks' recipes: what each is and how it is trained (:class:`Recipe`, :data:`RECIPES`).

:func:`capsedu.zoo.train.train_recipe` trains a recipe (``python -m coursetools.train_zoo NAME``
ships it); a recipe is plain data - the network's kind and config as a dict, the objective it is trained for as a dict
(:mod:`capsedu.training.objectives`), the training data, the optimiser's schedule and the
augmentation - so that it is stored beside the weights (``NAME.json``) and compared with them
by the tests. Every MultiMNIST recipe is measured on the course's fixed test pairs,
:data:`capsedu.data.multimnist.MULTIMNIST_TEST`. How each recipe was chosen - the runs tried, their
measured accuracies and times, the machines - is recorded in ``benchmarks/README.md`` and
``benchmarks/tries.json``, not here.

Shape legend: none (no tensor shapes of its own).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from capsedu.nets.capsnet import CapsNetConfig
from capsedu.nets.cnn import CNNConfig
from capsedu.nets.efficient_capsnet import EfficientCapsConfig
from capsedu.nets.matrix_capsnet import MatrixCapsConfig
from capsedu.training.objectives import (
    CrossEntropyObjective,
    MarginObjective,
    MultiLabelObjective,
    SpreadObjective,
    TwoDigitObjective,
)


@dataclass(frozen=True)
class Recipe:
    r"""How a shipped network is trained. ``config`` is the network config and ``objective`` the
    training objective (:func:`capsedu.training.objectives.objective_from_dict`), as plain dicts."""

    kind: str
    # "mnist", or "fashion": Fashion-MNIST (capsedu.data.fashion_mnist), split the same way
    dataset: str = "mnist"
    config: dict[str, Any] = field(default_factory=dict)
    objective: dict[str, Any] = field(default_factory=dict)
    train_data: str = "train"  # capsedu.data.splits: the 55,000 official training images without the offline subset
    epochs: int = 30
    batch_size: int = 32
    lr: float = 2e-3
    lr_schedule: str = "onecycle"
    max_shift: int = 2
    # 40: every digit padded to a black 40x40 canvas before the shift (with max_shift 6 it lands
    # anywhere on it: the paper's "padded and translated MNIST", Section 5.2); validated and
    # tested on digits placed the same way (capsedu.data.transforms.on_canvas), and after every
    # epoch also on affNIST-like validation digits (affnist_like_40)
    canvas: int = 28
    # each training digit also rotated within +-max_angle degrees and scaled within 1 +- max_scale
    # about its centre (capsedu.data.augment.random_warp), before the shift; 0: neither
    max_angle: float = 0.0
    max_scale: float = 0.0
    # each training image mirrored left-right with probability 1/2 (capsedu.data.augment.random_flip),
    # before the warp and the shift: for clothes, not for digits
    flip: bool = False
    seed: int = 0
    precision: str = "float32"  # or "bfloat16" (capsedu.fit: mixed precision where the CPU has it)
    # MultiMNIST (lesson 09): empty for single digits; otherwise the options of
    # capsedu.data.multimnist.FreshPairs (pairs_per_epoch, max_shift, canvas, merge) - the digits
    # come from train_data, the test pairs from the test split (MULTIMNIST_TEST)
    pairs: dict[str, Any] = field(default_factory=dict)


MULTIMNIST_PAIRS = {"pairs_per_epoch": 60_000, "max_shift": 4, "canvas": 36, "merge": "clip"}
RECIPES: dict[str, Recipe] = {
    # Every recipe trains on the 55,000-image train split; the epochs are a time budget, not a
    # choice on validation (benchmarks/README.md, "The shipped networks on 55,000 digits").
    # lessons 03-07: the CPU CapsNet
    "capsnet": Recipe(kind="capsnet", config=CapsNetConfig.cpu().to_dict(),
                      objective=MarginObjective().to_dict(), epochs=15),
    # lesson 08's baseline: the same data, augmentation, epochs and optimiser as the CapsNet
    "cnn": Recipe(kind="cnn", config=CNNConfig.cpu().to_dict(), objective=CrossEntropyObjective().to_dict(),
                  epochs=15),
    # lesson 09: two overlapping digits on a 36 x 36 canvas, 60,000 fresh pairs every epoch,
    # 4 primary capsule types, trained in bfloat16
    "multimnist": Recipe(kind="capsnet", config=dataclasses.replace(CapsNetConfig.cpu(), image_size=36,
                                                                    primary_types=4).to_dict(),
                         objective=TwoDigitObjective().to_dict(),
                         epochs=150, batch_size=64, lr=3e-3, max_shift=0, pairs=MULTIMNIST_PAIRS,
                         precision="bfloat16"),
    # lesson 09's baseline: the CNN with a sigmoid per class, on the same pairs
    "multimnist_cnn": Recipe(kind="cnn", config=CNNConfig.cpu(image_size=36, multi_label=True).to_dict(),
                             objective=MultiLabelObjective().to_dict(),
                             epochs=32, max_shift=0, pairs=MULTIMNIST_PAIRS),
    # lesson 11: matrix capsules with EM routing (64/8/16/16, 2 iterations), the spread loss's
    # margin ramped over the first two epochs as the paper ramps it (SpreadObjective.ramp_epochs)
    "em": Recipe(kind="em", config=MatrixCapsConfig(beta_a_logit_units=True).to_dict(),
                 objective=SpreadObjective(ramp_epochs=2).to_dict(), epochs=10, batch_size=16, lr=2e-3),
    # lesson 08's robustness protocol (Sabour et al. 2017, Section 5.2): the CapsNet and the CNN
    # trained on digits placed anywhere on a black 40 x 40 canvas (benchmarks/affnist_study.py)
    "capsnet40": Recipe(kind="capsnet", config=dataclasses.replace(CapsNetConfig.cpu(), image_size=40).to_dict(),
                        objective=MarginObjective().to_dict(), epochs=16, max_shift=6, canvas=40),
    "cnn40": Recipe(kind="cnn", config=CNNConfig.cpu(image_size=40).to_dict(),
                    objective=CrossEntropyObjective().to_dict(), epochs=16, max_shift=6, canvas=40),
    # lesson 13: the paper's CapsNet with half its primary capsule types (conv1 256, 16 types) on
    # Fashion-MNIST, batch 128
    "fashion_capsnet": Recipe(kind="capsnet", dataset="fashion",
                              config=CapsNetConfig(conv1_channels=256, primary_types=16).to_dict(),
                              objective=MarginObjective().to_dict(), epochs=70, batch_size=128),
    # lesson 13: MNIST's CNN given the Fashion-MNIST CapsNet's epochs and batch, to compare the two
    "fashion_cnn": Recipe(kind="cnn", dataset="fashion", config=CNNConfig.cpu().to_dict(),
                          objective=CrossEntropyObjective().to_dict(), epochs=70, batch_size=128),
    # lesson 13: Efficient-CapsNet on Fashion-MNIST, its MNIST recipe with 12 epochs
    "fashion_efficient": Recipe(kind="efficient", dataset="fashion", config=EfficientCapsConfig().to_dict(),
                                objective=MarginObjective().to_dict(), epochs=12, lr=3e-3),
    # lesson 12: Efficient-CapsNet, the paper's MNIST network (161,824 parameters + decoder)
    "efficient": Recipe(kind="efficient", config=EfficientCapsConfig().to_dict(),
                        objective=MarginObjective().to_dict(), epochs=4, lr=3e-3),
}

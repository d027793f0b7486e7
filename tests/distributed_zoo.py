"""The zoo trainer on a tiny recipe and random digits, run under torchrun by test_distributed.py.

``python -m torch.distributed.run --nproc_per_node 2 --standalone tests/distributed_zoo.py
--out-dir DIR``: ``python -m coursetools.train_zoo tiny --storage float32 --out-dir DIR``, with the
recipe ``tiny`` added to the recipes and its three splits made of random images (the real
recipes need the complete MNIST). Each call of ``save_checkpoint`` is logged with its rank in
``DIR/../writers.txt``. Also imported by the test, for the same recipe and data.

Shape legend:
    N      number of images
"""

import os
import sys
from pathlib import Path

import torch

from capsedu.data.mnist import MNISTData
from capsedu.nets.capsnet import CapsNetConfig
from capsedu.training.objectives import MarginObjective
from capsedu.zoo.recipes import RECIPES, Recipe
from coursetools import train_zoo

TINY_CONFIG = CapsNetConfig(conv1_channels=4, primary_types=2, primary_dim=4, digit_dim=4,
                            decoder_hidden=(8,))
# 20 images in batches of 8: steps of 8, 8 and a short 4 an epoch; shifted, like the real recipes
TINY = Recipe(kind="capsnet", config=TINY_CONFIG.to_dict(), objective=MarginObjective().to_dict(),
              epochs=2, batch_size=8, lr=3e-3, max_shift=2, seed=5)


def tiny_data(recipe: Recipe | None = None, data_root: object = None) -> dict[str, MNISTData]:
    """Random train (20), validation (8) and test (8) digits: ``recipe_data``'s three splits."""
    generator = torch.Generator().manual_seed(0)

    def split(name: str, size: int) -> MNISTData:
        images = torch.rand(size, 1, 28, 28, generator=generator)  # (N, 1, 28, 28)
        labels = torch.randint(0, 10, (size,), generator=generator)  # (N,)
        return MNISTData(images, labels, f"random {name}")
    return {"train": split("train", 20), "validation": split("validation", 8),
            "test": split("test", 8)}


def main(argv: list[str]) -> None:
    out_dir = Path(argv[argv.index("--out-dir") + 1])
    saving = train_zoo.save_checkpoint

    def logged_save(*args, **kwargs):
        with open(out_dir.parent / "writers.txt", "a") as log:
            log.write(f"rank {os.environ.get('RANK')}\n")
        return saving(*args, **kwargs)

    RECIPES["tiny"] = TINY
    train_zoo.recipe_data = tiny_data
    train_zoo.save_checkpoint = logged_save
    train_zoo.main(["tiny", "--storage", "float32", "--tries", str(out_dir / "no-tries.json"), *argv])


if __name__ == "__main__":
    main(sys.argv[1:])

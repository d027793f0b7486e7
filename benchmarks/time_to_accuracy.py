r"""Time to 98.0 % and 98.5 % test accuracy of the CPU profile, trained on the offline subset.

Trains ``CapsNetConfig.cpu()`` with the CPU profile's recipe (:class:`capsedu.pretrain.Recipe`:
one-cycle Adam, 2-pixel random shifts) on the 5,000 offline MNIST training images, tests it on
the official 10,000-image test split after every epoch, and prints the training time (wall and
process CPU time, evaluation excluded) at which each target was first reached. The load average
is printed next to every figure: on a shared machine wall times are inflated by the other
processes, CPU time much less so.

Usage (from the repository root, with the official MNIST files under ``$CAPSEDU_DATA``)::

    CAPSEDU_DATA=/path/to/data python benchmarks/time_to_accuracy.py

It also writes the trained checkpoint and its metrics JSON (``--out``, a temporary folder by
default), so a run can be shipped with ``--out capsedu/weights/capsnet_cpu.pt``.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

import torch
from capsedu.pretrain import Recipe, pretrain

from capsedu.data.mnist import data_root
from capsedu.nets.capsnet import CapsNetConfig

TARGETS = (0.98, 0.985)


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    defaults = Recipe()
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--epochs", type=int, default=defaults.epochs)
    parser.add_argument("--batch-size", type=int, default=defaults.batch_size)
    parser.add_argument("--lr", type=float, default=defaults.lr, help="peak learning rate")
    parser.add_argument("--max-shift", type=int, default=defaults.max_shift)
    parser.add_argument("--seed", type=int, default=defaults.seed)
    parser.add_argument("--test-from-epoch", type=int, default=1,
                        help="first epoch after which the test split is evaluated (default 1)")
    parser.add_argument("--data-root", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=None,
                        help="where to write the checkpoint (default: a temporary folder)")
    parser.add_argument("--threads", type=int, default=2, help="torch intra-op threads")
    return parser.parse_args(argv)


def summary_lines(metrics: dict) -> list[str]:
    r"""The result block: time to each target, final accuracy, throughput and load."""
    load = metrics["load_average_1min_during_training"]
    lines = [f"config: {CapsNetConfig.from_dict(metrics['config'])}",
             f"recipe: {metrics['recipe']}",
             (f"training throughput {metrics['train_images_per_second']} images/s wall; "
              f"load average during training {load['mean']} (min {load['min']}, "
              f"max {load['max']}) on {metrics['cpu_count']} CPUs")]
    for target in TARGETS:
        reached = metrics[f"time_to_{target * 100:.1f}"]
        lines.append(f"time to {target:.1%}: " + ("not reached" if reached is None else
                     f"{reached['train_wall_seconds']:.0f} s wall / {reached['train_cpu_seconds']:.0f}"
                     f" s CPU of training (epoch {reached['epoch']})"))
    lines.append(f"final test accuracy {metrics['test_accuracy']:.2%} (as shipped, "
                 f"{'float16' if metrics['half_precision'] else 'float32'}), "
                 f"{metrics['train_wall_seconds']:.0f} s wall / {metrics['train_cpu_seconds']:.0f} s "
                 f"CPU of training in all")
    return lines


def main(argv: list[str] | None = None) -> dict:
    args = parse(argv)
    torch.set_num_threads(args.threads)
    recipe = Recipe(epochs=args.epochs, batch_size=args.batch_size, lr=args.lr,
                    max_shift=args.max_shift, seed=args.seed)
    out = args.out or Path(tempfile.mkdtemp(prefix="capsedu-tta-")) / "capsnet_cpu.pt"
    print(f"data root {data_root(args.data_root)}; load average now {os.getloadavg()[0]:.1f}")
    metrics = pretrain(recipe, out, data_root=args.data_root, test_from_epoch=args.test_from_epoch,
                       progress=False, report=lambda line: print(line, flush=True))
    print("\n".join(summary_lines(metrics)))
    print(f"checkpoint {out} ({metrics['size_bytes'] / 1e6:.1f} MB), metrics {out.with_suffix('.json')}")
    return metrics


if __name__ == "__main__":
    main()

r"""Lesson 12's closing table: every routing method on the same bench.

    CAPSEDU_DATA=/path/to/data .venv/bin/python -m benchmarks.compare_networks
    .venv/bin/python -m benchmarks.compare_networks --images 500 --out /tmp/c.json --no-readme

For the shipped dynamic-routing CapsNet, the EM-routing network, Efficient-CapsNet and the CNN
baseline, all in this one run: parameters (all, and without the reconstruction decoder, which
only training uses); accuracy on the official test split, on lesson 08's affNIST-like version of
it and on it rotated by +45 and -45 degrees (averaged); the shipped recipe's training time, read
from each network's JSON with the load it was measured under; inference images/second at batch
128 (eval mode, no gradients, 2 threads); and the peak memory of training at the recipe's batch
size, measured in a fresh process: how far the resident set grew above the imports while the
network was built and trained for two steps with Adam (weights, gradients, Adam's two moments,
activations), glibc told to return freed memory at once so that the peak is what training needs.

Writes ``capsedu/zoo/studies/comparison.json`` (lesson 12 prints it) and rewrites the table
between the ``comparison`` markers of benchmarks/README.md.

Shape legend: none (no tensor shapes of its own).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import torch

import capsedu
from benchmarks.measure import correct, status_kib
from capsedu.data.transforms import affnist_like, transform_images
from capsedu.nets.registry import build_network
from capsedu.training.hardware import reuse_large_allocations
from capsedu.training.objectives import objective_from_dict
from capsedu.training.paired import pack_correct
from capsedu.zoo.recipes import RECIPES
from capsedu.zoo.shipped import STUDIES_DIR
from coursetools.out_paths import outside_installed_packages

NETWORKS = {"capsnet": "CapsNet, dynamic routing (2017)", "em": "Matrix capsules, EM routing (2018)",
            "efficient": "Efficient-CapsNet, self-attention (2021)", "cnn": "Baseline CNN"}
PUBLISHED = {  # MNIST test accuracy in the papers, trained on all 60,000 digits
    "capsnet": "99.75 % (Sabour et al. 2017; 8.2 M parameters); affNIST 79 %",
    "em": "99.56 % (0.44 % error, Hinton et al. 2018, as tabulated by Mazzia et al. 2021, Table 2; 310 k parameters)",
    "efficient": "99.84 % (Mazzia et al. 2021; 161,824 parameters)",
    "cnn": "99.61 % (Sabour et al.'s baseline, 35.4 M); affNIST 66 %",
}
README = Path(__file__).resolve().parent / "README.md"  # the engineering record
MARKERS = ("<!-- comparison:start -->", "<!-- comparison:end -->")


def accuracy(right: torch.Tensor) -> float:
    return float(right.float().mean())


def images_per_second(model: torch.nn.Module, images: torch.Tensor, seconds: float = 3.0) -> float:
    r"""Eval-mode forward passes at batch 128 (one warm-up batch), for at least ``seconds``."""
    batches = images[: 128 * (len(images) // 128)].split(128)
    with torch.no_grad():
        model.class_scores(batches[0])
        count, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds or count < 3:
            model.class_scores(batches[count % len(batches)])
            count += 1
    return 128 * count / (time.perf_counter() - start)


def memory_child(name: str) -> None:
    recipe = RECIPES[name]
    images = torch.rand(recipe.batch_size, 1, 28, 28)
    labels = torch.arange(recipe.batch_size) % 10
    Path("/proc/self/clear_refs").write_text("5")  # reset the peak to the current RSS
    base = status_kib("VmRSS")  # torch and capsedu imported, no network yet
    model, objective = build_network(recipe.kind, recipe.config).train(), objective_from_dict(recipe.objective)
    optimiser = torch.optim.Adam(model.parameters(), lr=recipe.lr)
    for _ in range(2):  # the second step has gradients and Adam's state from the first
        optimiser.zero_grad()
        objective(model, images, labels).value.backward()
        optimiser.step()
    print((status_kib("VmHWM") - base) / 1024)


def peak_training_mib(name: str) -> float:
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="65536", MALLOC_TRIM_THRESHOLD_="0")
    out = subprocess.run([sys.executable, "-m", __spec__.name, "--memory-child", name], env=env,
                         capture_output=True, text=True, check=True, cwd=Path(__file__).resolve().parents[1])
    return float(out.stdout.strip().splitlines()[-1])


def measure(name: str, test: capsedu.MNISTData, affine: capsedu.MNISTData,
            rotated: list[torch.Tensor]) -> dict:
    model = capsedu.pretrained(name)
    metrics = capsedu.pretrained_metrics(name)
    decoder = getattr(model, "decoder", None)
    right = {"clean": correct(model, test.images, test.labels),
             "affnist_like": correct(model, affine.images, affine.labels),
             "rotated_45": torch.cat([correct(model, r, test.labels) for r in rotated])}  # (2N,) +45° then -45°
    row = {
        "network": NETWORKS[name],
        "parameters": sum(p.numel() for p in model.parameters()),
        "parameters_without_decoder": sum(p.numel() for p in model.parameters())
        - (0 if decoder is None else sum(p.numel() for p in decoder.parameters())),
        "clean": accuracy(right["clean"]), "affnist_like": accuracy(right["affnist_like"]),
        "rotated_45": accuracy(right["rotated_45"]),
        "recorded_clean": metrics["test_accuracy"],
        "train_minutes": metrics["train_wall_seconds"] / 60, "train_epochs": metrics["epochs"],
        "train_load": [metrics["load_average_before"][0], metrics["load_average_after"][0]],
        "inference_images_per_second": images_per_second(model, test.images),
        "peak_training_mib": peak_training_mib(name), "batch_size": RECIPES[name].batch_size,
        "published": PUBLISHED[name],
        "train_images_seen": metrics["epochs"] * metrics["train_data"]["images"],
        "train_seconds_per_epoch": metrics["train_wall_seconds"] / metrics["epochs"],
        "correct": {key: pack_correct(r) for key, r in right.items()},
    }
    print(name, {k: v for k, v in row.items() if k not in ("network", "published", "correct")}, flush=True)
    return row


def markdown(result: dict) -> str:
    r"""The engineering record's table (benchmarks/README.md)."""
    lines = ["| network | parameters (without decoder) | clean | affNIST-like | rotated ±45° | "
             "training (load) | inference img/s, b128 | peak training memory | published (60,000 digits) |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for row in result["rows"].values():
        lines.append(
            f"| {row['network']} | {row['parameters']:,} ({row['parameters_without_decoder']:,}) | "
            f"{row['clean']:.2%} | {row['affnist_like']:.2%} | {row['rotated_45']:.2%} | "
            f"{row['train_minutes']:.1f} min, {row['train_epochs']} epoch{'s' * (row['train_epochs'] != 1)} "
            f"({row['train_load'][0]:.1f} → {row['train_load'][1]:.1f}) | "
            f"{row['inference_images_per_second']:,.0f} | {row['peak_training_mib']:,.0f} MiB "
            f"(batch {row['batch_size']}) | {row['published']} |")
    load = result["load_average"]
    lines.append(f"\nMeasured by `benchmarks/compare_networks.py` on {result['test_data']['images']:,} "
                 f"test images ({result['test_data']['source']}); load average {load[0][0]:.2f} "
                 f"before, {load[1][0]:.2f} after; {result['cpu_count']} cores, torch "
                 f"{result['torch_version']}, {result['threads']} threads.")
    return "\n".join(lines).replace("%", " %").replace("  %", " %")


def write_readme(table: str) -> None:
    text = README.read_text()
    start, end = text.index(MARKERS[0]) + len(MARKERS[0]), text.index(MARKERS[1])
    README.write_text(text[:start] + "\n" + table + "\n" + text[end:])


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--images", type=int, default=None, help="a class-balanced subset of the test split")
    parser.add_argument("--data-root", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=STUDIES_DIR / "comparison.json")
    parser.add_argument("--no-readme", action="store_true", help="do not rewrite the engineering record's table")
    parser.add_argument("--memory-child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.out = outside_installed_packages(args.out, "--out")  # before any work
    torch.set_num_threads(2)
    if args.memory_child:
        memory_child(args.memory_child)
        return {}
    reuse_large_allocations()  # as the train command does for EM routing
    load_before = os.getloadavg()
    test = capsedu.load_mnist("test", args.data_root, download=False)
    if args.images:
        test = test.subset(args.images, seed=0)
    affine = affnist_like(test, seed=0)
    rotated = [transform_images(test.images, angle=angle) for angle in (45.0, -45.0)]
    rows = {name: measure(name, test, affine, rotated) for name in NETWORKS}
    result = {"rows": rows, "test_data": {"images": len(test), "source": test.source},
              "load_average": [load_before, os.getloadavg()], "cpu_count": os.cpu_count(),
              "threads": torch.get_num_threads(), "torch_version": torch.__version__}
    table = markdown(result)
    print(table)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    if not args.no_readme:
        write_readme(table)
    return result


if __name__ == "__main__":
    main()

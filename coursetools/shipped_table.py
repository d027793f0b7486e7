r"""The README's table of shipped networks, written from their ``NAME.json`` records.

    python -m coursetools.shipped_table            # rewrite the table in README.md
    python -m coursetools.shipped_table --check    # exit 1 if README.md differs from the records

Every figure in the table is read from ``capsedu/zoo/weights/NAME.json`` (what
``python -m capsedu.zoo.train NAME`` measured), so the README cannot drift from the weights it
describes; ``tests/test_zoo.py`` checks that the table is what this module writes.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from capsedu.training.uncertainty import standard_error
from capsedu.zoo.recipes import RECIPES
from capsedu.zoo.shipped import WEIGHTS_DIR
from capsedu.zoo.train import recipe_network

README = Path(__file__).resolve().parents[1] / "README.md"
MARKERS = ("<!-- shipped:start -->", "<!-- shipped:end -->")
NETWORKS = {  # name: what it is, in the README's words
    "capsnet": "CapsNet, dynamic routing (Sabour et al. 2017), the CPU profile (`CapsNetConfig.cpu()`)",
    "cnn": "the baseline CNN trained by the same recipe (`CNNConfig`)",
    "efficient": "Efficient-CapsNet, self-attention routing (Mazzia et al. 2021)",
    "em": "matrix capsules with EM routing (Hinton et al. 2018), A, B, C, D = 64, 8, 16, 16",
    "multimnist": "CapsNet on two overlapping digits (36 × 36, the paper's §6)",
    "multimnist_cnn": "the CNN on the same pairs (one sigmoid per class)",
}


def records(weights: Path = WEIGHTS_DIR) -> dict[str, dict[str, Any]]:
    r"""Each shipped network's ``NAME.json``, in the README's order."""
    return {name: json.loads((weights / f"{name}.json").read_text()) for name in NETWORKS}


def with_error(accuracy: float | None, images: int) -> str:
    if accuracy is None:
        return "—"
    return f"{accuracy:.2%} ± {standard_error(accuracy, images):.2%}".replace("%", " %")


def row(name: str, record: dict[str, Any]) -> str:
    parameters = sum(p.numel() for p in recipe_network(RECIPES[name]).parameters())
    pairs = bool(record["recipe"].get("pairs"))
    unit = "pairs/s" if pairs else "img/s"
    train, validation = record["train_data"], record.get("validation_data", {})
    minutes = record["train_wall_seconds"] / 60
    load = f"{record['load_average_before'][0]:.1f} → {record['load_average_after'][0]:.1f}"
    return (f"| `{name}` | {NETWORKS[name]} | {parameters / 1e6:.2f} M | {train['images']:,} digits "
            f"({record['epochs']} epochs) | {with_error(validation.get('accuracy'), validation.get('images', 0))} | "
            f"{with_error(record['test_accuracy'], record['test_data']['images'])} | {minutes:.1f} min, "
            f"{record['train_images_per_second']:,.0f} {unit} (load {load}) |")


def table(weights: Path = WEIGHTS_DIR) -> str:
    r"""The markdown table (and its note) for the records in ``weights``."""
    lines = ["| name | network | parameters | trained on | validation | official test | training here |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    found = records(weights)
    lines += [row(name, record) for name, record in found.items()]
    cpus = sorted({record.get("cpu", "an unrecorded CPU") for record in found.values()})
    lines.append(f"\nAccuracies ± their binomial standard error (`capsedu.standard_error`); for the "
                 f"MultiMNIST networks, the share of the fixed test pairs with both digits right. "
                 f"Trained on {', '.join(cpus)}, 2 cores, each run alone; \"load\" is the 1-minute "
                 f"load average before and after.")
    return "\n".join(lines)


def replaced(text: str, new_table: str) -> str:
    start, end = text.index(MARKERS[0]) + len(MARKERS[0]), text.index(MARKERS[1])
    return text[:start] + "\n" + new_table + "\n" + text[end:]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m coursetools.shipped_table",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="only check README.md, change nothing")
    args = parser.parse_args(argv)
    text = README.read_text()
    new = replaced(text, table())
    if args.check:
        print("README.md's table is up to date" if new == text else "README.md's table is stale")
        return int(new != text)
    README.write_text(new)
    print(f"wrote the shipped networks' table into {README.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

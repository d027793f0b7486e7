r"""The measured tables of the README and the instructors' page, written from their records.

    python -m coursetools.readme_tables            # rewrite the tables
    python -m coursetools.readme_tables --check    # exit 1 if a table differs from its records

* book/networks.md, ``shipped`` markers: the shipped networks, from ``capsedu/zoo/weights/NAME.json``
  (what ``python -m coursetools.train_zoo NAME`` measured);
* README.md, ``lessons`` markers: the lesson table's time column, each lesson's stated time
  (:mod:`coursetools.syllabus`), and its last column (execution time and peak memory); and
  book/instructors.md, ``sizing`` markers: what each lesson cost, both from the execution that
  ``make execute`` recorded in each lesson's metadata;
* benchmarks/README.md, ``adaptive`` markers: lesson 13's adaptive attacks, from
  ``capsedu/zoo/studies/adaptive.json`` (``python -m benchmarks.adaptive_attacks``).

So no document drifts from what it describes; tests/test_zoo.py and tests/test_notebooks.py
check that the tables are what this module writes.

Shape legend: none (no tensor shapes of its own).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from capsedu.training.uncertainty import standard_error
from capsedu.zoo.recipes import RECIPES
from capsedu.zoo.shipped import WEIGHTS_DIR, study
from capsedu.zoo.train import recipe_network
from coursetools.syllabus import lesson_minutes

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
INSTRUCTORS = ROOT / "book" / "instructors.md"
NETWORKS_PAGE = ROOT / "book" / "networks.md"
BENCHMARKS = ROOT / "benchmarks" / "README.md"
LESSONS = ROOT / "notebooks"
NETWORKS = {  # name: what it is, in the README's words
    "capsnet": "CapsNet, dynamic routing (Sabour et al. 2017), the CPU profile (`CapsNetConfig.cpu()`)",
    "cnn": "the baseline CNN trained by the same recipe (`CNNConfig`)",
    "efficient": "Efficient-CapsNet, self-attention routing (Mazzia et al. 2021)",
    "em": "matrix capsules with EM routing (Hinton et al. 2018), A, B, C, D = 64, 8, 16, 16",
    "multimnist": "CapsNet on two overlapping digits (36 × 36, the paper's §6)",
    "multimnist_cnn": "the CNN on the same pairs (one sigmoid per class)",
    "capsnet40": "the CapsNet at 40 × 40 input, trained on digits placed anywhere on the canvas (the paper's §5.2)",
    "cnn40": "the CNN at 40 × 40 input, the same recipe",
    "fashion_capsnet": "the CapsNet on Fashion-MNIST (Xiao et al. 2017): the paper's with half its primary capsule types (conv1 256, 16 types), batch 128",
    "fashion_cnn": "the CNN on Fashion-MNIST, the same recipe (70 epochs at batch 128)",
    "fashion_efficient": "Efficient-CapsNet on Fashion-MNIST, its MNIST recipe",
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
    device = record.get("device", "cpu")
    where = (f"on {record.get('cpu_count', 2)} CPU cores ({record.get('cpu', 'an unrecorded CPU')})"
             if device == "cpu" else f"on an {device.split(': ', 1)[-1]}")
    what = "images" if record["recipe"].get("dataset") == "fashion" else "digits"
    return (f"| `{name}` | {NETWORKS[name]} | {parameters / 1e6:.2f} M | {train['images']:,} {what} "
            f"({record['epochs']} epoch{'s' * (record['epochs'] != 1)}) | {with_error(validation.get('accuracy'), validation.get('images', 0))} | "
            f"{with_error(record['test_accuracy'], record['test_data']['images'])} | {minutes:.1f} min, "
            f"{record['train_images_per_second']:,.0f} {unit} {where} |")


def table(weights: Path = WEIGHTS_DIR) -> str:
    r"""The markdown table (and its note) for the records in ``weights``."""
    lines = ["| name | network | parameters | trained on | validation | official test | what trained it |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    found = records(weights)
    lines += [row(name, record) for name, record in found.items()]
    notes = ""
    canvas = [f"`{name}`" for name, record in found.items() if record["recipe"].get("canvas", 28) != 28]
    if canvas:
        notes += (f" {' and '.join(canvas)}: validation and test digits placed on the 40 × 40 canvas as "
                  f"in training (the paper's expanded test set).")
    lines.append(f"\nAccuracies ± their binomial standard error (`capsedu.standard_error`); for the "
                 f"MultiMNIST networks, the share of the fixed test pairs with both digits right. The "
                 f"last column: the minutes training took, its speed and the machine (`python -m "
                 f"coursetools.train_zoo NAME`, the recipe in `capsedu/zoo/recipes.py`; on a GPU "
                 f"`--device cuda`, whose minutes do not compare with a CPU's); each network's record "
                 f"and what a GPU-trained one would take on a CPU are in the training record.{notes}")
    return "\n".join(lines)


def markers(name: str) -> tuple[str, str]:
    return f"<!-- {name}:start -->", f"<!-- {name}:end -->"


def replaced(text: str, name: str, new_table: str) -> str:
    r"""``text`` with what lies between the ``name`` markers replaced by ``new_table``."""
    start_marker, end_marker = markers(name)
    start, end = text.index(start_marker) + len(start_marker), text.index(end_marker)
    return text[:start] + "\n" + new_table + "\n" + text[end:]


def executions(lessons: Path = LESSONS) -> dict[str, dict[str, Any]]:
    r"""What ``make execute`` recorded for each lesson (``metadata.capsedu.execution``)."""
    found = {}
    for path in sorted(lessons.glob("[0-9][0-9]_*.ipynb")):
        execution = json.loads(path.read_text()).get("metadata", {}).get("capsedu", {}).get("execution")
        if not execution:
            raise ValueError(f"{path.name} has no recorded execution: run `make execute` first")
        found[path.stem] = execution
    return found


def lesson_table(current: str, lessons: Path = LESSONS) -> str:
    r"""The README's lesson table (``current``) with each lesson's stated time and, in its last
    column, the recorded execution."""
    recorded, minutes, rows = executions(lessons), lesson_minutes(lessons), []
    for line in current.strip().splitlines():
        lesson = line.split("|")[1].strip().strip("`")
        if lesson in recorded:
            run = recorded[lesson]
            cells = line.rstrip().rstrip("|").split("|")
            cells[-2] = f" {minutes[lesson[:2]]} min "
            cells[-1] = f" {run['seconds']:,.0f} s, {run['kernel_peak_rss_mib']:,} MiB "
            line = "|".join(cells) + "|"
        rows.append(line)
    return "\n".join(rows)


def sizing_table(lessons: Path = LESSONS) -> str:
    r"""The instructors' page's table: each lesson's wall time, CPU time, peak memory and load."""
    recorded = executions(lessons)
    first = next(iter(recorded.values()))
    lines = [f"Executed on {first['cpu']} ({first['cpu_count']} cores, torch {first['torch']}), one "
             f"lesson after the other:\n",
             "| lesson | wall time | kernel CPU time | kernel peak memory | load average (1 min) |",
             "| --- | --- | --- | --- | --- |"]
    lines += [f"| `{name}` | {run['seconds']:,.0f} s | {run['kernel_cpu_seconds']:,.0f} s | "
              f"{run['kernel_peak_rss_mib']:,} MiB | {run['load_average_before'][0]:.1f} → "
              f"{run['load_average_after'][0]:.1f} |" for name, run in recorded.items()]
    sizes = clone_megabytes()
    lines.append(f"\nA clone of the course holds {sizes['all']:.0f} MB of files: {sizes['weights']:.0f} MB of "
                 f"shipped weights, {sizes['lessons']:.0f} MB of executed lessons (the explorers' "
                 "precomputed frames included), the rest code, studies and pages.")
    return "\n".join(lines)


def clone_megabytes(root: Path = ROOT) -> dict[str, float]:
    r"""Megabytes (10^6 bytes) of the files git tracks: all, the shipped weights, the executed lessons."""
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=root, capture_output=True, check=True,
                             text=True).stdout.split("\0")
    sizes = {name: (root / name).stat().st_size for name in tracked if name and (root / name).is_file()}
    return {"all": sum(sizes.values()) / 1e6,
            "weights": sum(b for n, b in sizes.items() if n.startswith("capsedu/zoo/weights/")) / 1e6,
            "lessons": sum(b for n, b in sizes.items() if n.startswith("notebooks/") and n.endswith(".ipynb")) / 1e6}


def adaptive_table(record: dict[str, Any]) -> str:
    r"""Lesson 13's adaptive study: per network and eps, PGD alone through the network's own
    gradient, through the surrogate (CapsNets), and each image's worst case, with standard errors."""
    lines = []
    for dataset, title in (("mnist", "MNIST"), ("fashion", "Fashion-MNIST")):
        if dataset not in record:
            lines += [f"{title}: not recorded yet (`--datasets {dataset}`).", ""]
            continue
        rows = record[dataset]["networks"]
        images = next(iter(rows.values()))["images"]
        lines += [f"{title}, the first {images:,} test images, accuracy in %: PGD through the network's own gradient"
                  " (the surrogate's in brackets) / each image's worst case (± 1 standard error):\n",
                  "| network | clean | " + " | ".join(f"eps {e}" for e in record[dataset]["eps"]) + " |",
                  "| --- | --- | " + " | ".join("---" for _ in record[dataset]["eps"]) + " |"]
        for name, row in rows.items():
            cells = []
            for eps in record[dataset]["eps"]:
                cell = row["by_eps"][str(eps)]
                own = cell["attacks"][f"PGD {row['views'][0]}".strip()]
                surrogate = cell["attacks"].get("PGD surrogate")
                worst = cell["worst"]
                cells.append(f"{100 * own:.1f}" + ("" if surrogate is None else f" ({100 * surrogate:.1f})")
                             + f" / {100 * worst:.1f} ± {100 * standard_error(worst, images):.1f}")
            lines.append(f"| `{name}` | {100 * row['clean']:.1f} | " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines).rstrip()


def documents() -> dict[Path, str]:
    r"""Each document's text as this module writes it."""
    readme = README.read_text()
    start, end = (readme.index(m) for m in markers("lessons"))
    readme = replaced(readme, "lessons", lesson_table(readme[start + len(markers("lessons")[0]):end]))
    return {README: readme, NETWORKS_PAGE: replaced(NETWORKS_PAGE.read_text(), "shipped", table()),
            INSTRUCTORS: replaced(INSTRUCTORS.read_text(), "sizing", sizing_table()),
            BENCHMARKS: replaced(BENCHMARKS.read_text(), "adaptive", adaptive_table(study("adaptive")))}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m coursetools.readme_tables",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="only check the documents, change nothing")
    args = parser.parse_args(argv)
    stale = [path for path, text in documents().items() if path.read_text() != text]
    if args.check:
        print("stale: " + ", ".join(p.name for p in stale) if stale else "every table is up to date")
        return int(bool(stale))
    for path, text in documents().items():
        path.write_text(text)
    print(f"wrote the measured tables of {README.name}, {INSTRUCTORS.name} and {BENCHMARKS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

r"""The training record: how the shipped networks were trained, one page written from their records.

    python -m coursetools.training_record            # rewrite notebooks/training_record.md
    python -m coursetools.training_record --check    # exit 1 if the page differs from the records

The lessons say in one sentence how their networks were trained and link to this page
(``[the training record](training_record.md)``, beside them in ``notebooks/``, in the learner's
workspace and in the book). Everything on it comes from the records, formatted here:

* ``capsedu/zoo/weights/NAME.json``: each shipped network's recipe, splits, machine, training
  time, speed and load, validation accuracy after every epoch, test accuracy and standard error;
* ``benchmarks/tries.json``: the runs tried on validation before each recipe (each
  record's ``tries`` holds the same);
* ``capsedu/zoo/studies/seeds40/``: lesson 08's 40 x 40 networks trained again with another seed;
* ``capsedu/zoo/studies/capsnet_paper.json``: the paper-size CapsNet (recorded, not shipped);
* ``capsedu/zoo/studies/shipped_4000.json`` and the ``*_4000`` studies: the earlier networks that
  learned from 4,000 digits and were chosen on the test split.

``benchmarks/README.md`` stays the hand-written engineering record (why each choice was made);
this page is the learner's, generated, so that it never drifts from the records
(tests/test_training_record.py runs ``--check``).

Shape legend: none (no tensor shapes of its own).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from capsedu.training.uncertainty import standard_error
from capsedu.zoo.shipped import STUDIES_DIR, WEIGHTS_DIR
from coursetools.record_format import (
    accuracy_line,
    device_of,
    load,
    machine_line,
    minutes,
    pct,
    recipe_lines,
    split_lines,
    tries_table,
    validation_lines,
    with_se,
)

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "notebooks" / "training_record.md"
TRIES = ROOT / "benchmarks" / "tries.json"  # the runs tried on validation (benchmarks.recipe_search)
TITLE = "How the shipped networks were trained"
NETWORKS = {  # name: (what it is, the lessons that use it), in the order of the course
    "capsnet": ("CapsNet with dynamic routing, the CPU configuration (`CapsNetConfig.cpu()`)", "03-07, 10"),
    "cnn": ("the baseline CNN, trained by the CapsNet's recipe", "08"),
    "capsnet40": ("the CapsNet at 40 × 40 input, digits placed anywhere on the canvas (the paper's §5.2)", "08"),
    "cnn40": ("the CNN at 40 × 40 input, the same recipe", "08"),
    "multimnist": ("the CapsNet on two overlapping digits (36 × 36, the paper's §6)", "09"),
    "multimnist_cnn": ("the CNN on the same pairs, one sigmoid per class", "09"),
    "em": ("matrix capsules with EM routing (A, B, C, D = 64, 8, 16, 16)", "11"),
    "efficient": ("Efficient-CapsNet, self-attention routing", "12"),
    "fashion_capsnet": ("the CapsNet on Fashion-MNIST (conv1 256, 16 primary capsule types)", "13"),
    "fashion_cnn": ("the CNN on Fashion-MNIST, the Fashion CapsNet's epochs and batch", "13"),
    "fashion_efficient": ("Efficient-CapsNet on Fashion-MNIST", "13"),
}


def network_section(name: str, record: dict[str, Any], seeds: list[dict[str, Any]],
                    tries: list[dict[str, Any]]) -> list[str]:
    what, lessons = NETWORKS[name]
    lines = [f"## `{name}`: {what}", "", f"Used in lesson{'s' * (not lessons.isdigit())} {lessons}.", ""]
    lines += recipe_lines(record["recipe"])
    lines += [*split_lines(record), machine_line(record)]
    lines += validation_lines(record)
    lines.append(accuracy_line(record))
    if record.get("note"):
        lines.append(f"- **Note in the record**: {record['note']}")
    for other in seeds:
        lines.append(f"- **The same recipe with seed {other['recipe']['seed']}** "
                     f"(`capsedu/zoo/studies/seeds40/`): "
                     f"{with_se(other['test_accuracy'], other['test_standard_error'])} on the test split, "
                     f"validation {with_se(other['validation_data']['accuracy'], other['validation_data']['standard_error'])}; "
                     f"{minutes(other['train_wall_seconds'])} on {device_of(other)}.")
    lines += tries_table(tries)
    return lines + [""]


def summary_table(found: dict[str, dict[str, Any]]) -> list[str]:
    lines = ["| network | lessons | epochs × batch | trained on | training | validation | test |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for name, record in found.items():
        recipe, val = record["recipe"], record.get("validation_data") or {}
        lines.append(f"| `{name}` | {NETWORKS[name][1]} | "
                     f"{recipe['epochs']} × {recipe['batch_size']} | {device_of(record)} | "
                     f"{minutes(record['train_wall_seconds'])} | "
                     f"{with_se(val['accuracy'], val['standard_error']) if val else '—'} | "
                     f"{with_se(record['test_accuracy'], record['test_standard_error'])} |")
    return lines


def paper_section(study: dict[str, Any]) -> list[str]:
    record = study["network"]
    lines = ["## The paper-size CapsNet (recorded, not shipped)", "",
             f"`capsedu/zoo/studies/capsnet_paper.json`: {study['about']}", ""]
    lines += recipe_lines(record["recipe"])
    lines += [*split_lines(record), machine_line(record)]
    lines += validation_lines(record)
    lines.append(accuracy_line(record))
    if record.get("test_accuracy_on_cpu") is not None:
        lines.append(f"- **The test split measured again on a CPU**: {pct(record['test_accuracy_on_cpu'])} %.")
    return lines + [""]


def earlier_section(shipped: dict[str, Any], comparison: dict[str, Any], robustness: dict[str, Any],
                    detach: dict[str, Any], today: dict[str, dict[str, Any]]) -> list[str]:
    r"""The networks that learned from 4,000 digits, and the three studies made of them."""
    return (earlier_networks(shipped, today) + earlier_comparison(comparison)
            + earlier_robustness(robustness) + earlier_detach(detach) + [""])


def earlier_networks(shipped: dict[str, Any], today: dict[str, dict[str, Any]]) -> list[str]:
    em, pairs = today["em"]["recipe"], today["multimnist"]["recipe"]
    lines = ["## The earlier networks, trained on 4,000 digits", "",
             f"`capsedu/zoo/studies/shipped_4000.json`: {shipped['about']} Their settings (epochs, "
             f"batch, EM's β_a units, MultiMNIST's primary capsule types) were chosen by their test "
             f"accuracy, so those test numbers are slightly optimistic; there was no validation split "
             f"then. Some of them live on in today's recipes: EM's batch {em['batch_size']} and β_a units "
             f"(`beta_a_logit_units` {json.dumps(em['config']['beta_a_logit_units'])}), MultiMNIST's "
             f"{pairs['config']['primary_types']} primary capsule types.", "",
             "| network | recipe | trained on | training | speed | load (1 min) | test |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for name, record in shipped["networks"].items():
        recipe, test = record["recipe"], record["test_data"]
        pairs = bool(recipe.get("pairs"))
        unit = "pairs/s" if pairs else "img/s"
        se = standard_error(record["test_accuracy"], test["images"])
        lines.append(f"| `{name}` | {recipe['epochs']} epochs × batch {recipe['batch_size']}, "
                     f"lr {recipe['lr']:g} | {record['train_data']['images']:,} images | "
                     f"{minutes(record['train_wall_seconds'])} | {record['train_images_per_second']:,.0f} {unit} | "
                     f"{record['load_average_before'][0]:.2f} → {record['load_average_after'][0]:.2f} | "
                     f"{with_se(record['test_accuracy'], se)}{' (pairs both right)' if pairs else ''} |")
    return lines


def earlier_comparison(comparison: dict[str, Any]) -> list[str]:
    images = comparison["test_data"]["images"]
    lines = ["", f"`comparison_4000.json`, the same networks on {images:,} official test images, clean, "
              f"affNIST-like (random small affine transformations) and rotated by 45° (both ways, "
              f"{2 * images:,} images):", "",
              "| network | clean | affNIST-like | rotated ±45° | epochs | training |",
              "| --- | --- | --- | --- | --- | --- |"]
    for name, row in comparison["rows"].items():
        cells = [with_se(row[k], standard_error(row[k], images)) for k in ("clean", "affnist_like")]
        rotated = with_se(row["rotated_45"], standard_error(row["rotated_45"], 2 * images))
        lines.append(f"| `{name}` | {cells[0]} | {cells[1]} | {rotated} | {row['train_epochs']} | "
                     f"{row['train_minutes']:.1f} min |")
    return lines


def earlier_robustness(robustness: dict[str, Any]) -> list[str]:
    images = robustness["test_data"]["images"]
    nets = list(robustness["networks"])
    families: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    for row, values in robustness["table"].items():
        families.setdefault(values.get("family") or row, []).append((row, values))
    lines = ["", f"`robustness_4000.json`, the CapsNet and the CNN on {images:,} transformed test "
              f"images, one transformation per test set (the standard error of each accuracy is at "
              f"most {pct(standard_error(0.5, images))} points):", "",
              "| test sets | " + " | ".join(f"`{n}` (%)" for n in nets) + " |",
              "| --- | " + " | ".join("---" for _ in nets) + " |"]
    for family, rows in families.items():
        settings = [row.removeprefix(family.split()[0]).replace(" right", "").replace(" diagonal", "").strip()
                    for row, _ in rows]
        names = family if len(rows) == 1 else f"{family}: {', '.join(settings)}"
        lines.append(f"| {names} | " + " | ".join(" · ".join(pct(values[n]) for _, values in rows)
                                                 for n in nets) + " |")
    return lines


def earlier_detach(detach: dict[str, Any]) -> list[str]:
    recipe = detach["recipe"]
    lines = ["", f"`detach_inner_4000.json`, the CapsNet's recipe ({recipe['epochs']} epochs, batch "
              f"{recipe['batch_size']}) with and without `detach_inner` (the gradient through routing's "
              f"inner iterations), {len({r['seed'] for r in detach['runs']})} seeds each:", "",
              "| detach_inner | seed | test | first 98.5 % on test | training |", "| --- | --- | --- | --- | --- |"]
    for run in detach["runs"]:
        lines.append(f"| {run['detach_inner']} | {run['seed']} | {pct(run['test_accuracy'])} % | epoch "
                     f"{run['epoch_to_98.5']} ({run['seconds_to_98.5']:.0f} s) | {run['train_seconds']:.0f} s |")
    return lines


def page(weights: Path = WEIGHTS_DIR, studies: Path = STUDIES_DIR, tries: Path = TRIES) -> str:
    r"""The page's markdown, from the records in ``weights`` and ``studies``."""
    found = {name: load(weights / f"{name}.json") for name in NETWORKS}
    seeds = {name: [load(p) for p in sorted((studies / "seeds40").glob(f"{name}_seed*.json"))]
             for name in NETWORKS}
    capsnet = found["capsnet"]
    lines = [
        f"# {TITLE}", "",
        "<!-- Generated by `python -m coursetools.training_record` from capsedu/zoo/weights/*.json and "
        "capsedu/zoo/studies/; do not edit by hand. -->", "",
        "Every network the lessons load with `capsedu.pretrained(NAME)` was trained by its recipe "
        "(`capsedu/zoo/recipes.py`) with `python -m coursetools.train_zoo NAME`, which wrote the record "
        "this page is generated from (`capsedu/zoo/weights/NAME.json`). The protocol is the same for "
        f"all of them: each learns from the {capsnet['train_data']['images']:,} official MNIST training "
        f"images that are not in the course's offline subset, is measured on the "
        f"{capsnet['validation_data']['images']:,}-image validation split (the offline subset) after "
        "every epoch, and is measured on the official test split once, at the end. Choices between "
        "recipes were made on the validation curve; the number of epochs was set by the training time "
        "available, not chosen on validation. Accuracies are given ± one binomial standard error "
        "(`capsedu.standard_error`); that error covers which test images were drawn, not how a second "
        "training with another seed would differ.", "",
        "## All networks at a glance", "",
        *summary_table(found), "",
    ]
    tried = load(tries)
    for name, record in found.items():
        lines += network_section(name, record, seeds[name], tried.get(name, record.get("tries") or []))
    lines += paper_section(load(studies / "capsnet_paper.json"))
    lines += earlier_section(load(studies / "shipped_4000.json"), load(studies / "comparison_4000.json"),
                             load(studies / "robustness_4000.json"), load(studies / "detach_inner_4000.json"),
                             found)
    text = "\n".join(lines).rstrip() + "\n"
    return text.replace("/work/shared/data/mnist", "the course's data folder")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m coursetools.training_record",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true",
                        help=f"exit 1 if {PAGE.relative_to(ROOT)} differs from what the records generate")
    args = parser.parse_args(argv)
    text = page()
    if args.check:
        current = PAGE.read_text() if PAGE.is_file() else ""
        if current != text:
            print(f"{PAGE.relative_to(ROOT)} is stale: run `python -m coursetools.training_record`")
            return 1
        print(f"{PAGE.relative_to(ROOT)} matches its records")
        return 0
    PAGE.write_text(text)
    print(f"wrote {PAGE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

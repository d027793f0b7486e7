r"""How the training record formats one network's record: recipe, splits, machine, curve, tries.

Helpers of :mod:`coursetools.training_record` (the page's sections are there); each turns part of
a ``capsedu/zoo/weights/NAME.json`` record into markdown, with numbers formatted here.

Shape legend: none (no tensor shapes of its own).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

SCHEDULES = {"onecycle": "one-cycle", "exponential": "exponential decay", "constant": "constant"}
CURVE_POINTS = 16  # a longer validation curve is shown at about this many epochs


def load(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())


def pct(value: float, digits: int = 2) -> str:
    return f"{100 * value:.{digits}f}"


def with_se(accuracy: float, se: float) -> str:
    return f"{pct(accuracy)} ± {pct(se)} %"


def minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min"


def loads(before: list[float], after: list[float]) -> str:
    return (f"load average (1, 5, 15 min) {', '.join(f'{x:.2f}' for x in before)} before → "
            f"{', '.join(f'{x:.2f}' for x in after)} after")


def device_of(record: dict[str, Any]) -> str:
    device = record.get("device", "cpu")
    if device == "cpu":
        return "CPU"
    return f"GPU ({device.split(': ', 1)[-1]})"


def objective(recipe: dict[str, Any]) -> str:
    o = dict(recipe.get("objective") or {})
    name = o.pop("name", "?")
    recon = o.pop("recon_weight", None)
    words = {"margin": "margin loss (Eq. 4)", "cross_entropy": "cross-entropy",
             "multi_label": "binary cross-entropy, one sigmoid per class",
             "two_digit": "margin loss on both digits"}.get(name, f"{name} loss")
    if name == "spread":
        start, end, ramp = o.pop("start_margin", None), o.pop("margin", None), o.pop("ramp_epochs", 0)
        if ramp:
            words += f", margin {start} → {end} over {ramp} epoch{'s' * (ramp != 1)}"
        else:
            words += f", margin {end} throughout"
    if recon:
        words += f" + {recon:g} × reconstruction (sum of squared errors)"
    if o:
        words += " (" + ", ".join(f"{k} {v}" for k, v in o.items()) + ")"
    return words


def augmentation(recipe: dict[str, Any]) -> str:
    parts = []
    canvas = recipe.get("canvas", 28)
    if recipe.get("max_shift"):
        where = f" on a {canvas} × {canvas} canvas" if canvas != 28 else ""
        parts.append(f"random shifts up to {recipe['max_shift']} px{where}")
    if recipe.get("max_angle"):
        parts.append(f"rotations up to {recipe['max_angle']:g}°")
    if recipe.get("max_scale"):
        parts.append(f"scaling up to ±{recipe['max_scale']:g}")
    if recipe.get("flip"):
        parts.append("random left-right mirroring")
    pairs = recipe.get("pairs") or {}
    if pairs:
        parts.append(f"{pairs['pairs_per_epoch']:,} fresh pairs every epoch, each digit shifted up to "
                     f"{pairs['max_shift']} px on a {pairs['canvas']} × {pairs['canvas']} canvas "
                     f"(overlap merged by `{pairs['merge']}`)")
    return "; ".join(parts) or "none"


def config(recipe: dict[str, Any]) -> str:
    items = []
    for key, value in (recipe.get("config") or {}).items():
        if value is None:
            continue
        text = json.dumps(value) if isinstance(value, (list, bool)) else str(value)
        items.append(f"{key} {text}")
    return ", ".join(items)


def recipe_lines(recipe: dict[str, Any]) -> list[str]:
    schedule = SCHEDULES.get(recipe.get("lr_schedule"), recipe.get("lr_schedule"))
    return [f"- **Recipe**: `{recipe['kind']}`, {recipe['epochs']} epoch{'s' * (recipe['epochs'] != 1)} "
            f"at batch {recipe['batch_size']}, peak learning rate {recipe['lr']:g} ({schedule} schedule), "
            f"{recipe.get('precision', 'float32')}, seed {recipe.get('seed', 0)}; {objective(recipe)}.",
            f"- **Augmentation**: {augmentation(recipe)}.",
            f"- **Network**: {config(recipe)}."]


def split_lines(record: dict[str, Any]) -> list[str]:
    unit = "pairs" if (record["recipe"].get("pairs") or {}) else "images"
    train, val, test = record["train_data"], record.get("validation_data"), record["test_data"]
    lines = ["- **Data**:", f"  - trained on {train['images']:,} images: {train['source']};"]
    if val:
        lines.append(f"  - validated after every epoch on {val['images']:,} {unit}: {val['source']};")
    return lines + [f"  - tested once, at the end, on {test['images']:,} {unit}: {test['source']}."]


def machine_line(record: dict[str, Any]) -> str:
    unit = "pairs/s" if (record["recipe"].get("pairs") or {}) else "img/s"
    return (f"- **Where and how long**: {device_of(record)}; processor {record.get('cpu', 'not recorded')}, "
            f"{record['cpu_count']} cores, {record['torch_threads']} torch threads, torch "
            f"{record['torch_version']}; {minutes(record['train_wall_seconds'])} of training "
            f"({minutes(record['train_cpu_seconds'])} of CPU time), {record['train_images_per_second']:,.0f} "
            f"{unit}; {loads(record['load_average_before'], record['load_average_after'])}.")


def sampled(values: list[float]) -> tuple[list[int], list[float]]:
    r"""Epoch numbers (from 1) and values: all of them, or every k-th epoch with the first and last."""
    if len(values) <= CURVE_POINTS + 4:
        return list(range(1, len(values) + 1)), list(values)
    step = -(-len(values) // CURVE_POINTS)
    epochs = sorted({1, *range(step, len(values) + 1, step), len(values)})
    return epochs, [values[e - 1] for e in epochs]


def curve(values: list[float]) -> str:
    epochs, shown = sampled(values)
    numbers = " · ".join(pct(v) for v in shown)
    if len(shown) == len(values):
        return f"{numbers} %"
    return f"{numbers} % (epochs {', '.join(map(str, epochs))})"


def validation_lines(record: dict[str, Any]) -> list[str]:
    history, lines = record["history"], []
    if history.get("validation_accuracy"):
        lines.append(f"- **Validation after each epoch**: {curve(history['validation_accuracy'])}.")
    if history.get("validation_affnist_accuracy"):
        lines.append(f"- **Validation on affNIST-like transformed digits, each epoch**: "
                     f"{curve(history['validation_affnist_accuracy'])}.")
    reached = []
    for level in ("98.0", "98.5", "99.0", "99.5"):
        point = record.get(f"time_to_{level}")
        if point:
            reached.append(f"{level} % after epoch {point['epoch']} ({minutes(point['train_seconds'])})")
    if reached:
        lines.append(f"- **Validation first reached**: {'; '.join(reached)}.")
    return lines


def accuracy_line(record: dict[str, Any]) -> str:
    val = record.get("validation_data")
    pairs = bool(record["recipe"].get("pairs"))
    what = "of the test pairs with both digits right" if pairs else "on the test split"
    text = f"- **Accuracy**: {with_se(record['test_accuracy'], record['test_standard_error'])} {what}"
    if pairs and record.get("test_at_least_one") is not None:
        text += f" ({pct(record['test_at_least_one'])} % with at least one right)"
    if val and val.get("accuracy") is not None:
        text += f"; validation at the end {with_se(val['accuracy'], val['standard_error'])}"
    return text + " (± one binomial standard error)."


def changes(entry: dict[str, Any]) -> str:
    found = entry.get("changes") or {}
    return ", ".join(f"`{k}={v}`" for k, v in found.items()) or "the recipe of its time"


def tries_table(tries: list[dict[str, Any]]) -> list[str]:
    if not tries:
        return ["- **Runs tried before it**: none recorded in `tries.json`."]
    lines = ["- **Runs tried on validation before it** (`benchmarks/tries.json`; the recipe's "
             "changes, then what each measured):", "",
             "  | run | changes | epochs | validation at the end | training | speed | device |",
             "  | --- | --- | --- | --- | --- | --- | --- |"]
    for entry in tries:
        val = entry["validation_accuracy"]
        device = entry.get("device", "CPU")
        load = entry.get("load_average") or []
        where = f"{device}, load {load[0]:.2f} → {load[3]:.2f}" if len(load) == 6 else device
        note = entry.get("note", "").replace("|", "/")
        lines.append(f"  | {note} | {changes(entry)} | {entry['epochs']} | "
                     f"{with_se(val[-1], entry['validation_standard_error'])} | {entry['train_minutes']:.1f} min | "
                     f"{entry['images_per_second']:,.0f}/s | {where} |")
    return lines

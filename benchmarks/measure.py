r"""What every benchmark measures with: the processor's name, interleaved timing, process memory.

Shared by the scripts of this folder (run them from the repository root as
``python -m benchmarks.NAME``).

Shape legend: none (no tensor shapes of its own).
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch

CPU = torch.device("cpu")


def cpu_model() -> str:
    r"""The processor's model name, as /proc/cpuinfo gives it."""
    for line in Path("/proc/cpuinfo").read_text().splitlines() if Path("/proc/cpuinfo").exists() else []:
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "unknown processor"


def machine_record(start: float, load_before: tuple[float, float, float]) -> dict:
    r"""What a study ran on and how long it took since ``start`` (``time.perf_counter()``), with
    the load average before it and now."""
    return {"seconds": round(time.perf_counter() - start), "cpu": cpu_model(), "cpu_count": os.cpu_count(),
            "torch": torch.__version__, "load_average": [list(load_before), list(os.getloadavg())]}


def write_study(result: dict, out: Path, seconds: float | None = None) -> None:
    r"""Write a study's JSON to ``out`` and say so, with the run's ``seconds`` (default: the study's), on stderr."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"written to {out} ({result['seconds'] if seconds is None else seconds} s)", file=sys.stderr)


def correct(model: torch.nn.Module, images: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    r"""(N,) booleans: which of ``images`` ``model`` answers right (eval mode, batch 128)."""
    import capsedu  # imported here: the timing helpers above need only torch

    return capsedu.predict(model, images, batch_size=128) == labels


def scored(models: dict[str, torch.nn.Module], images: torch.Tensor, labels: torch.Tensor) -> dict:
    r"""Each network's accuracy on ``images`` and, under ``"correct"``, its per-image results packed
    (:func:`capsedu.pack_correct`) so that lessons compare networks paired on the same images."""
    from capsedu.training.paired import pack_correct

    right = {name: correct(model, images, labels) for name, model in models.items()}
    return {**{name: float(r.float().mean()) for name, r in right.items()},
            "correct": {name: pack_correct(r) for name, r in right.items()}}


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def interleaved(tasks: dict[str, Callable[[], object]], reps: int,
                device: torch.device = CPU) -> dict[str, list[float]]:
    r"""Seconds per call of each task; one warm-up call each, then ``reps`` rotating rounds."""
    names = list(tasks)
    for name in names:
        tasks[name]()
    times: dict[str, list[float]] = {name: [] for name in names}
    for round_ in range(reps):
        shift = round_ % len(names)
        for name in names[shift:] + names[:shift]:
            synchronize(device)
            start = time.perf_counter()
            tasks[name]()
            synchronize(device)
            times[name].append(time.perf_counter() - start)
    return times


def status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")

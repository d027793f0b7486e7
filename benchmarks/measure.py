r"""What every benchmark measures with: the processor's name, interleaved timing, process memory.

Shared by the scripts of this folder (run them from the repository root as
``python -m benchmarks.NAME``).
"""

from __future__ import annotations

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

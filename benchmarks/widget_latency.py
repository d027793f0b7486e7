r"""Latency of the explorers of lessons 03, 07, 08 and 09: from a control's change to the redrawn figure (PNG in the widget).

Each measurement sets one control's ``value`` exactly as the browser would (the ipywidgets
``observe`` callbacks run synchronously), so the time covers the whole update: decoding or routing,
moving the figure's artists, drawing the figure with Agg and encoding the PNG put into the
``ipywidgets.Image``. Not included: the transfer of the PNG to the browser and its paint (on a
local JupyterLab a few milliseconds for these 30-60 kB images).

Goals (issues 4 and 18): routing <= 150 ms; perturbation, transform and pair <= 100 ms, median and 95th
percentile.
On a shared machine the wall time is inflated by other processes: the load average is printed
next to every figure, and so is the process CPU time per update.

Usage (from the repository root)::

    python -m benchmarks.widget_latency [--checkpoint PATH] [--repeats 60]

Without ``--checkpoint`` it uses ``capsedu.pretrained()`` when the shipped weights exist, else an
untrained CPU-configuration network (the latency does not depend on the weights' values).

Shape legend: none (no tensor shapes of its own).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable

import torch

import capsedu
from capsedu.data.multimnist import MultiMNIST
from capsedu.explore.pairs import pair_explorer
from capsedu.explore.transform_explorer import transform_explorer
from capsedu.explore.widgets import perturbation_explorer, routing_explorer


def load_model(checkpoint: str | None) -> tuple[capsedu.CapsNet, str]:
    if checkpoint:
        return capsedu.load_checkpoint(checkpoint)[0], checkpoint
    try:
        from capsedu.zoo.shipped import pretrained

        return pretrained(), "capsedu.pretrained()"
    except (ImportError, capsedu.CheckpointError) as error:  # no shipped weights yet: timing does not depend on weight values
        capsedu.set_seed(0)
        return capsedu.CapsNet(capsedu.CapsNetConfig.cpu()).eval(), f"untrained CPU config ({error})"


def time_moves(moves: list[Callable[[], None]]) -> tuple[list[float], list[float]]:
    r"""Wall and process-CPU milliseconds of each move."""
    wall, cpu = [], []
    for move in moves:
        start_wall, start_cpu = time.perf_counter(), time.process_time()
        move()
        wall.append(1e3 * (time.perf_counter() - start_wall))
        cpu.append(1e3 * (time.process_time() - start_cpu))
    return wall, cpu


def summary(name: str, wall: list[float], cpu: list[float], goal: float) -> str:
    p95 = statistics.quantiles(wall, n=20)[-1]
    median = statistics.median(wall)
    verdict = "meets" if p95 <= goal and median <= goal else "MISSES"
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    return (f"{name:<13} n={len(wall):3d}  median {median:6.1f} ms  p95 {p95:6.1f} ms  "
            f"(CPU per update: median {statistics.median(cpu):5.1f} ms)  goal {goal:.0f} ms: {verdict}"
            f"  | load average {load}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", default=None)
    parser.add_argument("--repeats", type=int, default=60)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads(),
                        help="torch intra-op threads (default: torch's own choice)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    model, source = load_model(args.checkpoint)
    data = capsedu.load_mnist("test", verbose=False)
    print(f"model: {source}; {model.config.num_primary_caps} primary capsules; "
          f"torch threads {torch.get_num_threads()}; load average at start "
          + ", ".join(f"{x:.2f}" for x in os.getloadavg()))

    pert = perturbation_explorer(model, data)
    values = [0.05 * k for k in range(-5, 6)]
    moves = [lambda i=i: setattr(pert.sliders[i % 16], "value", values[(7 * i + 3) % 11])
             for i in range(args.repeats)]
    time_moves(moves[:5])  # warm-up
    print(summary("perturbation", *time_moves(moves), goal=100))

    rout = routing_explorer(model, data)
    moves = [lambda i=i: setattr(rout.iterations, "value", 1 + (3 * i) % 7) for i in range(args.repeats)]
    time_moves(moves[:5])
    print(summary("routing", *time_moves(moves), goal=150))

    index_moves = [lambda i=i: setattr(rout.index, "value", 10 + i) for i in range(args.repeats // 3)]
    print(summary("routing image", *time_moves(index_moves), goal=150) + "  (new image: u_hat recomputed)")

    turn = transform_explorer(model, capsedu.pretrained("cnn"), data)
    moves = [lambda i=i: setattr(turn.angle, "value", -60 + (37 * i) % 121) for i in range(args.repeats)]
    time_moves(moves[:5])
    print(summary("transform", *time_moves(moves), goal=100) + "  (both networks and the decoder)")

    pairs = MultiMNIST(data, 1_000, seed=0)
    pair = pair_explorer(capsedu.pretrained("multimnist"), pairs)
    moves = [lambda i=i: setattr(pair.first, "value", (3 * i) % 10) for i in range(args.repeats)]
    time_moves(moves[:5])
    print(summary("pair capsule", *time_moves(moves), goal=100) + "  (two reconstructions)")
    index_moves = [lambda i=i: setattr(pair.index, "value", 10 + i) for i in range(args.repeats)]
    time_moves(index_moves[:5])
    print(summary("pair", *time_moves(index_moves), goal=100) + "  (new pair: encoded, routed, decoded)")


if __name__ == "__main__":
    main()

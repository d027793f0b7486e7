r"""A learner's own CapsNet (lesson 06's MyCapsNet) against ``capsedu.CapsNet``: training steps per second.

Both networks have the course's CPU configuration (``CapsNetConfig.cpu()``) and the same weights.
The learner's network is built from the pieces the lessons' reference solutions write
(read from ``notebooks/01-05`` by :func:`capsedu.course.pieces.collect_pieces`, the way lesson 06
reads a learner's): lesson 03's readable vectorised routing, which sums with ``torch.einsum`` and
backpropagates through every iteration, and lesson 02's reshape. A third network is the same with a
routing that sums by broadcasting, building (B, I, J, D) products, as a learner may write it. ``capsedu.CapsNet`` runs its
default factored routing with ``detach_inner=True``, as lesson 06 trains it. One timed call is one
Adam step on a batch of 32 MNIST-sized images (the lesson's batch), shifted as in training; the
calls are interleaved (:func:`benchmarks.measure.interleaved`). Issue 64's goal: the learner's
network at >= 0.5x capsedu's speed on 2 cores. The medians, their ratio and the load average before
and after are printed.

Usage (from the repository root)::

    python -m benchmarks.my_capsnet_speed [--reps 30] [--threads 2]

Shape legend:
    B      batch size (32)
    I      primary capsules (288)
    J      digit capsules (10)
    D      digit capsule dimension (16)
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
from functools import partial

import torch

import capsedu
from benchmarks.measure import cpu_model, interleaved
from capsedu.course.checks.assembly import _ReferenceCapsNet, load_capsnet_weights
from capsedu.course.pieces import collect_pieces
from capsedu.training.step import train_step


def broadcast_routing(u_hat: torch.Tensor, routing_iterations: int) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Procedure 1 as a learner may write it with broadcasting: it builds (B, I, J, D) products."""
    b = torch.zeros(u_hat.shape[:3])  # (B, I, J)
    for iteration in range(routing_iterations):
        c = torch.softmax(b, dim=2)  # (B, I, J)
        v = capsedu.squash((c[..., None] * u_hat).sum(dim=1))  # (B, J, D)
        if iteration < routing_iterations - 1:
            b = b + (u_hat * v[:, None]).sum(dim=-1)  # (B, I, J)
    return v, c


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=30)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    load_before = os.getloadavg()
    config = capsedu.CapsNetConfig.cpu()
    capsedu.set_seed(0)
    theirs = capsedu.CapsNet(config)
    pieces = collect_pieces("notebooks")
    mine = _ReferenceCapsNet(config, pieces)
    broadcast = _ReferenceCapsNet(config, dataclasses.replace(pieces, routing=broadcast_routing))
    for net in (mine, broadcast):
        load_capsnet_weights(net, theirs)
    generator = torch.Generator().manual_seed(0)
    images = torch.rand(32, 1, 28, 28, generator=generator)  # (B, 1, 28, 28)
    labels = torch.randint(0, 10, (32,), generator=generator)  # (B,)
    nets = {"learner": mine, "learner, broadcasting routing": broadcast, "capsedu": theirs}
    optimizers = {name: torch.optim.Adam(net.parameters(), lr=1e-3) for name, net in nets.items()}

    def step(name: str) -> float:
        shifted = capsedu.random_shift(images, generator=generator)  # (B, 1, 28, 28)
        return train_step(nets[name], optimizers[name], shifted, labels)

    times = interleaved({name: partial(step, name) for name in nets}, args.reps)
    median = {name: statistics.median(values) for name, values in times.items()}
    print(f"{cpu_model()}, {args.threads} threads, {args.reps} interleaved steps of batch 32 each")
    for name, seconds in median.items():
        print(f"  {name:30}: {1000 * seconds:6.1f} ms per training step (median), "
              f"{median['capsedu'] / seconds:.2f}x capsedu.CapsNet's speed")
    print("goal: the learner's MyCapsNet (lesson 03's einsum routing) at >= 0.5x")
    print(f"load average before {load_before[0]:.2f}, after {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()

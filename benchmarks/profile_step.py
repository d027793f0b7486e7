r"""Where one training step of the paper CapsNet spends its time, measured with ``torch.profiler``.

    .venv/bin/python -m benchmarks.profile_step                      # capsedu, batch 64
    .venv/bin/python -m benchmarks.profile_step --impl einsum --batch 128

The step is cut into stages (each stage's input is detached and re-attached, and backward runs
stage by stage in reverse) so that every forward and backward operation falls inside one
``torch.profiler.record_function`` range: convolutions (conv1, primary capsules), routing
(prediction vectors u_hat and Procedure 1), decoder + losses, and the Adam update. The result
is the same gradient as one ``loss.backward()``. Prints a table of milliseconds per step and the
busiest PyTorch operators.

Shape legend:
    B      batch size
    I      primary capsules (1152)
    J      digit capsules (10)
    D_in   primary capsule dimension (8)
    D_out  digit capsule dimension (16)
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable

import torch
from torch import nn
from torch.profiler import ProfilerActivity, profile, record_function

from benchmarks.reference_impls import REFERENCE_HEADS, ReferenceCapsNet, tutorial_squash
from benchmarks.speed import CAPSEDU, build_models, make_batch
from capsedu import CapsNet, margin_loss, reconstruction_loss  # noqa: E402
from capsedu.training.schedule import default_optimizer  # noqa: E402

STAGES = ["conv1", "primary caps", "routing", "decoder + loss"]
GROUPS = {"convolutions": ["conv1", "primary caps"], "routing": ["routing"],
          "decoder + loss": ["decoder + loss"], "optimizer (Adam)": ["optimizer"]}


def stage_functions(model: nn.Module) -> list[Callable]:
    r"""The forward pass of ``model`` as four functions, one per stage."""
    if isinstance(model, CapsNet):
        def primary(h: torch.Tensor) -> torch.Tensor:
            return model.primary(h)  # (B, I, D_in)
    else:
        assert isinstance(model, ReferenceCapsNet)
        cfg = model.config

        def primary(h: torch.Tensor) -> torch.Tensor:
            out = model.primary_conv(h)  # (B, T*D_in, 6, 6)
            u = out.view(out.shape[0], cfg.primary_types, cfg.primary_dim, *out.shape[2:])
            return tutorial_squash(u.permute(0, 1, 3, 4, 2).reshape(out.shape[0], -1, cfg.primary_dim))

    def conv1(x: torch.Tensor) -> torch.Tensor:
        return torch.relu(model.conv1(x))  # (B, 256, 20, 20)

    def routing(u: torch.Tensor) -> torch.Tensor:
        return model.class_caps(u)[0]  # (B, J, D_out)

    def decoder_and_loss(v: torch.Tensor, images: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        mask = torch.nn.functional.one_hot(labels, v.shape[1]).to(v)  # (B, J)
        recon = model.decoder((v * mask[:, :, None]).flatten(1))  # (B, 784)
        return margin_loss(v.norm(dim=-1), labels) + 0.0005 * reconstruction_loss(recon, images)
    return [conv1, primary, routing, decoder_and_loss]


def staged_step(model: nn.Module, optimizer: torch.optim.Optimizer, images: torch.Tensor,
                labels: torch.Tensor) -> None:
    r"""One training step whose stages are separate ``record_function`` ranges."""
    fns = stage_functions(model)
    outputs, inputs = [], []
    current = images
    for name, fn in zip(STAGES, fns):
        with record_function(f"forward: {name}"):
            if name == "decoder + loss":
                current = fn(current, images, labels)
            else:
                current = fn(current)
        outputs.append(current)
        if name != "decoder + loss":
            current = current.detach().requires_grad_()
            inputs.append(current)
    grad: torch.Tensor | None = None
    for index in reversed(range(len(STAGES))):
        with record_function(f"backward: {STAGES[index]}"):
            outputs[index].backward(grad)
        grad = inputs[index - 1].grad if index > 0 else None
    with record_function("forward: optimizer"):
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)


def profile_steps(model: nn.Module, batch: int, steps: int,
                  device: torch.device) -> torch.profiler.profile:
    r"""Profile ``steps`` staged training steps; capsedu uses the optimizer ``capsedu.fit`` uses
    (fused Adam), the tutorial styles a plain ``torch.optim.Adam``."""
    images, labels = make_batch(batch, device=device)
    model = model.to(device)
    optimizer = (default_optimizer(model, 1e-3, device) if isinstance(model, CapsNet)
                 else torch.optim.Adam(model.parameters(), lr=1e-3))
    staged_step(model, optimizer, images, labels)  # warm-up
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(activities=activities) as prof:
        for _ in range(steps):
            staged_step(model, optimizer, images, labels)
            if device.type == "cuda":
                torch.cuda.synchronize(device)
    return prof


def stage_table(prof: torch.profiler.profile, steps: int) -> list[tuple[str, float, float]]:
    r"""(group, forward ms, backward ms) per step, from the ``record_function`` ranges."""
    totals = {event.key: event.cpu_time_total / 1000 / steps for event in prof.key_averages()}
    rows = []
    for group, stages in GROUPS.items():
        forward = sum(totals.get(f"forward: {s}", 0.0) for s in stages)
        backward = sum(totals.get(f"backward: {s}", 0.0) for s in stages)
        rows.append((group, forward, backward))
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--impl", default=CAPSEDU, choices=[CAPSEDU, *REFERENCE_HEADS])
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--steps", type=int, default=2, help="profiled steps after one warm-up")
    parser.add_argument("--ops", type=int, default=12, help="how many operators to list")
    parser.add_argument("--device", default="cpu", help="cpu (default) or cuda")
    args = parser.parse_args(argv)
    torch.set_num_threads(2)
    device = torch.device(args.device)
    model = build_models(only=args.impl)[args.impl]
    load = os.getloadavg()
    prof = profile_steps(model, args.batch, args.steps, device)
    rows = stage_table(prof, args.steps)
    total = sum(f + b for _, f, b in rows)
    print(f"{args.impl}, batch {args.batch}, {args.steps} profiled steps, {device}, 2 threads, "
          f"load average {load[0]:.1f} -> {os.getloadavg()[0]:.1f}")
    print(f"{'stage':<18} {'forward ms':>11} {'backward ms':>12} {'total ms':>9} {'share':>6}")
    for group, forward, backward in rows:
        print(f"{group:<18} {forward:>11.0f} {backward:>12.0f} {forward + backward:>9.0f} "
              f"{100 * (forward + backward) / total:>5.1f}%")
    print(f"{'step':<18} {'':>11} {'':>12} {total:>9.0f}")
    print("\nbusiest operators (self CPU time per step):")
    events = [e for e in prof.key_averages() if not e.key.startswith(("forward:", "backward:"))]
    for event in sorted(events, key=lambda e: e.self_cpu_time_total, reverse=True)[:args.ops]:
        print(f"  {event.key:<45} {event.self_cpu_time_total / 1000 / args.steps:>8.0f} ms")


if __name__ == "__main__":
    main()

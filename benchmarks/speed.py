r"""capsedu against three tutorial-style CapsNets: training, inference, routing and memory.

Run from the repository root (2 threads, the paper's network, about 10-20 minutes on a busy
2-core machine)::

    .venv/bin/python benchmarks/speed.py                 # everything, prints a table and ratios
    .venv/bin/python benchmarks/speed.py --reps 3 --batch-sizes 64

Every implementation holds the same weights. Before anything is timed the script asserts with
``torch.testing.assert_close`` that all of them give the same capsules, lengths, reconstructions,
couplings and parameter gradients. Timings are interleaved (one step of each implementation in
turn, the order rotating every round) so that load from other processes hits all of them alike;
the table shows medians and the load average is printed next to it.

Shape legend: B batch, I = 1152 primary capsules, J = 10 digit capsules, D = 16.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
from reference_impls import REFERENCE_HEADS, ReferenceCapsNet  # noqa: E402

from capsedu import CapsNet, CapsNetConfig, margin_loss, reconstruction_loss  # noqa: E402
from capsedu.nets.routing import dynamic_routing, dynamic_routing_fast  # noqa: E402

CAPSEDU = "capsedu"


def build_models(seed: int = 0, only: str | None = None) -> dict[str, nn.Module]:
    r"""capsedu's paper CapsNet and one tutorial-style copy per routing style, same weights."""
    torch.manual_seed(seed)
    model = CapsNet(CapsNetConfig.paper())
    models: dict[str, nn.Module] = {CAPSEDU: model}
    for name, head in REFERENCE_HEADS.items():
        if only in (None, name):
            models[name] = ReferenceCapsNet(model, head)
    if only is not None and only != CAPSEDU:
        del models[CAPSEDU]
    return models


def make_batch(batch: int, seed: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    images = torch.rand(batch, 1, 28, 28, generator=generator)  # (B, 1, 28, 28)
    labels = torch.randint(0, 10, (batch,), generator=generator)  # (B,)
    return images, labels


def loss_of(model: nn.Module, images: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    out = model(images, labels)
    return margin_loss(out.lengths, labels) + 0.0005 * reconstruction_loss(out.reconstruction, images)


def _canonical_grads(model: nn.Module) -> dict[str, torch.Tensor]:
    grads = {}
    for name, param in model.named_parameters():
        name = name.replace("primary.conv.", "primary_conv.")
        grads[name] = param.grad.reshape(param.shape[1:]) if name == "digits.W" and param.dim() == 5 \
            else param.grad
    return grads


def assert_all_equal(models: dict[str, nn.Module], batch: int = 8) -> None:
    r"""Same outputs and same parameter gradients from every implementation, or AssertionError."""
    images, labels = make_batch(batch, seed=2)
    results = {}
    for name, model in models.items():
        model.zero_grad(set_to_none=True)
        kwargs = {"return_couplings": True} if name == CAPSEDU else {}
        out = model(images, labels, **kwargs)
        loss = margin_loss(out.lengths, labels) + 0.0005 * reconstruction_loss(out.reconstruction, images)
        loss.backward()
        results[name] = (out, _canonical_grads(model))
        model.zero_grad(set_to_none=True)
    expected_out, expected_grads = results[CAPSEDU]
    for name, (out, grads) in results.items():
        for field in ("capsules", "lengths", "reconstruction", "couplings"):
            torch.testing.assert_close(getattr(out, field), getattr(expected_out, field),
                                       msg=lambda m, n=name, f=field: f"{n} {f}: {m}")
        assert grads.keys() == expected_grads.keys(), (name, sorted(grads), sorted(expected_grads))
        for key, grad in grads.items():
            torch.testing.assert_close(grad, expected_grads[key], rtol=1e-4, atol=1e-6,
                                       msg=lambda m, n=name, k=key: f"{n} grad {k}: {m}")


def interleaved(tasks: dict[str, Callable[[], object]], reps: int) -> dict[str, list[float]]:
    r"""Seconds per call of each task; one warm-up call each, then ``reps`` rotating rounds."""
    names = list(tasks)
    for name in names:
        tasks[name]()
    times: dict[str, list[float]] = {name: [] for name in names}
    for round_ in range(reps):
        shift = round_ % len(names)
        for name in names[shift:] + names[:shift]:
            start = time.perf_counter()
            tasks[name]()
            times[name].append(time.perf_counter() - start)
    return times


def train_tasks(models: dict[str, nn.Module], batch: int) -> dict[str, Callable[[], object]]:
    images, labels = make_batch(batch)
    tasks = {}
    for name, model in models.items():
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)

        def step(model=model, optimizer=optimizer) -> None:
            optimizer.zero_grad(set_to_none=True)
            loss_of(model, images, labels).backward()
            optimizer.step()
        tasks[name] = step
    return tasks


def inference_tasks(models: dict[str, nn.Module], batch: int) -> dict[str, Callable[[], object]]:
    images, _ = make_batch(batch)

    def infer(model: nn.Module) -> None:
        with torch.inference_mode():
            model(images)
    return {name: (lambda model=model: infer(model)) for name, model in models.items()}


def routing_tasks(models: dict[str, nn.Module], batch: int,
                  backward: bool) -> dict[str, Callable[[], object]]:
    r"""u_hat -> v only. capsedu's readable ``dynamic_routing`` is timed too, for reference."""
    generator = torch.Generator().manual_seed(3)
    u = 0.3 * torch.randn(batch, 1152, 8, generator=generator)  # (B, I, D_in)
    grad_v = torch.randn(batch, 10, 16, generator=generator)  # (B, J, D_out)
    capsnet = models[CAPSEDU]
    with torch.no_grad():
        u_hat = capsnet.digits.predict(u).contiguous()  # (B, I, J, D_out)
    routers: dict[str, tuple[Callable, torch.Tensor]] = {
        CAPSEDU: (lambda x: dynamic_routing_fast(x, 3), u_hat),
        "capsedu readable": (lambda x: dynamic_routing(x, 3), u_hat)}
    for name, model in models.items():
        if name != CAPSEDU:
            with torch.no_grad():
                routers[name] = (model.digits.route, model.digits.predict(u))

    def run(route: Callable, inputs: torch.Tensor) -> None:
        if not backward:
            with torch.no_grad():
                route(inputs)
            return
        leaf = inputs.detach().requires_grad_()
        v, _ = route(leaf)
        v.backward(grad_v)
    return {name: (lambda r=r, i=i: run(r, i)) for name, (r, i) in routers.items()}


def peak_memory_mb(name: str, batch: int) -> float:
    r"""Peak RSS growth (MiB) during one training step, measured in a fresh process."""
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="65536", MALLOC_TRIM_THRESHOLD_="0")
    cmd = [sys.executable, __file__, "--memory-child", name, str(batch)]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def _status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


def memory_child(name: str, batch: int) -> None:
    torch.set_num_threads(2)
    models = build_models(only=name)
    step = train_tasks(models, batch)[name]
    step()  # warm-up: optimizer state and one-time buffers are allocated here
    Path("/proc/self/clear_refs").write_text("5")  # reset the peak (VmHWM) to the current RSS
    base = _status_kib("VmRSS")
    step()
    print((_status_kib("VmHWM") - base) / 1024)


def _median_ms(times: list[float]) -> float:
    return 1000 * statistics.median(times)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=5, help="timed rounds per measurement")
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[64, 128])
    parser.add_argument("--no-memory", action="store_true", help="skip the peak-memory runs")
    parser.add_argument("--json", type=Path, help="also write the results to this file")
    parser.add_argument("--memory-child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.memory_child:
        memory_child(args.memory_child[0], int(args.memory_child[1]))
        return {}
    torch.set_num_threads(2)
    models = build_models()
    assert_all_equal(models)
    print(f"outputs and gradients of {', '.join(models)} agree (torch.testing.assert_close)")
    results: dict = {"torch": torch.__version__, "threads": torch.get_num_threads(),
                     "load_before": os.getloadavg(), "reps": args.reps}
    big = max(args.batch_sizes)
    for batch in args.batch_sizes:
        times = interleaved(train_tasks(models, batch), args.reps)
        results[f"train_b{batch}"] = {n: batch / statistics.median(t) for n, t in times.items()}
        print(f"train b{batch} done, load {os.getloadavg()[0]:.1f}", flush=True)
    times = interleaved(inference_tasks(models, big), args.reps)
    results[f"infer_b{big}"] = {n: big / statistics.median(t) for n, t in times.items()}
    for backward in (False, True):
        key = "routing_fwd_bwd_ms" if backward else "routing_fwd_ms"
        times = interleaved(routing_tasks(models, 64, backward), args.reps)
        results[key] = {n: _median_ms(t) for n, t in times.items()}
    print(f"timings done, load {os.getloadavg()[0]:.1f}", flush=True)
    if not args.no_memory:
        for batch in args.batch_sizes:
            results[f"peak_mb_b{batch}"] = {n: peak_memory_mb(n, batch) for n in models}
    results["load_after"] = os.getloadavg()
    print_report(results, list(models))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return results


def print_report(results: dict, names: list[str]) -> None:
    columns = [k for k in results if k.startswith(("train_", "infer_", "routing_", "peak_"))]
    units = {"train": "img/s", "infer": "img/s", "routing": "", "peak": "MiB"}
    header = ["implementation"] + [f"{c} {units[c.split('_')[0]]}".strip() for c in columns]
    rows = [header]
    for name in names + ["capsedu readable"]:
        rows.append([name] + [f"{results[c][name]:.1f}" if name in results[c] else "" for c in columns])
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    print(f"\ntorch {results['torch']}, {results['threads']} threads, {results['reps']} rounds, "
          f"load average before {results['load_before']}, after {results['load_after']}")
    for row in rows:
        print(" | ".join(cell.ljust(w) for cell, w in zip(row, widths)))
    print("\ncapsedu speed-up (x) over each reference (higher is better; memory: reference / capsedu)")
    for name in names[1:]:
        parts = []
        for c in columns:
            ours, theirs = results[c][CAPSEDU], results[c][name]
            ratio = ours / theirs if c.startswith(("train", "infer")) else theirs / ours
            parts.append(f"{c} {ratio:.2f}")
        print(f"  vs {name}: " + ", ".join(parts))


if __name__ == "__main__":
    main()

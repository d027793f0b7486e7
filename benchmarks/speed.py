r"""capsedu against three tutorial-style CapsNets: training, inference, routing and memory.

Run from the repository root (2 threads, the paper's network, about 10 minutes on a 2-core
machine)::

    .venv/bin/python -m benchmarks.speed                 # everything, prints a table and ratios
    .venv/bin/python -m benchmarks.speed --reps 3 --batch-sizes 64
    .venv/bin/python -m benchmarks.speed --device cuda   # the same on a GPU, where there is one

Every implementation holds the same weights. Before anything is timed the script asserts with
``torch.testing.assert_close`` that all of them give the same capsules, lengths, reconstructions,
couplings and parameter gradients. Timings are interleaved (one step of each implementation in
turn, the order rotating every round) so that load from other processes hits all of them alike;
the table shows medians and the load average is printed next to it. "routing" is the digit-capsule
layer as a whole, u -> v: the prediction vectors u_hat = W u and Procedure 1, forward alone and
forward + backward (gradients for u and W).

Shape legend:
    B      batch size
    I      primary capsules (1152)
    J      digit capsules (10)
    D      digit capsule dimension (16)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import torch
from torch import nn

from benchmarks.measure import CPU, cpu_model, interleaved, status_kib
from benchmarks.reference_impls import REFERENCE_HEADS, ReferenceCapsNet
from capsedu import CapsNet, CapsNetConfig, capsnet_loss, margin_loss, reconstruction_loss
from capsedu.nets.losses import RECON_WEIGHT
from capsedu.nets.routing import dynamic_routing

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


def make_batch(batch: int, seed: int = 1,
               device: str | torch.device = "cpu") -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    images = torch.rand(batch, 1, 28, 28, generator=generator)  # (B, 1, 28, 28)
    labels = torch.randint(0, 10, (batch,), generator=generator)  # (B,)
    return images.to(device), labels.to(device)


def loss_of(model: nn.Module, images: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    return capsnet_loss(model, images, labels)[0]


def _canonical_grads(model: nn.Module) -> dict[str, torch.Tensor]:
    grads = {}
    for name, param in model.named_parameters():
        name = name.replace("primary.conv.", "primary_conv.")
        grads[name] = param.grad.reshape(param.shape[1:]) if name == "class_caps.W" and param.dim() == 5 \
            else param.grad
    return grads


def assert_all_equal(models: dict[str, nn.Module], batch: int = 8,
                     device: torch.device = CPU) -> None:
    r"""Same outputs and same parameter gradients from every implementation, or AssertionError."""
    images, labels = make_batch(batch, seed=2, device=device)
    results = {}
    for name, model in models.items():
        model.zero_grad(set_to_none=True)
        kwargs = {"return_couplings": True} if name == CAPSEDU else {}
        out = model(images, labels, **kwargs)
        loss = margin_loss(out.lengths, labels) + RECON_WEIGHT * reconstruction_loss(out.reconstruction, images)
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


def train_tasks(models: dict[str, nn.Module], batch: int,
                device: torch.device = CPU) -> dict[str, Callable[[], object]]:
    images, labels = make_batch(batch, device=device)
    tasks = {}
    for name, model in models.items():
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)

        def step(model=model, optimizer=optimizer) -> None:
            optimizer.zero_grad(set_to_none=True)
            loss_of(model, images, labels).backward()
            optimizer.step()
        tasks[name] = step
    return tasks


def inference_tasks(models: dict[str, nn.Module], batch: int,
                    device: torch.device = CPU) -> dict[str, Callable[[], object]]:
    images, _ = make_batch(batch, device=device)

    def infer(model: nn.Module) -> None:
        with torch.inference_mode():
            model(images)
    return {name: (lambda model=model: infer(model)) for name, model in models.items()}


def routing_tasks(models: dict[str, nn.Module], batch: int, backward: bool,
                  device: torch.device = CPU) -> dict[str, Callable[[], object]]:
    r"""The digit-capsule layer as a whole, u -> (v, c): u_hat = W u and Procedure 1.

    capsedu's readable ``dynamic_routing`` on ``prediction_vectors``'s u_hat is timed too, for reference.
    With ``backward``, gradients flow to u and to W.
    """
    generator = torch.Generator().manual_seed(3)
    u = (0.3 * torch.randn(batch, 1152, 8, generator=generator)).to(device)  # (B, I, D_in)
    grad_v = torch.randn(batch, 10, 16, generator=generator).to(device)  # (B, J, D_out)
    capsnet = models[CAPSEDU]
    routers: dict[str, Callable] = {name: model.class_caps for name, model in models.items()}
    routers["capsedu readable"] = lambda x: dynamic_routing(capsnet.class_caps.prediction_vectors(x), 3)

    def run(route: Callable) -> None:
        if not backward:
            with torch.no_grad():
                route(u)
            return
        leaf = u.detach().requires_grad_()
        v, _ = route(leaf)
        v.backward(grad_v)
    return {name: (lambda r=r: run(r)) for name, r in routers.items()}


def peak_memory_mb(name: str, batch: int, device: torch.device) -> float:
    r"""Peak memory growth (MiB) during one training step, measured in a fresh process: the
    resident set size on a CPU, the CUDA caching allocator's peak on a GPU."""
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="65536", MALLOC_TRIM_THRESHOLD_="0")
    cmd = [sys.executable, "-m", __spec__.name, "--memory-child", name, str(batch), str(device)]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[1])
    return float(out.stdout.strip().splitlines()[-1])


def memory_child(name: str, batch: int, device: torch.device) -> None:
    torch.set_num_threads(2)
    models = {n: m.to(device) for n, m in build_models(only=name).items()}
    step = train_tasks(models, batch, device)[name]
    step()  # warm-up: optimizer state and one-time buffers are allocated here
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        base = torch.cuda.memory_allocated(device)
        torch.cuda.reset_peak_memory_stats(device)
        step()
        torch.cuda.synchronize(device)
        print((torch.cuda.max_memory_allocated(device) - base) / 2 ** 20)
        return
    Path("/proc/self/clear_refs").write_text("5")  # reset the peak (VmHWM) to the current RSS
    base = status_kib("VmRSS")
    step()
    print((status_kib("VmHWM") - base) / 1024)


def _median_ms(times: list[float]) -> float:
    return 1000 * statistics.median(times)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=5, help="timed rounds per measurement")
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[64, 128])
    parser.add_argument("--no-memory", action="store_true", help="skip the peak-memory runs")
    parser.add_argument("--json", type=Path, help="also write the results to this file")
    parser.add_argument("--device", default="cpu", help="cpu (default), cuda, cuda:1, ...")
    parser.add_argument("--memory-child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.memory_child:
        name, batch, device = args.memory_child
        memory_child(name, int(batch), torch.device(device))
        return {}
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        parser.error(f"--device {args.device}: no CUDA GPU is available here")
    torch.set_num_threads(2)
    models = {name: model.to(device) for name, model in build_models().items()}
    assert_all_equal(models, device=device)
    print(f"outputs and gradients of {', '.join(models)} agree (torch.testing.assert_close)")
    where = torch.cuda.get_device_name(device) if device.type == "cuda" else cpu_model()
    results: dict = {"torch": torch.__version__, "threads": torch.get_num_threads(),
                     "device": f"{device} ({where})", "load_before": os.getloadavg(),
                     "reps": args.reps}
    big = max(args.batch_sizes)
    for batch in args.batch_sizes:
        times = interleaved(train_tasks(models, batch, device), args.reps, device)
        results[f"train_b{batch}"] = {n: batch / statistics.median(t) for n, t in times.items()}
        print(f"train b{batch} done, load {os.getloadavg()[0]:.1f}", flush=True)
    times = interleaved(inference_tasks(models, big, device), args.reps, device)
    results[f"infer_b{big}"] = {n: big / statistics.median(t) for n, t in times.items()}
    for backward in (False, True):
        key = "routing_fwd_bwd_ms" if backward else "routing_fwd_ms"
        times = interleaved(routing_tasks(models, 64, backward, device), 3 * args.reps, device)
        results[key] = {n: _median_ms(t) for n, t in times.items()}
    print(f"timings done, load {os.getloadavg()[0]:.1f}", flush=True)
    if not args.no_memory:
        for batch in args.batch_sizes:
            results[f"peak_mb_b{batch}"] = {n: peak_memory_mb(n, batch, device) for n in models}
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
    print(f"\n{results['device']}, torch {results['torch']}, {results['threads']} threads, "
          f"{results['reps']} rounds (routing: {3 * results['reps']}), load average before "
          f"{results['load_before']}, after {results['load_after']}")
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

r"""EM routing: capsedu's ``em_routing`` against the same math written in the port's style.

    .venv/bin/python -m benchmarks.em_speed                   # class-layer sizes, batch 32
    .venv/bin/python -m benchmarks.em_speed --batch 64 --reps 30

The comparison is our own re-implementation (:func:`port_style_em`), for benchmarking only: the
procedure of :func:`capsedu.nets.em_routing.em_routing` *without* the port's bug (the
activations are not renormalised away), written the way yl-1993/Matrix-Capsules-EM-PyTorch
writes it - votes in the (B, I, J, M) layout with every sum over i a broadcast product and a
``sum(dim=1)``, the assignments kept as (B, I, J, 1), log sigma as ``log(sqrt(sigma^2))``, and
the E-step outside log space (``exp`` of the summed log-densities, normalised by their sum).

Two sizes, each forward + backward (a sum of mu and a_out as the loss), outputs asserted equal
first, then timed interleaved in one process: the class-capsule layer of lesson 11's network
(I = 16 * 3 * 3 = 144 children, J = 10 classes, 16 pose entries, per image) and, for scale, its
first convolutional capsule layer as routed (25 positions per image, each I = 72, J = 16).
Peak memory of one forward + backward is measured in a fresh process whose allocator returns
memory at once (``MALLOC_MMAP_THRESHOLD_``), as the resident-set growth. Both run after
:func:`capsedu.training.hardware.reuse_large_allocations`, as ``python -m coursetools.train_zoo``
does.

Shape legend:
    B      batch of routings (images x positions)
    I      input capsules (children)
    J      output capsules (parents)
    M      pose entries (16)
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import subprocess
import sys
from pathlib import Path

import torch

from benchmarks.measure import cpu_model, interleaved, status_kib
from capsedu.nets.em_routing import em_routing
from capsedu.training.hardware import reuse_large_allocations


def port_style_em(votes, activations, beta_u, beta_a, routing_iterations, inverse_temperature,
                  eps=1e-8):
    r"""The same procedure in the port's style: votes (B, I, J, M), activations (B, I)."""
    batch, num_in, num_out, _ = votes.shape
    R = votes.new_full((batch, num_in, num_out, 1), 1.0 / num_out)  # (B, I, J, 1)
    a_in = activations.view(batch, num_in, 1, 1)  # (B, I, 1, 1)
    for t in range(routing_iterations):
        R_a = R * a_in  # (B, I, J, 1); the port renormalised this over J here
        R_sum = R_a.sum(dim=1, keepdim=True)  # (B, 1, J, 1)
        coeff = R_a / (R_sum + eps)  # (B, I, J, 1)
        mu = (coeff * votes).sum(dim=1, keepdim=True)  # (B, 1, J, M)
        sigma_sq = (coeff * (votes - mu) ** 2).sum(dim=1, keepdim=True) + eps  # (B, 1, J, M)
        cost_h = (beta_u.view(1, 1, -1, 1) + torch.log(sigma_sq.sqrt())) * R_sum  # (B, 1, J, M)
        saving = beta_a.view(1, 1, -1) - cost_h.sum(dim=3)  # (B, 1, J)
        a_out = torch.sigmoid(inverse_temperature * saving)  # (B, 1, J)
        if t < routing_iterations - 1:
            ln_p = (-(votes - mu) ** 2 / (2 * sigma_sq) - torch.log(sigma_sq.sqrt())
                    - 0.5 * math.log(2 * math.pi)).sum(dim=3)  # (B, I, J)
            ap = a_out * torch.exp(ln_p)  # (B, I, J): outside log space
            R = (ap / ap.sum(dim=2, keepdim=True)).unsqueeze(-1)  # (B, I, J, 1)
    return mu.squeeze(1), a_out.squeeze(1)  # (B, J, M), (B, J)


SIZES = {"class layer": lambda batch: (batch, 144, 10), "conv caps 1": lambda batch: (25 * batch, 72, 16)}


def problem(batch: int, num_in: int, num_out: int, seed: int = 0) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    votes = torch.randn(batch, num_in, num_out, 16, generator=generator)
    activations = torch.rand(batch, num_in, generator=generator)
    betas = [0.1 * torch.randn(num_out, generator=generator) for _ in range(2)]
    return [votes.requires_grad_(), activations, *[b.requires_grad_() for b in betas]]


def step(fn, args: list[torch.Tensor], routing_iterations: int, inverse_temperature: float):
    mu, a_out = fn(*args, routing_iterations, inverse_temperature)[:2]
    (mu.sum() + a_out.sum()).backward()
    return mu, a_out


IMPLEMENTATIONS = {"capsedu em_routing": em_routing, "port style": port_style_em}


def assert_equal(args: list[torch.Tensor], routing_iterations: int, inverse_temperature: float) -> None:
    results = {}
    for name, fn in IMPLEMENTATIONS.items():
        for tensor in args:
            tensor.grad = None
        outputs = step(fn, args, routing_iterations, inverse_temperature)
        results[name] = [o.detach() for o in outputs] + [args[0].grad.clone(), args[2].grad.clone()]
    for got, want in zip(results["port style"], results["capsedu em_routing"]):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)


def memory_child(size: str, name: str, batch: int, routing_iterations: int,
                 inverse_temperature: float) -> None:
    args = problem(*SIZES[size](batch))
    step(IMPLEMENTATIONS[name], args, routing_iterations, inverse_temperature)  # warm-up
    Path("/proc/self/clear_refs").write_text("5")  # reset the peak to the current RSS
    base = status_kib("VmRSS")
    step(IMPLEMENTATIONS[name], args, routing_iterations, inverse_temperature)
    print((status_kib("VmHWM") - base) / 1024)


def peak_mib(size: str, batch: int, name: str, routing_iterations: int,
             inverse_temperature: float) -> float:
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="65536", MALLOC_TRIM_THRESHOLD_="0")
    out = subprocess.run([sys.executable, "-m", __spec__.name, "--memory-child", size, name, "--batch",
                          str(batch), "--routing-iterations", str(routing_iterations),
                          "--inverse-temperature", str(inverse_temperature)],
                         env=env, capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[1])
    return float(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batch", type=int, default=32, help="images per step (default 32)")
    parser.add_argument("--routing-iterations", type=int, default=2, help="EM routing iterations (the network's 2)")
    parser.add_argument("--inverse-temperature", type=float, default=1e-3, help="inverse temperature (default 1e-3)")
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--memory-child", nargs=2, metavar=("SIZE", "NAME"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    if args.memory_child:
        memory_child(*args.memory_child, args.batch, args.routing_iterations, args.inverse_temperature)
        return {}
    reuse_large_allocations()
    load = os.getloadavg()
    print(f"{cpu_model()}, {os.cpu_count()} CPUs, torch {torch.__version__} ({torch.get_num_threads()} "
          f"threads); batch {args.batch}, {args.routing_iterations} routing iterations, lambda {args.inverse_temperature}; "
          f"load average {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f}")
    results = {}
    for size, shape in SIZES.items():
        dims = shape(args.batch)
        tensors = problem(*dims)
        assert_equal(tensors, args.routing_iterations, args.inverse_temperature)
        tasks = {name: (lambda fn=fn, t=tensors: step(fn, t, args.routing_iterations, args.inverse_temperature))
                 for name, fn in IMPLEMENTATIONS.items()}
        times = interleaved(tasks, args.reps)
        ms = {name: 1000 * statistics.median(t) for name, t in times.items()}
        mib = {name: peak_mib(size, args.batch, name, args.routing_iterations, args.inverse_temperature) for name in tasks}
        ratio = ms["port style"] / ms["capsedu em_routing"]
        print(f"\n{size}: B, I, J = {dims}, forward + backward, outputs and gradients equal")
        for name in tasks:
            print(f"  {name:20s} {ms[name]:8.2f} ms   peak {mib[name]:7.1f} MiB")
        print(f"  speed ratio (port style / capsedu): {ratio:.2f}x")
        results[size] = {"ms": ms, "peak_mib": mib, "ratio": ratio}
    load = os.getloadavg()
    print(f"\nload average after: {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f}")
    return results


if __name__ == "__main__":
    main()

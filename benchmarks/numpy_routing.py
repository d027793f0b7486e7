r"""Lesson 10's NumPy routing against capsedu's torch routing, forward + backward, at the paper's sizes.

Times, in one process and interleaved (one call of each in turn, the order rotating every round),
the gradient of a fixed linear function of the output with respect to the input:

* ``routing``: Procedure 1 on the votes u_hat (B, I, J, D) -> v (B, J, D), then d/d u_hat;
* ``layer``: the whole DigitCaps layer u (B, I, D_in) -> u_hat = W u -> v, then d/dW and d/du.

NumPy: :mod:`capsedu.nets.numpy_caps` (forward, then the hand-written backward). torch:
:func:`capsedu.dynamic_routing` and autograd for ``routing``; :class:`capsedu.DigitCaps` for
``layer`` - what the networks run: its default ``routing="factored"`` implementation, which never
builds u_hat (:mod:`capsedu.nets.routing_fast`), with either setting of ``detach_inner`` (a
hand-written backward with ``True``, autograd through every iteration with ``False``). Both in
float32, both settings of ``detach_inner``.
Before timing, the script asserts that both give the same gradients. The goal (issue 14) is
NumPy within 3x of torch. Medians are printed with the load average before and after.

Usage (from the repository root)::

    python -m benchmarks.numpy_routing [--reps 15] [--batch 64] [--threads 2]

Shape legend:
    B      batch size (64)
    I      input (primary) capsules (1152)
    D_in   primary capsule dimension (8)
    J      output (digit) capsules (10)
    D      digit capsule dimension (16)
"""

from __future__ import annotations

import argparse
import os
import statistics
from collections.abc import Callable

import numpy as np
import torch

from benchmarks.measure import interleaved  # the same interleaved timing as benchmarks/speed.py
from capsedu.nets import numpy_caps as nc  # noqa: E402
from capsedu.nets.routing import DigitCaps, dynamic_routing  # noqa: E402


def numpy_tasks(W: np.ndarray, u: np.ndarray, g: np.ndarray, detach: bool) -> dict[str, Callable]:
    u_hat = nc.prediction_vectors(W, u)[0]  # (B, I, J, D)

    def routing() -> np.ndarray:
        _, _, cache = nc.dynamic_routing(u_hat, 3, detach)
        return nc.dynamic_routing_backward(g, cache)  # (B, I, J, D)

    def layer() -> tuple[np.ndarray, np.ndarray]:
        votes, predicted = nc.prediction_vectors(W, u)
        _, _, cache = nc.dynamic_routing(votes, 3, detach)
        return nc.prediction_vectors_backward(nc.dynamic_routing_backward(g, cache), predicted)

    return {"routing": routing, "layer": layer}


def torch_tasks(W: np.ndarray, u: np.ndarray, g: np.ndarray, detach: bool) -> dict[str, Callable]:
    u_t, g_t = torch.from_numpy(u).requires_grad_(True), torch.from_numpy(g)
    num_in, num_out, dim_out, dim_in = W.shape
    class_caps = DigitCaps(num_in, dim_in, num_out, dim_out, detach_inner=detach)
    with torch.no_grad():
        class_caps.W.copy_(torch.from_numpy(W))
    u_hat = class_caps.prediction_vectors(u_t).detach().requires_grad_(True)  # (B, I, J, D)

    def routing() -> torch.Tensor:
        v, _ = dynamic_routing(u_hat, 3, detach_inner=detach)
        return torch.autograd.grad((v * g_t).sum(), u_hat)[0]

    def layer() -> tuple[torch.Tensor, ...]:
        v, _ = class_caps(u_t)  # the factored implementation, with either detach_inner
        return torch.autograd.grad((v * g_t).sum(), (class_caps.W, u_t))

    return {"routing": routing, "layer": layer}


def main(argv: list[str] | None = None) -> dict[str, float]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=15, help="timed rounds")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--threads", type=int, default=2, help="torch intra-op threads")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    rng = np.random.default_rng(0)
    W = rng.normal(0, 0.05, (1152, 10, 16, 8)).astype(np.float32)  # (I, J, D_out, D_in)
    u = rng.normal(0, 0.35, (args.batch, 1152, 8)).astype(np.float32)  # (B, I, D_in)
    g = rng.normal(size=(args.batch, 10, 16)).astype(np.float32)  # (B, J, D)
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; torch "
          f"{torch.__version__} ({torch.get_num_threads()} threads), NumPy {np.__version__}")
    print(f"B = {args.batch}, I = 1152, J = 10, D = 16, D_in = 8, r = 3, float32; median of {args.reps}")
    results = {}
    for detach in (True, False):
        ours, theirs = numpy_tasks(W, u, g, detach), torch_tasks(W, u, g, detach)
        np.testing.assert_allclose(ours["routing"](), theirs["routing"]().numpy(), rtol=1e-3, atol=1e-6)
        runs = interleaved({f"numpy {k}": f for k, f in ours.items()}
                           | {f"torch {k}": f for k, f in theirs.items()}, args.reps)
        times = {name: statistics.median(seconds) for name, seconds in runs.items()}
        for what in ("routing", "layer"):
            numpy_ms, torch_ms = 1000 * times[f"numpy {what}"], 1000 * times[f"torch {what}"]
            results[f"{what} detach_inner={detach}"] = numpy_ms / torch_ms
            print(f"{what:8s} detach_inner={detach!s:5s}  NumPy {numpy_ms:7.1f} ms   torch "
                  f"{torch_ms:7.1f} ms   NumPy / torch = {numpy_ms / torch_ms:.2f}")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return results


if __name__ == "__main__":
    main()

r"""Training throughput of the CPU profile through ``capsedu.fit``: this checkout against an old commit.

    .venv/bin/python -m benchmarks.fit_speed                          # against 7f4c842, b32 and b128
    .venv/bin/python -m benchmarks.fit_speed --baseline-ref HEAD~3 --rounds 5

The old commit is checked out into a temporary ``git worktree`` and imported from there in a
subprocess (``PYTHONPATH`` puts it before the editable install); this checkout runs in a
subprocess of the same kind, and the two alternate, round after round, so that load from other
processes hits both alike. Each subprocess trains ``CapsNetConfig.cpu()`` on the 4,000-image
offline training part (an empty data root), seeded, with the shipped recipe's settings (2-pixel
shifts, one-cycle Adam at 2e-3, no progress bar): one warm-up epoch on 500 images, then one timed
epoch through ``fit``, reporting images per second of ``history["train_seconds"]``. The script
prints the medians, their ratio, the processor and the load average before and after.

``--loader recipe`` (the default) batches the data as each version's recipes do -
``capsedu.batch_loader`` (one index per batch) where the version has it, else
``DataLoader(shuffle=True)`` (B item fetches and a collate); both give the same batches.
``--loader dataloader`` uses ``DataLoader`` in both versions, to separate that saving from the rest.

Besides wall-clock images per second the table gives the speed-up in process CPU time (both
threads' seconds, ``history["train_cpu_seconds"]``): on a shared virtual machine a neighbour's
load stretches the wall clock of whichever version happens to run, not the CPU time it used.

Shape legend: B batch size.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.measure import cpu_model

REPO = Path(__file__).resolve().parents[1]

CHILD = r"""
import json, sys, tempfile, torch
from functools import partial
from torch.utils.data import DataLoader
import capsedu
torch.set_num_threads(2)
batch, device, how = int(sys.argv[1]), sys.argv[2], sys.argv[3]
def DataLoader_shuffled(data, size, generator):
    return DataLoader(data, size, shuffle=True, generator=generator)
batches = getattr(capsedu, "batch_loader", DataLoader_shuffled) if how == "recipe" else DataLoader_shuffled
root = tempfile.mkdtemp()  # no MNIST files: the offline training part, the same in every version
data = capsedu.load_mnist("train", root=root, download=False, verbose=False)
generator = capsedu.set_seed(0)
model = capsedu.CapsNet(capsedu.CapsNetConfig.cpu())
shift = partial(capsedu.random_shift, max_shift=2, generator=torch.Generator().manual_seed(1))
warm = batches(data.subset(500), batch, generator)
capsedu.fit(model, warm, epochs=1, device=device, augment=shift, progress=False)
loader = batches(data, batch, generator)
history = capsedu.fit(model, loader, epochs=1, device=device, lr=2e-3, lr_schedule="onecycle",
                      augment=shift, progress=False)
print(json.dumps({"images_per_second": len(data) / history["train_seconds"][0],
                  "images_per_cpu_second": len(data) / history["train_cpu_seconds"][0],
                  "version": capsedu.__version__, "file": capsedu.__file__,
                  "loader": batches.__name__}))
"""


def run_child(pythonpath: Path, batch: int, device: str, loader: str) -> dict:
    env = dict(os.environ, PYTHONPATH=str(pythonpath))
    out = subprocess.run([sys.executable, "-c", CHILD, str(batch), device, loader], env=env,
                         capture_output=True, text=True, check=True, cwd=tempfile.gettempdir())
    return json.loads(out.stdout.strip().splitlines()[-1])


def time_batch_size(worktree: Path, batch: int, args: argparse.Namespace,
                    loaders: dict[str, str]) -> dict[str, dict[str, float]]:
    r"""Alternating rounds of both versions at one batch size: median img/s, wall and CPU time."""
    runs: dict[str, dict[str, list[float]]] = {name: {"wall": [], "cpu": []}
                                               for name in ("baseline", "current")}
    for round_ in range(args.rounds):
        order = ["baseline", "current"] if round_ % 2 == 0 else ["current", "baseline"]
        for name in order:
            path = worktree if name == "baseline" else REPO
            info = run_child(path, batch, args.device, args.loader)
            assert Path(info["file"]).is_relative_to(path), info
            loaders[name] = info["loader"]
            runs[name]["wall"].append(info["images_per_second"])
            runs[name]["cpu"].append(info["images_per_cpu_second"])
        print(f"b{batch} round {round_ + 1}: baseline {runs['baseline']['wall'][-1]:.0f}, "
              f"current {runs['current']['wall'][-1]:.0f} img/s", flush=True)
    return {name: {clock: statistics.median(values) for clock, values in run.items()}
            for name, run in runs.items()}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--baseline-ref", default="7f4c842", help="git commit to compare against")
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[32, 128])
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds per batch size")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--loader", choices=["recipe", "dataloader"], default="recipe",
                        help="how each version batches the data (module docstring)")
    args = parser.parse_args(argv)
    load_before = os.getloadavg()
    results: dict = {"baseline": args.baseline_ref, "device": args.device, "cpu": cpu_model()}
    loaders: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="capsedu-baseline-") as tmp:
        worktree = Path(tmp) / "baseline"
        subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(worktree),
                        args.baseline_ref], check=True, capture_output=True)
        try:
            for batch in args.batch_sizes:
                results[f"b{batch}"] = time_batch_size(worktree, batch, args, loaders)
        finally:
            subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(worktree)],
                           check=False, capture_output=True)
    results["load_before"], results["load_after"] = load_before, os.getloadavg()
    results["loaders"] = loaders
    print_table(results, args)
    return results


def print_table(results: dict, args: argparse.Namespace) -> None:
    r"""The medians as a Markdown table, with the processor, the load and the loaders."""
    loaders = results["loaders"]
    print(f"\nCapsNetConfig.cpu() through capsedu.fit, {args.device} ({results['cpu']}), 2 threads, "
          f"medians of {args.rounds} alternating runs; load average before "
          f"{tuple(round(x, 2) for x in results['load_before'])}, after "
          f"{tuple(round(x, 2) for x in results['load_after'])}; batches from: baseline "
          f"{loaders.get('baseline')}, current {loaders.get('current')}")
    print("| batch | baseline img/s | current img/s | speed-up | speed-up in CPU time |\n"
          "| --- | --- | --- | --- | --- |")
    for batch in args.batch_sizes:
        base, now = results[f"b{batch}"]["baseline"], results[f"b{batch}"]["current"]
        print(f"| {batch} | {base['wall']:.0f} | {now['wall']:.0f} | "
              f"{now['wall'] / base['wall']:.2f}x | {now['cpu'] / base['cpu']:.2f}x |")


if __name__ == "__main__":
    main()

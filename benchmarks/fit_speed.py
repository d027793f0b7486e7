r"""Training throughput of the CPU profile through ``capsedu.fit``: this checkout against an old commit.

    .venv/bin/python benchmarks/fit_speed.py                          # against 7f4c842, b32 and b128
    .venv/bin/python benchmarks/fit_speed.py --baseline-ref HEAD~3 --rounds 5

The old commit is checked out into a temporary ``git worktree`` and imported from there in a
subprocess (``PYTHONPATH`` puts it before the editable install); this checkout runs in a
subprocess of the same kind, and the two alternate, round after round, so that load from other
processes hits both alike. Each subprocess trains ``CapsNetConfig.cpu()`` on the 4,000-image
offline training part (an empty data root), seeded, with the shipped recipe's settings (2-pixel
shifts, one-cycle Adam at 2e-3, no progress bar): one warm-up epoch on 500 images, then one timed
epoch through ``fit``, reporting images per second of ``history["train_seconds"]``. The script
prints the medians, their ratio, the processor and the load average before and after.

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

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))
from speed import cpu_model  # noqa: E402

CHILD = r"""
import json, sys, tempfile, torch
from functools import partial
from torch.utils.data import DataLoader
import capsedu
torch.set_num_threads(2)
batch, device = int(sys.argv[1]), sys.argv[2]
root = tempfile.mkdtemp()  # no MNIST files: the offline training part, the same in every version
data = capsedu.load_mnist("train", root=root, download=False, verbose=False)
generator = capsedu.set_seed(0)
model = capsedu.CapsNet(capsedu.CapsNetConfig.cpu())
shift = partial(capsedu.random_shift, max_shift=2, generator=torch.Generator().manual_seed(1))
warm = DataLoader(data.subset(500), batch_size=batch, shuffle=True, generator=generator)
capsedu.fit(model, warm, epochs=1, device=device, augment=shift, progress=False)
loader = DataLoader(data, batch_size=batch, shuffle=True, generator=generator)
history = capsedu.fit(model, loader, epochs=1, device=device, lr=2e-3, lr_schedule="onecycle",
                      augment=shift, progress=False)
print(json.dumps({"images_per_second": len(data) / history["train_seconds"][0],
                  "version": capsedu.__version__, "file": capsedu.__file__}))
"""


def run_child(pythonpath: Path, batch: int, device: str) -> dict:
    env = dict(os.environ, PYTHONPATH=str(pythonpath))
    out = subprocess.run([sys.executable, "-c", CHILD, str(batch), device], env=env,
                         capture_output=True, text=True, check=True, cwd=tempfile.gettempdir())
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--baseline-ref", default="7f4c842", help="git commit to compare against")
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[32, 128])
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds per batch size")
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args(argv)
    load_before = os.getloadavg()
    results: dict = {"baseline": args.baseline_ref, "device": args.device, "cpu": cpu_model()}
    with tempfile.TemporaryDirectory(prefix="capsedu-baseline-") as tmp:
        worktree = Path(tmp) / "baseline"
        subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(worktree),
                        args.baseline_ref], check=True, capture_output=True)
        try:
            for batch in args.batch_sizes:
                runs: dict[str, list[float]] = {"baseline": [], "current": []}
                for round_ in range(args.rounds):
                    order = ["baseline", "current"] if round_ % 2 == 0 else ["current", "baseline"]
                    for name in order:
                        path = worktree if name == "baseline" else REPO
                        info = run_child(path, batch, args.device)
                        assert Path(info["file"]).is_relative_to(path), info
                        runs[name].append(info["images_per_second"])
                    print(f"b{batch} round {round_ + 1}: baseline {runs['baseline'][-1]:.0f}, "
                          f"current {runs['current'][-1]:.0f} img/s", flush=True)
                results[f"b{batch}"] = {name: statistics.median(v) for name, v in runs.items()}
        finally:
            subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(worktree)],
                           check=False, capture_output=True)
    results["load_before"], results["load_after"] = load_before, os.getloadavg()
    print(f"\nCapsNetConfig.cpu() through capsedu.fit, {args.device} ({results['cpu']}), 2 threads, "
          f"medians of {args.rounds} alternating runs; load average before "
          f"{tuple(round(x, 2) for x in load_before)}, after "
          f"{tuple(round(x, 2) for x in results['load_after'])}")
    print("| batch | baseline img/s | current img/s | speed-up |\n| --- | --- | --- | --- |")
    for batch in args.batch_sizes:
        row = results[f"b{batch}"]
        print(f"| {batch} | {row['baseline']:.0f} | {row['current']:.0f} | "
              f"{row['current'] / row['baseline']:.2f}x |")
    return results


if __name__ == "__main__":
    main()

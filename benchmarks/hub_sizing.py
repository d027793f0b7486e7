r"""What one learner costs on a JupyterHub: each lesson's kernel memory and CPU time, the install size.

    CAPSEDU_DATA=/path/to/data .venv/bin/python -m benchmarks.hub_sizing          # every lesson
    .venv/bin/python -m benchmarks.hub_sizing 03 07                                # some lessons
    .venv/bin/python -m benchmarks.hub_sizing --recorded     # what `make execute` recorded last

Each lesson runs top to bottom in a fresh kernel in the learner profile
(:func:`coursetools.execute.execute`, into a temporary folder: the committed lessons are not
touched); the kernel reports its peak resident memory and its CPU time (all threads). The script
then measures the environment in ``.venv``: in all, and the part that only CUDA needs (the
``nvidia`` libraries, ``triton`` and torch's CUDA libraries), which a CPU-only install from
PyTorch's CPU index (``pip install torch --index-url https://download.pytorch.org/whl/cpu``) does
not bring. The load average before and after is printed beside the figures.

Shape legend: none (no tensor shapes of its own).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def folder_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def install_sizes(venv: Path) -> dict[str, float]:
    r"""Gibibytes: the whole environment, and the parts that only a CUDA build of torch needs."""
    site = next(venv.glob("lib/python3*/site-packages"))
    cuda_folders = [*site.glob("nvidia*"), *site.glob("triton")]
    cuda = sum(folder_bytes(p) for p in cuda_folders if p.is_dir())
    torch_cuda = sum(p.stat().st_size for p in (site / "torch" / "lib").glob("*cuda*"))
    gib = 2 ** 30
    return {"venv": folder_bytes(venv) / gib, "cuda_only": (cuda + torch_cuda) / gib,
            "torch": folder_bytes(site / "torch") / gib}


def recorded(path: Path) -> dict:
    r"""How ``make execute`` last ran the lesson at ``path`` (its ``metadata.capsedu.execution``)."""
    import nbformat

    execution = nbformat.read(path, as_version=4).metadata.get("capsedu", {}).get("execution")
    if not execution:
        raise SystemExit(f"{path.stem} has no recorded execution: run `make execute` first")
    return execution


def main(argv: list[str] | None = None) -> list[dict]:
    from coursetools.execute import execute, lessons

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("lessons", nargs="*", help="lesson numbers or names (default: all)")
    parser.add_argument("--venv", type=Path, default=REPO / ".venv")
    parser.add_argument("--recorded", action="store_true",
                        help="read the figures `make execute` stored in each lesson instead of re-running")
    args = parser.parse_args(argv)
    load = os.getloadavg()
    rows = []
    if args.recorded:
        rows = [{"lesson": path.stem, **recorded(path)} for path in lessons(args.lessons)]
    else:
        with tempfile.TemporaryDirectory(prefix="capsedu-hub-") as out:
            for path in lessons(args.lessons):
                info = execute(path, out_dir=Path(out))
                rows.append({"lesson": path.stem, **info})
                print(f"{path.stem}: {info['seconds']:.0f} s", file=sys.stderr, flush=True)
    sizes = install_sizes(args.venv)
    print(f"\n{rows[0]['cpu']}, {rows[0]['cpu_count']} CPUs, torch {rows[0]['torch']}; load average "
          f"{tuple(round(x, 2) for x in load)} before, {tuple(round(x, 2) for x in os.getloadavg())} after")
    print("| lesson | wall time | kernel CPU time | kernel peak memory |\n| --- | --- | --- | --- |")
    for row in rows:
        print(f"| `{row['lesson']}` | {row['seconds']:.0f} s | {row['kernel_cpu_seconds']:.0f} s | "
              f"{row['kernel_peak_rss_mib']} MiB |")
    print(f"\nenvironment {sizes['venv']:.1f} GiB, of which torch {sizes['torch']:.1f} GiB; the CUDA-only "
          f"parts (nvidia libraries, triton, torch's CUDA libraries) {sizes['cuda_only']:.1f} GiB: a "
          f"CPU-only install is about {sizes['venv'] - sizes['cuda_only']:.1f} GiB")
    return rows


if __name__ == "__main__":
    main()

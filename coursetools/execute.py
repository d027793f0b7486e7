r"""Execute lessons in the learner profile and record what produced their outputs.

    python -m coursetools.execute --stale          # every lesson whose outputs are stale
    python -m coursetools.execute 03 07            # lessons by number (or path)
    python -m coursetools.execute --check          # list the stale lessons; exit 1 if any
    python -m coursetools.execute --all --out-dir /tmp/run   # time every lesson, keep the repo

Each lesson runs top to bottom in a fresh kernel (nbclient, the widget state stored so the book
can draw it), without ``CAPSEDU_FAST`` (``--fast`` sets it). Its ``.ipynb`` gets the outputs and,
in ``metadata.capsedu``, the lesson's fingerprint (:mod:`coursetools.fingerprint`) and how it
was executed (profile, seconds, processor, load average, torch version). A lesson is *stale* when
its stored fingerprint differs from the current one; the test suite fails on stale lessons. Run
it with the course's canonical data (``CAPSEDU_DATA`` holding the complete official MNIST); it refuses
to record a fingerprint made with other data unless ``--out-dir`` sends the results elsewhere.

Shape legend: none (no tensor shapes of its own).
"""

from __future__ import annotations

import argparse
import html
import json
import os
import platform
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

import nbformat
from nbclient import NotebookClient

from capsedu.training.profile import FAST_ENV
from coursetools.figure_audit import AUDIT_ENV, audited_kernels, logged_problems
from coursetools.fingerprint import (
    CANONICAL_DATA,
    data_identity,
    differences,
    lesson_fingerprint,
    stored_fingerprint,
)

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
PROBE = ("import json, resource\n"
         "_usage = resource.getrusage(resource.RUSAGE_SELF)\n"
         "print('CAPSEDU-KERNEL-USAGE', json.dumps({'peak_rss_mib': _usage.ru_maxrss / 1024, "
         "'cpu_seconds': _usage.ru_utime + _usage.ru_stime}))")


def lessons(names: list[str] | None = None) -> list[Path]:
    r"""Lesson notebooks matching ``names`` (numbers like ``03``, stems, or paths); all by default."""
    every = sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
    if not names:
        return every
    chosen = []
    for name in names:
        path = Path(name)
        matches = [path] if path.suffix == ".ipynb" and path.is_file() else [
            p for p in every if p.stem == name or p.stem.startswith(f"{name}_")]
        if not matches:
            raise SystemExit(f"no lesson matches {name!r}; lessons: {[p.stem for p in every]}")
        chosen += matches
    return chosen


def stale(paths: list[Path]) -> dict[Path, list[str]]:
    r"""The lessons among ``paths`` whose stored fingerprint is not today's, with what changed."""
    found = {}
    for path in paths:
        changes = differences(stored_fingerprint(path), lesson_fingerprint(path))
        if changes:
            found[path] = changes
    return found


# Each inline figure is stored as PNG (what JupyterLab and the website show) and as PDF (vector:
# the website's figures for slides, book/_ext/slide_figures.py, print at any size). Figures drawn
# into widgets keep the PNG only (drop_pdf_from_widgets): the site embeds the widget state in the page.
FIGURE_FORMATS = ("png", "pdf")
PDF = "application/pdf"


def drop_pdf_from_widgets(notebook: nbformat.NotebookNode) -> int:
    r"""Remove the PDF copies of figures from the stored widget state (output widgets' outputs);
    return how many were removed."""
    state = notebook.metadata.get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {})
    removed = 0
    for model in state.get("state", {}).values():
        for output in model.get("state", {}).get("outputs", []) or []:
            if isinstance(output, dict) and PDF in output.get("data", {}):
                del output["data"][PDF]
                removed += 1
    return removed


# matplotlib's font cache for the kernels, inside this environment: the shared one in ~/.cache
# may have been written by another install (a clone since deleted) and name font files that are
# gone - each figure then prints "findfont: ... not found" into the lesson's stored outputs
MPL_CACHE = Path(sys.prefix) / "var" / "capsedu-matplotlib"


@contextmanager
def _profile(fast: bool):
    r"""The kernel's environment: the profile, the font cache, and the figure audit's log (yielded)."""
    before = {name: os.environ.get(name) for name in (FAST_ENV, "MPLCONFIGDIR", "IPYTHONDIR", AUDIT_ENV)}
    os.environ.pop(FAST_ENV, None)
    if fast:
        os.environ[FAST_ENV] = "1"
    MPL_CACHE.mkdir(parents=True, exist_ok=True)
    os.environ["MPLCONFIGDIR"] = str(MPL_CACHE)
    try:
        with tempfile.TemporaryDirectory(prefix="capsedu-execute-") as folder:
            os.environ.update(audited_kernels(Path(folder), figure_formats=FIGURE_FORMATS))
            yield Path(os.environ[AUDIT_ENV])
    finally:
        for name, value in before.items():
            os.environ.pop(name, None)
            if value is not None:
                os.environ[name] = value


def _cpu() -> str:
    cpuinfo = Path("/proc/cpuinfo")
    lines = cpuinfo.read_text().splitlines() if cpuinfo.exists() else []
    return next((line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")),
                platform.processor() or "unknown processor")


def _widget_text(model_id: str, state: dict) -> str | None:
    r"""A tqdm progress bar's final state as text (prefix |bar| suffix), or None for other widgets."""
    box = state.get(model_id, {})
    children = [state.get(child.removeprefix("IPY_MODEL_"), {})
                for child in box.get("state", {}).get("children", [])]
    if box.get("model_name") != "HBoxModel" or [c.get("model_name") for c in children] != \
            ["HTMLModel", "FloatProgressModel", "HTMLModel"]:
        return None
    prefix, progress, suffix = (c["state"] for c in children)
    done = int(10 * progress.get("value", 0) / max(progress.get("max", 1), 1e-12))
    text = f"{prefix.get('value', '')}|{'█' * done}{' ' * (10 - done)}|{suffix.get('value', '')}"
    return html.unescape(text).replace("\u2007", " ")


def finish_progress_bars(notebook: nbformat.NotebookNode) -> int:
    r"""Give every stored progress bar's plain-text fallback the bar's final state (what the widget
    shows), instead of the 0 % it was first displayed with; return how many were finished."""
    state = notebook.metadata.get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {})
    finished = 0
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            view = output.get("data", {}).get("application/vnd.jupyter.widget-view+json")
            text = view and _widget_text(view["model_id"], state.get("state", {}))
            if text:
                output["data"]["text/plain"] = text
                finished += 1
    return finished


def execute(path: Path, *, fast: bool = False, out_dir: Path | None = None,
            timeout: int = 1800) -> dict:
    r"""Run lesson ``path`` and write it (to ``out_dir`` if given); return how it was executed."""
    import torch

    notebook = nbformat.read(path, as_version=4)
    notebook.cells.append(nbformat.v4.new_code_cell(PROBE))  # the kernel's peak memory and CPU time
    load_before = os.getloadavg()
    start = time.perf_counter()
    with _profile(fast) as figure_log:
        client = NotebookClient(notebook, timeout=timeout, kernel_name="python3",
                                resources={"metadata": {"path": str(path.parent)}})
        client.execute()
        figure_problems = logged_problems(figure_log)
    seconds = time.perf_counter() - start
    probe = notebook.cells.pop()
    finish_progress_bars(notebook)
    drop_pdf_from_widgets(notebook)
    usage = json.loads(probe.outputs[0]["text"].split("CAPSEDU-KERNEL-USAGE", 1)[1])
    data = data_identity()
    execution = {"profile": "fast" if fast else "learner", "seconds": round(seconds, 1),
                 "kernel_cpu_seconds": round(usage["cpu_seconds"], 1),
                 "kernel_peak_rss_mib": round(usage["peak_rss_mib"]), "cpu": _cpu(),
                 "cpu_count": os.cpu_count(), "load_average_before": [round(x, 2) for x in load_before],
                 "load_average_after": [round(x, 2) for x in os.getloadavg()],
                 "torch": torch.__version__, "python": platform.python_version(),
                 "figure_problems": figure_problems}
    target = path if out_dir is None else out_dir / path.name
    if out_dir is None and (fast or data != CANONICAL_DATA):
        raise SystemExit(f"{path.name} ran with {'the fast profile' if fast else f'data {data}'}, not "
                         f"the learner profile and the canonical data {CANONICAL_DATA}: its outputs "
                         "are not stored; use --out-dir to keep such a run elsewhere")
    notebook.metadata["capsedu"] = {"fingerprint": lesson_fingerprint(path, data),
                                    "execution": execution}
    target.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(notebook, target)
    return execution


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m coursetools.execute",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("lessons", nargs="*", help="lesson numbers, names or .ipynb paths")
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--stale", action="store_true", help="only lessons whose outputs are stale")
    group.add_argument("--check", action="store_true", help="list stale lessons; exit 1 if any")
    group.add_argument("--all", action="store_true", help="every lesson, stale or not")
    parser.add_argument("--fast", action="store_true", help="the fast profile (CAPSEDU_FAST=1)")
    parser.add_argument("--out-dir", type=Path, default=None,
                        help="write executed notebooks here instead of over the lessons")
    args = parser.parse_args(argv)
    chosen = lessons(args.lessons)
    if args.check or args.stale:
        found = stale(chosen)
        for path, changes in found.items():
            print(f"{path.stem}: stale ({'; '.join(changes[:4])}"
                  f"{'; ...' if len(changes) > 4 else ''})")
        if args.check:
            print("all lessons are up to date" if not found else
                  "re-execute them with `make execute` (python -m coursetools.execute --stale)")
            return 1 if found else 0
        chosen = list(found)
    failed = False  # a figure broke the colour rules (coursetools.figure_audit)
    for path in chosen:
        print(f"executing {path.stem} ...", flush=True)
        info = execute(path, fast=args.fast, out_dir=args.out_dir)
        print(f"  {path.stem}: {info['seconds']:.0f} s ({info['profile']} profile), kernel "
              f"{info['kernel_cpu_seconds']:.0f} s CPU and {info['kernel_peak_rss_mib']} MiB peak, load "
              f"{info['load_average_before'][0]:.1f} -> {info['load_average_after'][0]:.1f}",
              flush=True)
        for problem in info["figure_problems"]:
            print(f"  figure audit: {problem}", flush=True)
        failed = failed or bool(info["figure_problems"])
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

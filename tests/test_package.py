"""The package: importing it is cheap and quiet, and the module map (CONTRIBUTING.md) matches the tree."""

import json
import re
import subprocess
import sys

import pytest
from conftest import REPO

COMMAND_LINES = ["capsedu.zoo.train", "coursetools.execute", "coursetools.handouts",
                 "coursetools.grading"]


def test_import_capsedu_loads_no_command_line_and_starts_no_thread():
    code = ("import json, sys, threading\n"
            "before = threading.active_count()\n"
            "import torch  # torch's own threads are not capsedu's\n"
            "after_torch = threading.active_count()\n"
            "import capsedu\n"
            "print(json.dumps({'threads': threading.active_count() - after_torch,\n"
            "                  'modules': sorted(m for m in sys.modules if m.startswith('capsedu')),\n"
            "                  'widgets': 'ipywidgets' in sys.modules,\n"
            "                  'torchvision': 'torchvision' in sys.modules}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    found = json.loads(out.stdout.strip().splitlines()[-1])
    assert found["threads"] == 0
    assert found["modules"] == ["capsedu"], "import capsedu loads its names lazily (PEP 562), none at once"
    assert not set(COMMAND_LINES) & set(found["modules"]), found["modules"]
    assert not found["widgets"] and "capsedu.explore.widgets" not in found["modules"]
    assert not found["torchvision"], "importing torchvision costs every kernel ~7 s: import it where it is used"
    # each command line really is one: `python -m NAME --help` prints its usage (run as __main__
    # by runpy, all in one process, so that torch is imported once)
    runner = ("import contextlib, io, runpy, sys\n"
              f"for name in {COMMAND_LINES!r}:\n"
              "    sys.argv, out = [name, '--help'], io.StringIO()\n"
              "    with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):\n"
              "        runpy.run_module(name, run_name='__main__', alter_sys=True)\n"
              "    print(name, 'usage:' in out.getvalue())\n")
    lines = subprocess.run([sys.executable, "-c", runner], capture_output=True, text=True, check=True,
                           cwd=REPO).stdout.split("\n")
    assert [f"{name} True" for name in COMMAND_LINES] == [line for line in lines if line.startswith(("capsedu.", "coursetools."))]


def test_the_readme_module_map_lists_every_module_and_nothing_else():
    readme = (REPO / "CONTRIBUTING.md").read_text()
    mapped = set(re.findall(r"^\| `(capsedu/[\w/]+\.py)` \|", readme, flags=re.MULTILINE))
    tree = {str(p.relative_to(REPO)) for p in (REPO / "capsedu").rglob("*.py")
            if p.name != "__init__.py" or p.parent.name == "capsedu"}
    assert mapped == tree, f"only in CONTRIBUTING.md: {sorted(mapped - tree)}; only in the tree: {sorted(tree - mapped)}"


def test_the_folders_the_command_lines_default_to_are_the_repositorys():
    from capsedu.zoo import shipped
    from coursetools import execute, fingerprint, handouts

    assert handouts.LESSONS == execute.NOTEBOOKS == REPO / "notebooks"
    assert sorted(handouts.LESSONS.glob("[0-9][0-9]_*.ipynb")), "no lessons where handouts looks"
    assert fingerprint.PACKAGE == REPO / "capsedu"
    assert shipped.WEIGHTS_DIR == REPO / "capsedu" / "zoo" / "weights" and shipped.WEIGHTS_DIR.is_dir()
    assert shipped.STUDIES_DIR.is_dir()


# The public API before the package's names became lazy (0.2.0), each still importable.
API_0_2 = ["BaselineCNN", "CNNConfig", "CapsNet", "CapsNetConfig", "CapsNetOutput", "CheckpointError",
           "DataFileError", "DigitCaps", "FreshPairs", "Loss", "MNISTData", "MultiMNIST", "NetworkConfig",
           "PairTargets", "PrimaryCaps", "batch_loader", "capsnet_loss", "choose", "default_device",
           "deterministic_algorithms", "dynamic_routing", "eval_mode", "evaluate", "fast_profile", "fit",
           "learner_subset", "load_checkpoint", "load_mnist", "load_offline", "margin_loss", "mask_capsules",
           "pair_accuracy", "predict", "pretrained", "pretrained_metrics", "random_shift",
           "reconstruction_loss", "register_network", "save_checkpoint", "set_seed", "squash"]


def test_every_public_name_loads_from_its_module_and_unknown_names_are_refused():
    import capsedu

    assert set(API_0_2) <= set(capsedu.__all__) and set(capsedu.__all__) <= set(dir(capsedu))
    for name in capsedu.__all__:
        value = getattr(capsedu, name)
        assert getattr(value, "__name__", name) == name or not callable(value), name
    assert capsedu.nets.squash.squash is capsedu.squash  # subpackages load on use too
    with pytest.raises(AttributeError, match="no_such_name"):
        getattr(capsedu, "no_such_name")  # noqa: B009

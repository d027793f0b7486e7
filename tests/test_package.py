"""The package: importing it is cheap and quiet, and the module map (CONTRIBUTING.md) matches the tree."""

import json
import re
import subprocess
import sys

import pytest
from conftest import REPO

pytestmark = pytest.mark.tools

COMMAND_LINES = ["coursetools.train_zoo", "coursetools.execute", "coursetools.handouts",
                 "coursetools.grading", "coursetools.workspace", "coursetools.readme_tables",
                 "coursetools.training_record"]


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
    from coursetools import execute, fingerprint, handouts, train_zoo

    assert handouts.LESSONS == execute.NOTEBOOKS == REPO / "notebooks"
    assert sorted(handouts.LESSONS.glob("[0-9][0-9]_*.ipynb")), "no lessons where handouts looks"
    assert fingerprint.PACKAGE == REPO / "capsedu"
    assert shipped.WEIGHTS_DIR == REPO / "capsedu" / "zoo" / "weights" and shipped.WEIGHTS_DIR.is_dir()
    assert shipped.STUDIES_DIR.is_dir()
    assert train_zoo.WEIGHTS_DIR == REPO / "capsedu" / "zoo" / "weights"  # the source tree's
    assert train_zoo.TRIES == REPO / "benchmarks" / "tries.json" and train_zoo.TRIES.is_file()


# The public API before the package's names became lazy (0.2.0), each still importable.
API_0_2 = ["BaselineCNN", "CNNConfig", "CapsNet", "CapsNetConfig", "CapsNetOutput", "CheckpointError",
           "DataFileError", "DigitCaps", "FreshPairs", "Loss", "MNISTData", "MultiMNIST", "NetworkConfig",
           "PairTargets", "PrimaryCaps", "batch_loader", "capsnet_loss", "choose", "default_device",
           "deterministic_algorithms", "dynamic_routing", "eval_mode", "evaluate", "fast_profile", "fit",
           "learner_subset", "load_checkpoint", "load_mnist", "load_offline", "margin_loss", "mask_capsules",
           "pair_accuracy", "predict", "pretrained", "pretrained_metrics", "random_shift",
           "reconstruction_loss", "register_network", "save_checkpoint", "set_seed", "squash"]


@pytest.mark.unit  # in-process, the package alone (the file's other tests start processes)
def test_every_public_name_loads_from_its_module_and_unknown_names_are_refused():
    import capsedu

    assert set(API_0_2) <= set(capsedu.__all__) and set(capsedu.__all__) <= set(dir(capsedu))
    for name in capsedu.__all__:
        value = getattr(capsedu, name)
        assert getattr(value, "__name__", name) == name or not callable(value), name
    assert capsedu.nets.squash.squash is capsedu.squash  # subpackages load on use too
    with pytest.raises(AttributeError, match="no_such_name"):
        getattr(capsedu, "no_such_name")  # noqa: B009


WHEEL_CHECK = """
import json, pathlib, sys
import capsedu
from importlib import metadata
model = capsedu.pretrained("capsnet")  # the shipped weights travel in the wheel, checksum checked
files = [str(f) for f in metadata.files("capsedu")]
print(json.dumps({"file": capsedu.__file__, "version": capsedu.__version__,
                  "metadata_version": metadata.version("capsedu"), "kind": model.kind,
                  "licences": sorted(f for f in files if "licenses" in f),
                  "studies": any("zoo/studies/" in f for f in files)}))
"""


def test_the_wheel_installs_and_imports_in_a_fresh_venv(tmp_path):
    """`pip wheel .` gives a wheel that installs into a new virtual environment and works there
    without the repository: its weights, studies and licences travel with it. The new venv borrows
    torch and the other dependencies from this one (a .pth line), so no download is needed."""
    import shutil
    import site
    import venv

    source = tmp_path / "source"  # what a clone holds: no egg-info left by an editable install
    source.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE", "LICENSE-CONTENT.md"):
        shutil.copy(REPO / name, source / name)
    shutil.copytree(REPO / "capsedu", source / "capsedu", ignore=shutil.ignore_patterns("__pycache__"))
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                            "--wheel-dir", str(tmp_path / "wheels"), str(source)],
                           capture_output=True, text=True, cwd=tmp_path)
    assert built.returncode == 0, built.stderr[-3000:]
    (wheel,) = (tmp_path / "wheels").glob("capsedu-*.whl")
    venv.create(tmp_path / "fresh", with_pip=False)
    python = tmp_path / "fresh" / "bin" / "python"
    installed = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install",
                                "--no-deps", "--no-index", str(wheel)], capture_output=True, text=True)
    assert installed.returncode == 0, installed.stderr[-3000:]
    fresh_site = next((tmp_path / "fresh" / "lib").glob("python*/site-packages"))
    (fresh_site / "borrowed_dependencies.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    out = subprocess.run([str(python), "-c", WHEEL_CHECK], capture_output=True, text=True, cwd=tmp_path, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    found = json.loads(out.stdout.strip().splitlines()[-1])
    assert found["file"].startswith(str(fresh_site)), f"capsedu came from {found['file']}, not the wheel"
    assert found["version"] == found["metadata_version"] and found["kind"] == "capsnet"
    assert {p.rsplit("/", 1)[-1] for p in found["licences"]} == {"LICENSE", "LICENSE-CONTENT.md"}
    assert found["studies"]

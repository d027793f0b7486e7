"""The course's tools never write their records into an installed package: `python -m
coursetools.train_zoo --out-dir` and every benchmark's `--out` (or `--tries`) inside a
`site-packages` folder are refused before any work starts (coursetools.out_paths)."""

import importlib

import pytest

from coursetools.out_paths import outside_installed_packages

pytestmark = pytest.mark.tools

WRITERS = {"adaptive_attacks": "--out", "affnist_study": "--out", "compare_networks": "--out",
           "deep_capsules": "--out", "detach_inner": "--out", "robustness": "--out",
           "recipe_search": "--tries"}


def test_a_path_inside_an_installed_package_is_refused_and_others_pass(tmp_path):
    inside = tmp_path / "lib" / "python3.11" / "site-packages" / "capsedu" / "zoo" / "studies" / "x.json"
    with pytest.raises(ValueError, match=r"--out must be outside installed packages .* inside site-packages"):
        outside_installed_packages(inside, "--out")
    assert outside_installed_packages(tmp_path / "studies" / "x.json", "--out") == (tmp_path / "studies" / "x.json")


@pytest.mark.parametrize("name", sorted(WRITERS))
def test_every_benchmark_that_records_refuses_an_installed_package_before_any_work(name, tmp_path, monkeypatch):
    module = importlib.import_module(f"benchmarks.{name}")
    for attribute in ("run", "study", "measure", "train_shipped", "load_mnist"):  # the work, if reached
        if hasattr(module, attribute):
            monkeypatch.setattr(module, attribute, lambda *a, **k: pytest.fail(f"{name} worked before refusing"))
    inside = tmp_path / "site-packages" / "capsedu" / "zoo" / "studies" / f"{name}.json"
    flag = WRITERS[name]
    argv = (["capsnet", flag, str(inside)] if name == "recipe_search" else [flag, str(inside)])
    with pytest.raises(ValueError, match=rf"{flag} must be outside installed packages"):
        module.main(argv)
    assert not inside.parent.exists()

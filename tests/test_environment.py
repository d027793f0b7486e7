"""pyproject.toml (pip) and environment.yml (conda) must describe one and the same environment."""

import re

import pytest
import tomllib
import yaml
from conftest import REPO
from packaging.requirements import Requirement

pytestmark = pytest.mark.tools

CONDA_TO_PYPI = {"pytorch": "torch"}  # conda-forge names that differ from PyPI names
NOT_PACKAGES = {"python", "pip"}


def normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pyproject_requirements() -> dict[str, str]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    lines = project["dependencies"] + [r for extra in project["optional-dependencies"].values() for r in extra]
    return {normalise(Requirement(line).name): str(Requirement(line).specifier) for line in lines}


def conda_requirements() -> dict[str, str]:
    env = yaml.safe_load((REPO / "environment.yml").read_text())
    found = {}
    for item in env["dependencies"]:
        if isinstance(item, dict):  # the pip: section installs the project itself
            assert item.get("pip") == ["-e ."], f"unexpected pip section {item}"
            continue
        name, _, spec = re.match(r"([A-Za-z0-9_.\-]+)\s*(([<>=!~].*)?)$", item).groups()
        if normalise(name) not in NOT_PACKAGES:
            found[CONDA_TO_PYPI.get(normalise(name), normalise(name))] = str(Requirement(f"x{spec}").specifier)
    return found


def test_same_packages_and_bounds():
    pip, conda = pyproject_requirements(), conda_requirements()
    assert sorted(pip) == sorted(conda), (
        f"only in pyproject: {sorted(set(pip) - set(conda))}; only in environment.yml: {sorted(set(conda) - set(pip))}")
    for name in pip:
        assert pip[name] == conda[name], f"{name}: pyproject says {pip[name]!r}, environment.yml {conda[name]!r}"


def test_every_declared_requirement_is_installed_in_a_version_it_allows():
    """The environment the tests run in is the one pyproject.toml declares (a bound nobody meets
    here, or a package missing from the install, fails)."""
    from importlib.metadata import PackageNotFoundError, version

    problems = []
    for name, specifier in pyproject_requirements().items():
        try:
            installed = version(name)
        except PackageNotFoundError:
            problems.append(f"{name} is declared but not installed")
            continue
        if not Requirement(f"{name}{specifier}").specifier.contains(installed, prereleases=True):
            problems.append(f"{name} {installed} does not satisfy {specifier}")
    assert not problems, problems


def test_every_third_party_import_of_capsedu_is_a_declared_dependency():
    import ast
    import sys
    from importlib.metadata import packages_distributions

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    declared = {normalise(Requirement(line).name) for line in project["dependencies"]}
    declared |= {normalise(Requirement(line).name) for line in no_deps_packages()}
    modules = set()
    for path in (REPO / "capsedu").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                modules |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules.add(node.module.split(".")[0])
    third_party = modules - set(sys.stdlib_module_names) - {"capsedu", "__future__"}
    distributions = packages_distributions()
    undeclared = {m: distributions.get(m) for m in third_party
                  if not {normalise(d) for d in distributions.get(m, [m])} & declared}
    assert not undeclared, f"capsedu imports modules whose packages pyproject.toml does not list: {undeclared}"


def no_deps_packages() -> list[str]:
    r"""The Makefile's NO_DEPS: packages installed without their dependencies."""
    makefile = (REPO / "Makefile").read_text()
    return re.search(r"^NO_DEPS := (.+)$", makefile, re.M).group(1).split()


def test_packages_installed_without_dependencies_are_pinned_alike_everywhere():
    """The Makefile's NO_DEPS is what environment.yml, the hub image and capsedu's error message
    tell to install, and what is installed here."""
    from importlib.metadata import version

    from capsedu.explore.attacks import TORCHATTACKS

    pins = no_deps_packages()
    assert pins == [TORCHATTACKS]
    for path in ("environment.yml", "classroom/z2jh/Dockerfile", "postBuild", "README.md", "CONTRIBUTING.md"):
        assert f"pip install --no-deps {' '.join(pins)}" in (REPO / path).read_text(), path
    for pin in pins:
        requirement = Requirement(pin)
        assert requirement.specifier.contains(version(requirement.name)), f"{pin}: {version(requirement.name)} installed"

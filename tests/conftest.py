"""Shared fixtures: small seeded tensors and the location of the shared MNIST test split."""

from __future__ import annotations

import copy
import dataclasses
import os
from pathlib import Path

import pytest
import torch

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

TIERS = ("unit", "lessons", "browser", "artefacts")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    r"""Every test gets one tier: nbval's notebook cells are ``lessons``, a test file's
    ``pytestmark`` names its tier, and everything else is ``unit``."""
    for item in items:
        if item.path.suffix == ".ipynb":
            item.add_marker(pytest.mark.lessons)
        elif not any(item.get_closest_marker(tier) for tier in TIERS):
            item.add_marker(pytest.mark.unit)


@pytest.fixture
def all_threads():
    """torch's own thread count for a test that runs whole networks over thousands of images
    (the unit tests' single thread is restored after it)."""
    torch.set_num_threads(max(1, os.cpu_count() or 1))
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
        strong.digits.W.mul_(50)
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

"""Every exercise check, whatever its lesson: a stub gets a hint, the learner's RNG is left alone,
grading mode raises, quiet prints nothing."""

import importlib
import inspect
import math
import pkgutil

import pytest
import torch

import capsedu.course.checks as checks_package
from capsedu.course.checks import CheckFailed
from capsedu.course.checks._kit import STUB_HINT

pytestmark = pytest.mark.unit


def _all_checks() -> dict:
    found = {}
    for info in pkgutil.iter_modules(checks_package.__path__):
        module = importlib.import_module(f"{checks_package.__name__}.{info.name}")
        found |= {name: fn for name, fn in inspect.getmembers(module, inspect.isfunction)
                  if name.startswith("check_") and fn.__module__ == module.__name__}
    return found


CHECKS = _all_checks()
TAKES_A_MODULE = {"check_decoder"}  # the learner passes an nn.Module, not a function


def stub(*args, **kwargs):
    raise NotImplementedError("write your solution here, then run the check below")


@pytest.fixture
def call():
    def run(name, answer, **kwargs):
        return CHECKS[name](answer, **kwargs)  # every check takes the learner's answer alone
    return run


def test_every_lesson_module_has_checks():
    assert len(CHECKS) >= 20
    takes_more = [name for name, fn in CHECKS.items()
                  if len([p for p in inspect.signature(fn).parameters.values()
                          if p.default is inspect.Parameter.empty]) != 1]
    assert not takes_more, f"checks that need more than the learner's answer: {takes_more}"
    assert all("quiet" in inspect.signature(fn).parameters for fn in CHECKS.values()), \
        [name for name, fn in CHECKS.items() if "quiet" not in inspect.signature(fn).parameters]


@pytest.mark.parametrize("name", sorted(CHECKS))
def test_a_stub_gets_a_hint_and_leaves_the_random_state_alone(name, call, capsys):
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    result = call(name, stub)
    assert torch.equal(torch.rand(3), expected), f"{name} changed the learner's random state"
    assert not result and result.message.startswith("❌")
    if name not in TAKES_A_MODULE:
        assert STUB_HINT in result.message, result.message
    assert capsys.readouterr().out == result.message + "\n"  # printed once


@pytest.mark.parametrize("name", sorted(CHECKS))
def test_quiet_prints_nothing_and_grading_mode_raises(name, call, capsys, monkeypatch):
    call(name, stub, quiet=True)
    assert capsys.readouterr().out == ""
    monkeypatch.setenv("CAPSEDU_GRADING", "1")
    with pytest.raises(CheckFailed):
        call(name, stub, quiet=True)


def test_grading_mode_lets_a_right_answer_pass(monkeypatch):
    from capsedu.course.checks.squash import check_input_length_for

    monkeypatch.setenv("CAPSEDU_GRADING", "yes")
    assert check_input_length_for(lambda p: math.sqrt(p / (1 - p)), quiet=True)

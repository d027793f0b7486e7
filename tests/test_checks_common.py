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
        assert result.mistake == "stub", result.mistake
    module = CHECKS[name].__module__.rsplit(".", 1)[1]
    assert result.check == f"{module}.{name}", result.check  # the check a report counts it under
    assert capsys.readouterr().out == result.message + "\n"  # printed once


@pytest.mark.parametrize("name", sorted(CHECKS))
def test_quiet_prints_nothing_and_grading_mode_raises(name, call, capsys, monkeypatch):
    call(name, stub, quiet=True)
    assert capsys.readouterr().out == ""
    monkeypatch.setenv("CAPSEDU_GRADING", "1")
    with pytest.raises(CheckFailed):
        call(name, stub, quiet=True)


@pytest.fixture
def notebook_display(monkeypatch):
    r"""A kernel's display as the checks see it in a notebook: what they display, with metadata."""
    import IPython
    import IPython.display

    shown = []
    monkeypatch.setattr(IPython, "get_ipython", lambda: object())
    monkeypatch.setattr(IPython.display, "display",
                        lambda data, raw, metadata: shown.append((data["text/plain"], metadata)))
    return shown


@pytest.mark.parametrize(("answer", "mistake"), [
    (lambda p: math.sqrt(p / (1 - p)), "passed"),
    (lambda p: p / (1 - p), "squared-length"),  # a named mistake
    (lambda p: p, "other-values"),  # a wrong answer no named mistake matches
    (stub, "stub"),
    (lambda p: p.nope, "raised"),
])
def test_grading_mode_shows_each_verdict_with_its_check_and_mistake_id(answer, mistake, notebook_display,
                                                                       monkeypatch, capsys):
    from capsedu.course.checks._kit import TRACE_KEY
    from capsedu.course.checks.squash import check_input_length_for

    monkeypatch.setenv("CAPSEDU_GRADING", "1")
    try:
        result = check_input_length_for(answer)
    except CheckFailed as error:
        result = str(error)
    assert len(notebook_display) == 1 and capsys.readouterr().out == ""
    text, metadata = notebook_display[0]
    assert metadata == {TRACE_KEY: {"check": "squash.check_input_length_for", "mistake": mistake}}
    assert text.startswith("✅" if mistake == "passed" else "❌") and text.endswith(str(result).split("— ")[-1])


def test_outside_grading_mode_a_check_prints_and_displays_nothing(notebook_display, capsys):
    from capsedu.course.checks.squash import check_input_length_for

    result = check_input_length_for(lambda p: p / (1 - p))
    assert notebook_display == [] and capsys.readouterr().out == result.message + "\n"
    assert (result.check, result.mistake) == ("squash.check_input_length_for", "squared-length")


def test_mistake_ids_are_kebab_case_and_leave_the_kits_own_alone():
    from capsedu.course.checks._kit import mistake, other

    assert mistake("eps-outside-root", "text").mistake == "eps-outside-root"
    for bad in ("Eps", "eps_outside", "passed", "other-values", ""):
        with pytest.raises(ValueError, match="mistake_id"):
            mistake(bad, "text")
    with pytest.raises(ValueError, match="kind must be one of"):
        other("wrongness", "text")


def test_grading_mode_lets_a_right_answer_pass(monkeypatch):
    from capsedu.course.checks.squash import check_input_length_for

    monkeypatch.setenv("CAPSEDU_GRADING", "yes")
    assert check_input_length_for(lambda p: math.sqrt(p / (1 - p)), quiet=True)

"""Tiers by construction (tests/tiers.py): a test without exactly one tier stops the run before
any test runs, naming it; a test's own tier wins over its file's, and ``-m`` selects by the tier
that won. Each check runs pytest in this process (pytester) on a few generated test files."""

import pytest

pytest_plugins = ("pytester",)
pytestmark = pytest.mark.unit

CONFTEST = """
import pytest
from tiers import settle_tiers


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items):
    settle_tiers(items)
"""
MARKERS = "[pytest]\nmarkers =\n    unit\n    tools\n    lessons\n    browser\n    artefacts\n"


@pytest.fixture
def suite(pytester: pytest.Pytester) -> pytest.Pytester:
    r"""A folder whose conftest settles tiers as tests/conftest.py does."""
    pytester.makeconftest(CONFTEST)
    pytester.makeini(MARKERS)
    return pytester


def selected(suite: pytest.Pytester, expression: str) -> list[str]:
    r"""The test ids ``-m expression`` selects (collection only)."""
    result = suite.runpytest("--collect-only", "-q", "-m", expression)
    assert result.ret == pytest.ExitCode.OK, result.stderr.str()
    return [line for line in result.outlines if "::" in line]


def test_a_test_without_a_tier_stops_the_run_naming_it(suite):
    suite.makepyfile(test_some="""
        import pytest

        def test_untiered():
            pass

        @pytest.mark.unit
        def test_tiered():
            pass
    """)
    result = suite.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*every test needs exactly one tier*",
                                 "*test_some.py::test_untiered: no tier*pytestmark*"])
    assert "test_tiered" not in result.stderr.str() and "passed" not in result.stdout.str()


def test_two_tiers_on_one_test_stop_the_run(suite):
    suite.makepyfile(test_some="""
        import pytest

        pytestmark = pytest.mark.unit

        @pytest.mark.tools
        @pytest.mark.browser
        def test_both():
            pass
    """)
    result = suite.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([
        "*test_some.py::test_both: test_both carries 2 tiers (browser, tools)*"])


def test_the_closest_tier_wins_and_minus_m_selects_by_it(suite):
    suite.makepyfile(test_some="""
        import pytest

        pytestmark = pytest.mark.unit

        def test_quick():
            pass

        @pytest.mark.tools
        def test_slow():
            pass

        class TestInTheBrowser:
            pytestmark = pytest.mark.browser

            def test_page(self):
                pass

            @pytest.mark.artefacts
            def test_screenshot(self):
                pass
    """)
    assert selected(suite, "unit") == ["test_some.py::test_quick"]
    assert selected(suite, "not unit") == ["test_some.py::test_slow",
                                           "test_some.py::TestInTheBrowser::test_page",
                                           "test_some.py::TestInTheBrowser::test_screenshot"]
    assert selected(suite, "tools") == ["test_some.py::test_slow"]
    assert selected(suite, "browser") == ["test_some.py::TestInTheBrowser::test_page"]
    in_class = "test_some.py::TestInTheBrowser::test_screenshot"
    assert selected(suite, "artefacts and not browser") == [in_class]


RULES_CONFTEST = """
import pytest
from tiers import UnitRules, settle_tiers


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items):
    settle_tiers(items)


def pytest_configure(config):
    config.pluginmanager.register(UnitRules(cpu_seconds=0.3), "unit-rules")  # scaled down: a quick check
"""


@pytest.mark.tools  # its inner tools test starts a process, which a unit test may not
def test_the_unit_tier_is_measured_tool_imports_processes_and_cpu_time_fail(pytester):
    """tests/tiers.py's UnitRules: a unit test that imports the repository's tools, starts a
    process or spends more CPU than the bound fails, naming which; the same code in a tools test
    passes, and a quick unit test passes."""
    pytester.makeconftest(RULES_CONFTEST)
    pytester.makeini(MARKERS)
    pytester.makepyfile(test_some="""
        import subprocess
        import time

        import pytest

        pytestmark = pytest.mark.unit

        def burn(seconds):
            end = time.process_time() + seconds
            while time.process_time() < end:
                pass

        def test_quick():
            assert sum(range(10)) == 45

        def test_imports_a_tool():
            from coursetools import out_paths  # noqa: F401

        def test_starts_a_process():
            subprocess.run(["true"], check=True)

        def test_burns_cpu():
            burn(0.6)

        @pytest.mark.tools
        def test_a_tool_may():
            subprocess.run(["true"], check=True)
            burn(0.6)
    """)
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=2, failed=3)
    result.stdout.fnmatch_lines(["*test_imports_a_tool: a unit test imports coursetools;*",
                                 "*test_starts_a_process: a unit test started a process*",
                                 "*test_burns_cpu: a unit test ran * s of CPU*"])

r"""Exercise checks for the lessons.

Each check runs the learner's function or value against ``capsedu``'s reference, prints one
clear message - a pass, or a *specific* hint about what is probably wrong - and returns a
:class:`CheckResult` (truthy when passed). One module per lesson topic; this file re-exports them.
"""

from capsedu.course.checks._report import CheckResult, report

__all__ = ["CheckResult", "report"]

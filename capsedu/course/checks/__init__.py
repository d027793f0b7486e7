r"""Exercise checks for the lessons, one module per lesson topic.

Each check runs the learner's function against ``capsedu``'s reference, prints one clear message -
a pass, or a *specific* hint about what is probably wrong, also when the function is still the
handout's unfinished stub - and returns a :class:`CheckResult` (truthy when passed). In grading
mode (``CAPSEDU_GRADING=1``) a failed check raises :class:`CheckFailed` as well, so that an
autograder such as nbgrader counts it. The vocabulary they share is in :mod:`._kit`.
"""

from capsedu.course.checks._kit import CheckFailed, CheckResult, grading

__all__ = ["CheckFailed", "CheckResult", "grading"]

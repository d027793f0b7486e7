r"""The one way a check reports back to the learner."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CheckResult:
    r"""Outcome of an exercise check: ``passed`` and the message shown to the learner."""

    passed: bool
    message: str

    def __bool__(self) -> bool:
        return self.passed

    def __repr__(self) -> str:
        return self.message

    def _ipython_display_(self) -> None:
        r"""Show nothing as a cell's last value: the message was already printed once."""


def report(passed: bool, success: str, hint: str, *, quiet: bool = False) -> CheckResult:
    r"""Print ``✅ success`` or ``❌ hint`` and return the :class:`CheckResult`."""
    message = f"✅ {success}" if passed else f"❌ {hint}"
    if not quiet:
        print(message)
    return CheckResult(passed, message)

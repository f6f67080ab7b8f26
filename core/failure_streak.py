"""A streak of calls that fail the same way (a full disk, a store that is down): the caller says
so when the streak starts, or when its reason changes, and when it ends; not at every failed call,
which was a traceback per tick or per decision for as long as the condition lasted."""

from __future__ import annotations


class FailureStreak:
    def __init__(self) -> None:
        self.failures = 0  # in the streak going on; 0: none
        self._reason: object = None

    def failed(self, reason: object = None) -> bool:
        """Count a failure; True when it is news: the first of a streak, or another ``reason``
        than the last failure's (callers that pass none say a streak once)."""
        news = self.failures == 0 or reason != self._reason
        self.failures += 1
        self._reason = reason
        return news

    def ended(self) -> int:
        """A call worked: the failures of the streak it ends (0: there was none to end)."""
        ended, self.failures = self.failures, 0
        return ended


__all__ = ["FailureStreak"]

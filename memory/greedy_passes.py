"""A greedy de-duplication pass, kept between calls so the next call over more reports resumes it.

The pass (``analyst_summary.representatives``) walks reports sorted by (at_ms, report_id) and
keeps one when it is distinct from every report kept before it: whether the report at position
``i`` is kept depends only on the reports before it and on itself. So a pass over a list is also
the pass over each of its prefixes (the positions kept below the prefix's length), and a later
call whose sorted list shares a prefix with a remembered pass (reports equal field by field)
takes that prefix's kept positions and goes on from there: the same positions as from scratch.
A call that shares nothing starts from scratch; the answer never depends on what is remembered.

The analysts' process warms the passes between rolls from the reports it writes (``extend``),
one pass per analyst, ticker and UTC day: the market analyst's day of ~180 reports per ticker,
which the roll after midnight summarises, is then walked before the replay waits for that roll.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

from memory.analyst_model import AnalystReport

Bag = TypeVar("Bag")


def sort_key(report: AnalystReport) -> tuple[int, str]:
    return report.at_ms, report.report_id


class _Pass(Generic[Bag]):
    __slots__ = ("bags", "kept", "key", "last", "reports")

    def __init__(self, key: tuple[str, str, str]) -> None:
        self.key = key  # (analyst, ticker, day) it is extended for
        self.reports: list[AnalystReport] = []  # sorted, strictly increasing sort keys
        self.kept: list[int] = []  # positions in ``reports``, increasing
        self.bags: list[Bag] = []  # the kept reports' bags, in the same order
        self.last: tuple[int, str] | None = None


class GreedyPasses(Generic[Bag]):
    """Remembered passes, keyed by their first report's id (at most ``kept`` of them)."""

    def __init__(
        self,
        bag_of: Callable[[str], Bag],
        distinct: Callable[[Bag, Sequence[Bag]], bool],
        kept: int = 64,
    ) -> None:
        self._bag_of = bag_of
        self._distinct = distinct
        self._kept = kept
        self._by_first: dict[str, _Pass[Bag]] = {}
        self._open: dict[tuple[str, str, str], _Pass[Bag]] = {}  # the passes still extended

    def extend(self, report: AnalystReport) -> None:
        """Walk one more written report: its day's pass goes on when the report sorts after the
        pass's last one (a report written out of order starts that day's pass afresh)."""
        key = (report.analyst, report.ticker, report.day)
        at = sort_key(report)
        walked = self._open.get(key)
        if walked is None or walked.last is None or not at > walked.last:
            walked = self._start(key, report.report_id)
        bag = self._bag_of(report.content)
        if self._distinct(bag, walked.bags):
            walked.kept.append(len(walked.reports))
            walked.bags.append(bag)
        walked.reports.append(report)
        walked.last = at

    def _start(self, key: tuple[str, str, str], first_id: str) -> _Pass[Bag]:
        started: _Pass[Bag] = _Pass(key)
        self._by_first.pop(first_id, None)  # re-inserted as the newest
        while len(self._by_first) >= self._kept:
            oldest = self._by_first.pop(next(iter(self._by_first)))
            if self._open.get(oldest.key) is oldest:
                del self._open[oldest.key]
        self._by_first[first_id] = started
        self._open[key] = started
        return started

    def resume(self, ordered: Sequence[AnalystReport]) -> tuple[int, list[int], list[Bag]]:
        """``(n, kept, bags)``: the pass over ``ordered[:n]`` (positions into ``ordered`` and their
        bags, new lists), ``n`` the longest prefix ``ordered`` shares with the pass remembered
        under its first report's id (0 and empty lists: none)."""
        walked = self._by_first.get(ordered[0].report_id) if ordered else None
        if walked is None:
            return 0, [], []
        shared = 0
        for mine, theirs in zip(walked.reports, ordered, strict=False):
            if mine is not theirs and mine != theirs:
                break
            shared += 1
        cut = bisect.bisect_left(walked.kept, shared)
        return shared, walked.kept[:cut], walked.bags[:cut]


__all__ = ["GreedyPasses", "sort_key"]

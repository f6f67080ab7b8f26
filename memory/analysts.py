"""The four analysts: one controller interface, each with its own timescale, cadence and lookback.

| analyst     | timescale | writes a report                        | today's report         | lookback |
|-------------|-----------|----------------------------------------|------------------------|----------|
| market      | intraday  | at every decision                      | latest of the day      | 1 day    |
| derivatives | daily     | the first decision of the day          | first of the day       | 7 days   |
| sentiment   | daily     | the first decision of the day          | first of the day       | 7 days   |
| regime      | slow      | first of the day, and on every change  | latest of the week     | 30 days  |

Summaries per (analyst, ticker): ``pre_open`` of a day from the lookback *before* it (history and
persistent risks), ``post_close`` from the lookback *including* it (today's events, guidance for
tomorrow). ``AnalystDesk.roll`` makes the ones that are due: called before each decision, so on the
first decision after 00:00 UTC it closes yesterday and opens today (live or replay alike, on the
injected clock; at most 8 model calls per ticker and day).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from memory.analyst_model import (
    AnalystName,
    AnalystReport,
    DaySummary,
    MemorySummary,
    Session,
    Timescale,
    shift_day,
    utc_day,
)
from memory.analyst_reports import (
    Built,
    derivatives_report,
    market_report,
    regime_labels,
    regime_report,
    sentiment_report,
)
from memory.analyst_store import AnalystStore
from memory.analyst_summary import ModelSummariser, SummaryRequest, make_summary

log = logging.getLogger(__name__)

Pick = Literal["latest_of_day", "first_of_day", "latest_of_week"]
Cadence = Literal["every", "daily", "on_change"]
Builder = Callable[[Mapping[str, Any], str, Mapping[str, str]], Built | None]
Labeller = Callable[[Mapping[str, Any], str], dict[str, str] | None]


@dataclass(frozen=True)
class AnalystSpec:
    name: AnalystName
    timescale: Timescale
    lookback_days: int
    cadence: Cadence
    pick: Pick
    build: Builder
    #: an ``on_change`` analyst's labels as ``build`` gives them (None: no report), without the
    #: rest of the report: what tells whether the report is due
    labels: Labeller | None = None


SPECS: tuple[AnalystSpec, ...] = (
    AnalystSpec(
        "market", "intraday", 1, "every", "latest_of_day", lambda s, t, _p: market_report(s, t)
    ),
    AnalystSpec(
        "derivatives",
        "daily",
        7,
        "daily",
        "first_of_day",
        lambda s, t, _p: derivatives_report(s, t),
    ),
    AnalystSpec(
        "sentiment", "daily", 7, "daily", "first_of_day", lambda s, t, _p: sentiment_report(s, t)
    ),
    AnalystSpec("regime", "slow", 30, "on_change", "latest_of_week", regime_report, regime_labels),
)


class AnalystController:
    """One analyst: its reports in, its day summaries out. The same interface for all four."""

    def __init__(self, spec: AnalystSpec, store: AnalystStore) -> None:
        self.spec = spec
        self._store = store

    @property
    def name(self) -> AnalystName:
        return self.spec.name

    def save_report(self, report: AnalystReport) -> bool:
        if report.analyst != self.spec.name:
            raise ValueError(f"a {report.analyst} report given to the {self.spec.name} analyst")
        return self._store.save_report(report)

    def observe(self, sent: Mapping[str, Any], ticker: str, at_ms: int) -> AnalystReport | None:
        """Write a report from the snapshot when this analyst's cadence calls for one."""
        day = utc_day(at_ms)
        previous = self._store.latest_report(self.name, ticker)
        if previous is not None and previous.day == day:
            if self.spec.cadence == "daily":
                return None
            if self.spec.cadence == "on_change" and self.spec.labels is not None:
                labels_now = self.spec.labels(sent, ticker)
                if labels_now is None or labels_now == previous.labels:
                    return None  # what building the report would have ended in
        built = self.spec.build(sent, ticker, previous.labels if previous else {})
        if built is None:
            return None
        content, confidence, figures, labels = built
        if (
            self.spec.cadence == "on_change"
            and previous is not None
            and previous.day == day
            and previous.labels == labels
        ):
            return None
        report = AnalystReport(
            report_id=AnalystReport.make_id(self.name, ticker, at_ms),
            analyst=self.name,
            ticker=ticker,
            day=day,
            at_ms=at_ms,
            content=content[:2000],
            confidence=confidence,
            timescale=self.spec.timescale,
            figures=figures,
            labels=labels,
        )
        self.save_report(report)
        return report

    def today_report(self, ticker: str, day: str) -> AnalystReport | None:
        """The report this analyst's timescale calls today's."""
        if self.spec.pick == "latest_of_week":
            week = self._store.reports(self.name, ticker, shift_day(day, -6), day)
            return week[-1] if week else None
        reports = self._store.reports(self.name, ticker, day, day)
        if not reports:
            return None
        return reports[0] if self.spec.pick == "first_of_day" else reports[-1]

    def lookback_days(self, day: str, session: Session) -> tuple[str, str]:
        """pre_open: the lookback's days before ``day``; post_close: the lookback up to ``day``."""
        last = shift_day(day, -1) if session == "pre_open" else day
        return shift_day(last, 1 - self.spec.lookback_days), last

    def lookback(self, ticker: str, day: str, session: Session) -> list[AnalystReport]:
        first, last = self.lookback_days(day, session)
        return self._store.reports(self.name, ticker, first, last)

    async def summarise(
        self,
        ticker: str,
        day: str,
        session: Session,
        now_ms: int,
        model: ModelSummariser | None,
        reports: Sequence[AnalystReport] | None = None,
    ) -> DaySummary:
        """``reports``: the lookback's, when the caller has read them already."""
        request = SummaryRequest(
            analyst=self.name,
            ticker=ticker,
            day=day,
            session=session,
            reports=tuple(self.lookback(ticker, day, session) if reports is None else reports),
        )
        summary = await make_summary(request, now_ms=now_ms, model=model)
        self._store.put_summary(summary)
        return summary

    def memory_summary(self, ticker: str, day: str, session: Session) -> MemorySummary:
        """The seed's rule: pre_open -> today's report empty, the day's pre_open summary and the
        previous day's post_close; post_close -> today's report and both of today's summaries."""
        pre = self._store.summary(self.name, ticker, day, "pre_open")
        post_day = shift_day(day, -1) if session == "pre_open" else day
        post = self._store.summary(self.name, ticker, post_day, "post_close")
        today = self.today_report(ticker, day) if session == "post_close" else None
        newest = max((s.made_at_ms for s in (pre, post) if s is not None), default=None)
        return MemorySummary(
            analyst=self.name,
            ticker=ticker,
            day=day,
            session=session,
            today_report=today.content if today else "",
            summary_pre_open=pre.text if pre else "",
            summary_post_close=post.text if post else "",
            newest_ms=newest,
        )


class AnalystDesk:
    """The four controllers over one store, for a set of tickers."""

    def __init__(
        self,
        store: AnalystStore,
        tickers: Sequence[str],
        model: ModelSummariser | None = None,
        specs: Sequence[AnalystSpec] = SPECS,
    ) -> None:
        self.store = store
        self.tickers = tuple(tickers)
        self.model = model
        self.controllers = tuple(AnalystController(spec, store) for spec in specs)
        self._rolled_day: str | None = None
        #: (ticker, day) -> the views a decision reads; summaries change only when rolled
        self._views: dict[tuple[str, str], list[MemorySummary]] = {}

    def observe(
        self,
        sent: Mapping[str, Any],
        at_ms: int,
        encoded: Callable[[], bytes] | None = None,
    ) -> list[AnalystReport]:
        """Each analyst's report of each ticker, when its cadence calls for one. ``encoded``:
        ``sent``'s JSON when the caller has it (a desk in another process is sent that instead
        of the mapping; this one reads the mapping)."""
        written = []
        for controller in self.controllers:
            for ticker in self.tickers:
                report = controller.observe(sent, ticker, at_ms)
                if report is not None:
                    written.append(report)
        return written

    @property
    def rolled_day(self) -> str | None:
        """The UTC day of the last roll that went through (None: none yet)."""
        return self._rolled_day

    def roll_due(self, now_ms: int) -> bool:
        """``roll(now_ms)`` would do more than return: the first roll of a UTC day (or a retry
        after a roll that raised)."""
        return utc_day(now_ms) != self._rolled_day

    def flush(self) -> None:
        """Commit what the store holds back (a non-durable store batches reports)."""
        self.store.flush()

    async def roll(self, now_ms: int) -> list[DaySummary]:
        """Make the summaries due at ``now_ms``: yesterday's post_close and today's pre_open, each
        once (the store remembers across restarts). Cheap when nothing is due."""
        day = utc_day(now_ms)
        if self._rolled_day == day:
            return []
        made = []
        read: dict[tuple[Any, ...], list[AnalystReport]] = {}
        for controller in self.controllers:
            for ticker in self.tickers:
                for due_day, session in _due(day):
                    if self.store.has_summary(controller.name, ticker, due_day, session):
                        continue
                    reports = self._lookback(controller, ticker, due_day, session, read)
                    if not reports:
                        continue  # nothing to summarise yet (a fresh state dir)
                    made.append(
                        await controller.summarise(
                            ticker, due_day, session, now_ms, self.model, reports
                        )
                    )
        if made:
            self.store.flush()  # a non-durable store held them back: one commit for all
        self._rolled_day = day
        self._views.clear()
        return made

    def _lookback(
        self,
        controller: AnalystController,
        ticker: str,
        day: str,
        session: Session,
        read: dict[tuple[Any, ...], list[AnalystReport]],
    ) -> list[AnalystReport]:
        """Yesterday's post_close and today's pre_open read the same days (the lookback ending
        yesterday): read once while the reports are unchanged, instead of twice each."""
        key = (
            controller.name,
            ticker,
            *controller.lookback_days(day, session),
            self.store.reports_version(),
        )
        if key not in read:
            read[key] = controller.lookback(ticker, day, session)
        return read[key]

    def summaries_for(self, ticker: str, now_ms: int) -> list[MemorySummary]:
        """What a decision during the day reads: the pre_open view (today's pre_open summary and
        yesterday's post_close); today's own figures are in the snapshot itself."""
        day = utc_day(now_ms)
        key = (ticker, day)
        if key not in self._views:
            self._views[key] = [c.memory_summary(ticker, day, "pre_open") for c in self.controllers]
        return self._views[key]


def _due(day: str) -> tuple[tuple[str, Session], ...]:
    return ((shift_day(day, -1), "post_close"), (day, "pre_open"))

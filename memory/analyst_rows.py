"""analysts.db's rows as a person or a bad write may have left them: SQLite keeps any value in any
column (a ``figures`` that is not JSON, a confidence of text, an ``at_ms`` of 1.5), so each row read
is checked as memory.db's are (``memory.sqlite_rows``): a row that cannot be one is left out of
every read with one warning naming it, and stays in the file. One such row used to end every
decision's analysts in a traceback (the roll reads every analyst's lookback), so the prompt went
without all four until the row was mended.
"""

from __future__ import annotations

from typing import Any

import orjson
from pydantic import ValidationError

from core.clock import RECORDING_YEARS, is_recording_time
from memory.analyst_model import AnalystReport, DaySummary, utc_day
from memory.sqlite_rows import LeftOut, Unreadable, finite, text_or_none


def report_of(row: tuple[Any, ...], left_out: LeftOut) -> AnalystReport | None:
    """The report of an ``analyst_reports`` row, None (warned once) if it cannot be one."""
    report_id, analyst, ticker, day, at_ms, timescale, confidence, content, figures, labels = row
    try:
        _instant(at_ms, "at_ms")
        # the day is what every read keys on (the newest report, a day's first): another day
        # than its time's would be the newest for ever, and a daily analyst write at each decision
        if day != utc_day(at_ms):
            raise Unreadable(f"day {day!r:.40} is not the UTC day of at_ms {at_ms}")
        return AnalystReport(
            report_id=report_id,
            analyst=analyst,
            ticker=ticker,
            day=day,
            at_ms=at_ms,
            timescale=timescale,
            confidence=finite(confidence, "confidence"),
            content=text_or_none(content, "content"),
            figures=_json(figures, "figures"),
            labels=_json(labels, "labels"),
        )
    except (Unreadable, ValidationError) as exc:
        left_out("analyst_reports", report_id, exc)
        return None


def summary_of(body: object, key: tuple[str, ...], left_out: LeftOut) -> DaySummary | None:
    """The summary of an ``analyst_summaries`` body, None (warned once) if it cannot be one."""
    try:
        if not isinstance(body, str):
            raise Unreadable(f"body is {type(body).__name__}, not text")
        summary = DaySummary.model_validate_json(body)
        _instant(summary.made_at_ms, "made_at_ms")
    except (Unreadable, ValidationError) as exc:
        left_out("analyst_summaries", "/".join(key), exc)
        return None
    return summary


def _instant(value: object, column: str) -> None:
    if not is_recording_time(value):
        raise Unreadable(f"{column} is {value!r:.40}, not a time within {RECORDING_YEARS}")


def _json(value: object, column: str) -> Any:
    if not isinstance(value, str):
        raise Unreadable(f"{column} is {type(value).__name__}, not JSON text")
    try:
        return orjson.loads(value)
    except orjson.JSONDecodeError as exc:
        raise Unreadable(f"{column} is not JSON: {exc}") from None

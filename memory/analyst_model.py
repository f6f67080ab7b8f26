"""What the four analysts keep: reports, day summaries, and the view a decision reads.

An analyst writes ``AnalystReport``s at its own timescale and summarises them at the UTC day's open
(``pre_open``, 00:00 UTC: history and persistent risks) and close (``post_close``: today's events and
guidance for tomorrow). Crypto trades around the clock, so "the day" is the UTC calendar day.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, date, datetime, timedelta
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

AnalystName = Literal["market", "derivatives", "sentiment", "regime"]
Timescale = Literal["intraday", "daily", "slow"]
Session = Literal["pre_open", "post_close"]
#: how a summary was made: a model call, the reports' numbers, or their plain concatenation
SummaryPath = Literal["model", "deterministic", "concatenation"]
SignalStrength = Literal["high", "medium", "low"]

ANALYSTS: tuple[AnalystName, ...] = ("market", "derivatives", "sentiment", "regime")
SESSIONS: tuple[Session, ...] = ("pre_open", "post_close")


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class AnalystReport(_Frozen):
    report_id: str
    analyst: AnalystName
    ticker: str
    day: str  # YYYY-MM-DD, UTC
    at_ms: int
    content: str = Field(min_length=1, max_length=2000)
    confidence: float = Field(ge=0.0, le=1.0)
    timescale: Timescale
    #: the numbers the content was written from (None: unavailable); summaries read these
    figures: dict[str, float | None] = Field(default_factory=dict)
    #: labels the content names (a regime, a trend) that are not numbers
    labels: dict[str, str] = Field(default_factory=dict)

    @staticmethod
    def make_id(analyst: str, ticker: str, at_ms: int) -> str:
        digest = hashlib.sha256(f"{analyst}|{ticker}|{at_ms}".encode()).hexdigest()[:16]
        return f"r-{digest}"


class DaySummary(_Frozen):
    analyst: AnalystName
    ticker: str
    day: str
    session: Session
    text: str
    path: SummaryPath
    signal_strength: SignalStrength | None  # None: the concatenation path does not grade
    report_ids: tuple[str, ...]  # the representative reports it was made from
    made_at_ms: int
    detail: str = ""  # why a fallback path was taken


class MemorySummary(_Frozen):
    """The seed's three fields: pre_open -> no today's report; post_close -> all three."""

    analyst: AnalystName
    ticker: str
    day: str
    session: Session
    today_report: str
    summary_pre_open: str
    summary_post_close: str
    #: made_at_ms of the newest summary shown (freshness), None when none
    newest_ms: int | None = None


DAY_MS = 86_400_000
#: the last day answered, as (its first ms, its name): every analyst asks at every decision,
#: and the decisions of a day all fall in it (UTC days are 86,400 s long in POSIX time)
_last_day: tuple[int, str] = (0, "1970-01-01")


def utc_day(at_ms: int) -> str:
    global _last_day
    start, day = _last_day
    if type(at_ms) is int and start <= at_ms < start + DAY_MS:
        return day
    day = datetime.fromtimestamp(at_ms / 1000, UTC).date().isoformat()
    if type(at_ms) is int:
        _last_day = (at_ms - at_ms % DAY_MS, day)
    return day


def day_start_ms(day: str) -> int:
    start = datetime.combine(date.fromisoformat(day), datetime.min.time(), tzinfo=UTC)
    return int(start.timestamp() * 1000)


def shift_day(day: str, days: int) -> str:
    return (date.fromisoformat(day) + timedelta(days=days)).isoformat()

"""The run's activity: per UTC day and month, gate passes per layer, who decided.

Counted from the journal's decision, review and agent_failure lines (see ``report.figures``).
"""

from __future__ import annotations

import functools
from collections import Counter, defaultdict
from datetime import UTC, datetime
from typing import Any, Final

from pydantic import BaseModel, ConfigDict

from agent.cost_accounting import USAGE_TOKEN_FIELDS
from report.metrics import MS_PER_DAY, Series


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class DayActivity(_Frozen):
    day: str  # YYYY-MM-DD, UTC
    decisions: int
    reviews: int  # the tracker's Claude position reviews
    agent_calls: int  # Claude calls by decisions and reviews (billed or tried)
    agent_failures: int  # agent_failure lines
    tokens: int
    cost_usd: float


class MonthSummary(_Frozen):
    month: str  # YYYY-MM, UTC
    active_days: int  # days with a journal line
    decisions: int
    reviews: int
    agent_calls: int
    agent_failures: int
    tokens: int
    cost_usd: float
    end_equity_usd: float | None  # the month's last equity point
    return_pct: float | None  # against the previous month's last point (the run's first)


class DeciderCount(_Frozen):
    decided_by: str
    decider_reason: str
    decisions: int


def gate_passes(decisions: list[dict[str, Any]]) -> Counter[str]:
    passes: Counter[str] = Counter()
    for record in decisions:
        for reason in record.get("trigger") or []:
            passes[str(reason).split(":", 1)[0]] += 1
    return passes


def day_of(at_ms: int) -> str:
    return _day_name(at_ms // MS_PER_DAY)


@functools.cache
def _day_name(day_number: int) -> str:
    """YYYY-MM-DD of a UTC day counted from the epoch (a year's 100k lines fall on 365 days)."""
    return datetime.fromtimestamp(day_number * 86_400, tz=UTC).strftime("%Y-%m-%d")


_DAY_FIELDS: Final = ("decisions", "reviews", "agent_calls", "agent_failures", "tokens", "cost_usd")


def day_activity(records: list[dict[str, Any]]) -> list[DayActivity]:
    """Per UTC day: decisions, Claude calls (decisions and position reviews), tokens, cost."""
    rows: dict[str, dict[str, float]] = defaultdict(lambda: dict.fromkeys(_DAY_FIELDS, 0.0))
    for record in records:
        kind = record.get("type", "decision")
        if "at_ms" not in record or kind not in {"decision", "review", "agent_failure"}:
            continue
        row = rows[day_of(int(record["at_ms"]))]
        if kind == "agent_failure":
            row["agent_failures"] += 1
            continue
        row["decisions"] += kind == "decision"
        row["reviews"] += kind == "review"
        usage = record.get("usage")
        row["agent_calls"] += _model_calls(record)
        if isinstance(usage, dict):
            row["tokens"] += sum(int(usage.get(k) or 0) for k in USAGE_TOKEN_FIELDS)
            row["cost_usd"] += float(usage.get("cost_usd") or 0.0)
    return [
        DayActivity(
            day=day,
            decisions=int(r["decisions"]),
            reviews=int(r["reviews"]),
            agent_calls=int(r["agent_calls"]),
            agent_failures=int(r["agent_failures"]),
            tokens=int(r["tokens"]),
            cost_usd=r["cost_usd"],
        )
        for day, r in sorted(rows.items())
    ]


def month_summaries(days: list[DayActivity], equity: Series) -> list[MonthSummary]:
    """The days' activity per UTC month, with each month's last equity point and its return."""
    activity: dict[str, list[DayActivity]] = defaultdict(list)
    for day in days:
        activity[day.day[:7]].append(day)
    month_end: dict[str, float] = {}
    for at_ms, value in equity:
        month_end[day_of(at_ms)[:7]] = value  # sorted input: the last one wins
    previous = equity[0][1] if equity else None
    summaries = []
    for month in sorted(activity.keys() | month_end.keys()):
        rows = activity.get(month, [])
        end = month_end.get(month)
        change = None
        if end is not None and previous is not None and previous > 0:
            change = (end / previous - 1.0) * 100.0
        previous = end if end is not None else previous
        summaries.append(
            MonthSummary(
                month=month,
                active_days=len(rows),
                decisions=sum(d.decisions for d in rows),
                reviews=sum(d.reviews for d in rows),
                agent_calls=sum(d.agent_calls for d in rows),
                agent_failures=sum(d.agent_failures for d in rows),
                tokens=sum(d.tokens for d in rows),
                cost_usd=sum(d.cost_usd for d in rows),
                end_equity_usd=end,
                return_pct=change,
            )
        )
    return summaries


def _called_claude(record: dict[str, Any]) -> bool:
    """A decision or review that asked Claude: it was billed or it lists tries."""
    return isinstance(record.get("usage"), dict) or bool(record.get("attempts"))


def _model_calls(record: dict[str, Any]) -> int:
    """Model calls behind one line: a debate's role calls, else one if it asked Claude."""
    raw = record.get("raw_decision")
    debate = raw.get("debate") if isinstance(raw, dict) else None
    if isinstance(debate, dict) and isinstance(debate.get("roles"), list):
        return len(debate["roles"])
    return int(_called_claude(record))


def decider_counts(decisions: list[dict[str, Any]]) -> list[DeciderCount]:
    counts = Counter(
        (str(r.get("decided_by") or "unknown"), str(r.get("decider_reason") or ""))
        for r in decisions
    )
    return [
        DeciderCount(decided_by=by, decider_reason=why, decisions=n)
        for (by, why), n in sorted(counts.items())
    ]

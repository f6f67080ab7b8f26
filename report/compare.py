"""Two run reports side by side (``vigil replay --compare runs/a runs/b``), with relative change.

Relative change = (b - a) / |a| x 100, in percent; "n/a" when either side is missing or a is 0.
For figures that are already percentages the absolute difference in points is shown as well,
since a relative change of a return near zero says little. The table opens with what each run was
asked (span, tickers, decider, seed, data dir, memory, config digest: "same", "differs", or "n/a"
where a run has no record) and shows buy-and-hold of each ticker beside the runs' own figures.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

from report.decision_diff import decision_change_lines
from report.figures import DeciderCount, Report, build_report
from report.memory_section import memory_compare_lines
from report.params import RunParameters

_Pick = Callable[[Report], float | int]

_FIGURES: Final = (
    # (label, Metrics field, is a percentage)
    ("start equity USD", "start_equity_usd", False),
    ("end equity USD", "end_equity_usd", False),
    ("total return %", "total_return_pct", True),
    ("CAGR %", "cagr_pct", True),
    ("Sharpe", "sharpe", False),
    ("Sortino", "sortino", False),
    ("max drawdown %", "max_drawdown_pct", True),
    ("turnover x", "turnover", False),
    ("trades", "trades", False),
    ("round trips", "round_trips", False),
    ("win rate %", "win_rate_pct", True),
    ("fees USD", "fees_usd", False),
    ("realised PnL USD", "realised_pnl_usd", False),
    ("exposure time %", "exposure_time_pct", True),
    ("span days", "span_days", False),
)
_HOLD_FIGURES: Final = (
    ("return %", "total_return_pct", True),
    ("max drawdown %", "max_drawdown_pct", True),
    ("Sharpe", "sharpe", False),
)


def compare_reports(a: Report, b: Report) -> str:
    """A plain-text table: figure, value in a, value in b, relative change (and points change)."""
    rows: list[tuple[str, str, str, str]] = []
    for label, field, is_pct in _FIGURES:
        rows.append(_row(label, getattr(a.metrics, field), getattr(b.metrics, field), is_pct))
    for ticker in sorted(set(a.buy_and_hold_figures) | set(b.buy_and_hold_figures)):
        hold_a, hold_b = a.buy_and_hold_figures.get(ticker), b.buy_and_hold_figures.get(ticker)
        for label, field, is_pct in _HOLD_FIGURES:
            rows.append(
                _row(
                    f"buy-and-hold {ticker} {label}",
                    getattr(hold_a, field) if hold_a is not None else None,
                    getattr(hold_b, field) if hold_b is not None else None,
                    is_pct,
                )
            )
    for label, pick in _activity_figures():
        rows.append(_row(label, pick(a), pick(b), False))
    for layer in sorted(set(a.gate_passes) | set(b.gate_passes)):
        rows.append(
            _row(f"gate passes {layer}", a.gate_passes.get(layer, 0), b.gate_passes.get(layer, 0))
        )
    for label, key in (
        ("memory insights read", "insights_read"),
        ("memory rule changes", "memory_rule_changes"),
    ):
        rows.append(_row(label, (a.memory or {}).get(key), (b.memory or {}).get(key)))
    for who in sorted({_who(d) for d in a.deciders} | {_who(d) for d in b.deciders}):
        rows.append(_row(f"decided by {who}", _decided(a, who), _decided(b, who)))
    header = ("figure", "a", "b", "change")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(4)]
    rows = [*_parameter_rows(a, b), *rows]
    lines = [f"a: {a.run_dir}", f"b: {b.run_dir}", ""]
    for row in [header, *rows]:
        lines.append(
            "  ".join(
                cell.ljust(widths[i]) if i == 0 else cell.rjust(widths[i])
                for i, cell in enumerate(row)
            ).rstrip()
        )
    why = memory_compare_lines(a.memory, b.memory)
    if why:
        lines += ["", *why]
    changes = decision_change_lines(Path(a.run_dir), Path(b.run_dir))
    if changes:
        lines += ["", *changes]
    return "\n".join(lines) + "\n"


def _parameter_rows(a: Report, b: Report) -> list[tuple[str, str, str, str]]:
    """What each run was asked, with "same" or "differs" (n/a where a run has no record)."""
    rows = []
    for label, pick in _PARAMETERS:
        text_a, text_b = pick(a.parameters), pick(b.parameters)
        same = "n/a" if "n/a" in (text_a, text_b) else ("same" if text_a == text_b else "differs")
        rows.append((label, text_a, text_b, same))
    return rows


def _span(p: RunParameters) -> str:
    if p.from_ms is None or p.to_ms is None:
        return "n/a"
    return f"{_day(p.from_ms)}..{_day(p.to_ms)}"


def _day(at_ms: int) -> str:
    return datetime.fromtimestamp(at_ms / 1000, UTC).strftime("%Y-%m-%dT%H:%MZ")


def _text(value: object) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, tuple):
        return ",".join(str(v) for v in value)
    return str(value)


_PARAMETERS: Final[tuple[tuple[str, Callable[[RunParameters], str]], ...]] = (
    ("span", _span),
    ("tickers", lambda p: _text(p.tickers)),
    ("decider", lambda p: _text(p.decider)),
    ("seed", lambda p: _text(p.seed)),
    ("data dir", lambda p: _text(p.data_dir)),
    ("memory", lambda p: _text(p.memory)),
    ("config digest", lambda p: _text(p.config_digest)),
)


def compare_runs(a_dir: Path, b_dir: Path) -> str:
    """``compare_reports`` of two run folders (raises ``RunFolderError`` naming what is missing)."""
    return compare_reports(build_report(a_dir), build_report(b_dir))


def relative_change_pct(a: float | None, b: float | None) -> float | None:
    """(b - a) / |a| x 100; None when a side is missing or a is zero."""
    if a is None or b is None or a == 0:
        return None
    return (b - a) / abs(a) * 100.0


def _row(
    label: str, a: float | int | None, b: float | int | None, is_pct: bool = False
) -> tuple[str, str, str, str]:
    change = relative_change_pct(a, b)
    text = "n/a" if change is None else f"{change:+.1f}%"
    if is_pct and a is not None and b is not None:
        text += f" ({b - a:+.2f} pts)"
    return label, _value(a), _value(b), text


def _value(value: float | int | None) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, int):
        return f"{value:,}"
    return f"{value:,.4f}"


def _activity_figures() -> list[tuple[str, _Pick]]:
    return [
        ("decisions", lambda r: sum(d.decisions for d in r.days)),
        ("decisions with the learner", lambda r: int(r.learning["decisions_with_learner"])),
        ("decisions the learner moved", lambda r: int(r.learning["moved_decisions"])),
        ("regime disagreements", lambda r: int(r.learning["regime_agreement"]["disagreed"])),
        ("reviews", lambda r: sum(d.reviews for d in r.days)),
        ("agent calls", lambda r: sum(d.agent_calls for d in r.days)),
        ("agent failures", lambda r: sum(d.agent_failures for d in r.days)),
        ("tokens", lambda r: sum(d.tokens for d in r.days)),
        ("agent cost USD", lambda r: sum(d.cost_usd for d in r.days)),
        ("agent calls per day", lambda r: _per_day(r, sum(d.agent_calls for d in r.days))),
        ("tokens per day", lambda r: _per_day(r, sum(d.tokens for d in r.days))),
        ("agent cost USD per day", lambda r: _per_day(r, sum(d.cost_usd for d in r.days))),
    ]


def _per_day(report: Report, total: float) -> float:
    """``total`` over the run's span in days (over one day for a run shorter than a day)."""
    days = report.metrics.span_days or 0.0
    return total / max(days, 1.0)


def _who(count: DeciderCount) -> str:
    if count.decider_reason:
        return f"{count.decided_by} ({count.decider_reason})"
    return count.decided_by


def _decided(report: Report, who: str) -> int:
    return sum(d.decisions for d in report.deciders if _who(d) == who)

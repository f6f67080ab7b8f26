"""The report page's tables: figures, run against buy-and-hold, parameters, months, days.

Every cell is escaped (``html.escape``): tickers and decision reasons are untrusted text. A value
that cannot be computed is "n/a", with the report's reason beside it.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Final

from report.cost import CostSummary
from report.figures import Report
from report.params import RunParameters


def fmt(value: float | int | None, unit: str = "", digits: int = 2) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, int):
        return f"{value:,}{unit}"
    return f"{value:,.{digits}f}{unit}"


def metrics_table(report: Report) -> str:
    m = report.metrics
    rows = [
        ("start equity", fmt(m.start_equity_usd, " USD"), "start_equity_usd"),
        ("end equity", fmt(m.end_equity_usd, " USD"), "end_equity_usd"),
        ("total return", fmt(m.total_return_pct, " %", 3), "total_return_pct"),
        ("CAGR", fmt(m.cagr_pct, " %"), "cagr_pct"),
        ("Sharpe (daily, 365 d)", fmt(m.sharpe), "sharpe"),
        ("Sortino (daily, 365 d)", fmt(m.sortino), "sortino"),
        ("max drawdown", fmt(m.max_drawdown_pct, " %", 3), "max_drawdown_pct"),
        ("turnover", fmt(m.turnover, " x", 3), "turnover"),
        ("trades (fills)", fmt(m.trades), "trades"),
        ("round trips", fmt(m.round_trips), "round_trips"),
        ("win rate", fmt(m.win_rate_pct, " %", 1), "win_rate_pct"),
        ("fees paid", fmt(m.fees_usd, " USD", 4), "fees_usd"),
        ("realised PnL (fees apart)", fmt(m.realised_pnl_usd, " USD", 4), "realised_pnl_usd"),
        ("exposure time", fmt(m.exposure_time_pct, " %", 1), "exposure_time_pct"),
        ("span", fmt(m.span_days, " days", 2), "span_days"),
        ("agent calls", fmt(sum(d.agent_calls for d in report.days)), ""),
        ("agent failures", fmt(sum(d.agent_failures for d in report.days)), ""),
        ("tokens", fmt(sum(d.tokens for d in report.days)), ""),
        ("agent cost", fmt(sum(d.cost_usd for d in report.days), " USD", 4), ""),
    ]
    body = [(label, value, report.unavailable.get(key, "")) for label, value, key in rows]
    return table(("figure", "value", "why n/a"), body)


def hold_table(report: Report) -> str:
    """The run's return, drawdown and ratios beside buy-and-hold of each ticker over the run."""
    m = report.metrics
    rows = [
        (
            "this run",
            fmt(m.total_return_pct, " %", 3),
            fmt(m.max_drawdown_pct, " %", 3),
            fmt(m.sharpe),
            fmt(m.sortino),
            "; ".join(f"{k}: {report.unavailable[k]}" for k in RATIOS if k in report.unavailable),
        )
    ]
    for ticker, hold in report.buy_and_hold_figures.items():
        rows.append(
            (
                f"buy-and-hold {ticker}",
                fmt(hold.total_return_pct, " %", 3),
                fmt(hold.max_drawdown_pct, " %", 3),
                fmt(hold.sharpe),
                fmt(hold.sortino),
                "; ".join(f"{k}: {v}" for k, v in sorted(hold.unavailable.items())),
            )
        )
    header = ("", "total return", "max drawdown", "Sharpe", "Sortino", "why n/a")
    return table(header, rows)


RATIOS: Final = ("sharpe", "sortino")


def parameters_table(params: RunParameters) -> str:
    span = "n/a"
    if params.from_ms is not None and params.to_ms is not None:
        span = f"{stamp(params.from_ms)} .. {stamp(params.to_ms)}"
    memory = None if params.memory is None else ("on" if params.memory else "off")
    rows = [
        ("span", span, "from_ms"),
        ("tickers", ", ".join(params.tickers) if params.tickers else "n/a", "tickers"),
        ("decider", params.decider or "n/a", "decider"),
        ("seed", "n/a" if params.seed is None else str(params.seed), "seed"),
        ("data dir", params.data_dir or "n/a", "data_dir"),
        ("memory", memory or "n/a", "memory"),
        ("config digest", params.config_digest or "n/a", "config_digest"),
    ]
    body = [(label, value, params.unavailable.get(key, "")) for label, value, key in rows]
    return f"<p class='note'>from {html.escape(params.source)}</p>" + table(
        ("parameter", "value", "why n/a"), body
    )


def months_table(report: Report) -> str:
    header = (
        "month",
        "end equity USD",
        "return",
        "active days",
        "decisions",
        "reviews",
        "agent calls",
        "agent failures",
        "tokens",
        "cost USD",
    )
    rows = [
        (
            m.month,
            fmt(m.end_equity_usd),
            "n/a" if m.return_pct is None else f"{m.return_pct:+,.2f} %",
            str(m.active_days),
            f"{m.decisions:,}",
            f"{m.reviews:,}",
            f"{m.agent_calls:,}",
            f"{m.agent_failures:,}",
            f"{m.tokens:,}",
            f"{m.cost_usd:.4f}",
        )
        for m in report.months
    ]
    return table(header, rows)


def days_table(report: Report) -> str:
    return table(
        ("day", "decisions", "reviews", "agent calls", "agent failures", "tokens", "cost USD"),
        [
            (
                d.day,
                str(d.decisions),
                str(d.reviews),
                str(d.agent_calls),
                str(d.agent_failures),
                str(d.tokens),
                f"{d.cost_usd:.4f}",
            )
            for d in report.days
        ],
    )


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    e = html.escape
    head = "".join(f"<th>{e(h)}</th>" for h in header)
    # a wide table scrolls inside its box instead of widening the page on a narrow window
    lines = [f"<div class='scroll'><table><thead><tr>{head}</tr></thead><tbody>"]
    for row in rows:
        cells = "".join(
            f"<td class='num'>{e(c)}</td>" if numeric(c) else f"<td>{e(c)}</td>" for c in row
        )
        lines.append(f"<tr>{cells}</tr>")
    if not rows:
        lines.append(f"<tr><td colspan='{len(header)}' class='note'>none</td></tr>")
    lines.append("</tbody></table></div>")
    return "".join(lines)


def numeric(text: str) -> bool:
    head = text.split(" ", maxsplit=1)[0].replace(",", "").lstrip("-+")
    return head.replace(".", "", 1).isdigit()


def stamp(at_ms: int) -> str:
    return datetime.fromtimestamp(at_ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%MZ")


def cost_table(summary: CostSummary) -> str:
    """Calls, tokens per call, cache share and dollars per day, per layer, model and decider."""
    rows = []
    for group, items in (
        ("layer", summary.by_layer),
        ("model", summary.by_model),
        ("decider", summary.by_decider),
        ("all", (summary.total,)),
    ):
        for row in items:
            calls = max(row.calls, 1)
            share = "n/a" if row.cache_share is None else f"{row.cache_share:.1%}"
            rows.append(
                (
                    f"{group}: {row.name}",
                    f"{summary.per_day(row.calls):,.1f}",
                    f"{row.all_input_tokens / calls:,.0f}",
                    f"{row.output_tokens / calls:,.0f}",
                    share,
                    f"{summary.per_day(row.cost_usd):,.4f}",
                )
            )
    return table(
        (
            "group",
            "calls / day",
            "input tokens / call",
            "output tokens / call",
            "cached input",
            "USD / day",
        ),
        rows,
    )

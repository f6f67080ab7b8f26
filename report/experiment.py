"""The experiment report of a sweep: the design's memory ON/OFF table, per cell, with deltas.

A cell is (tickers, decider, config override); its samples are the runs over periods x seeds. For
each cell and memory setting: the mean of total return, CAGR, Sharpe, max drawdown, turnover, and
(when a model decided) agent calls and dollars, with the equal-weight buy-and-hold return of the
cell's tickers over the same periods beside it. For each cell: ON - OFF per metric over the pairs
of runs that share period and seed, their mean and a 95 % percentile bootstrap interval
(``BOOTSTRAP_RESAMPLES`` resamples of the pairs, a fixed seed: the report is reproducible). A figure
no run could compute (CAGR under 30 days) is null with the reason; an interval needs 2 pairs.
Failed runs are listed with their reason and left out of every figure.
"""

from __future__ import annotations

import html
import json
import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Final, TypeGuard

import numpy as np

from core.jsonread import read_json_object
from state.atomic import atomic_write_bytes

BOOTSTRAP_RESAMPLES: Final = 2000
BOOTSTRAP_SEED: Final = 20250301
CONFIDENCE: Final = 0.95
METRICS: Final = (
    ("total_return_pct", "total return %"),
    ("cagr_pct", "CAGR %"),
    ("sharpe", "Sharpe"),
    ("max_drawdown_pct", "max drawdown %"),
    ("turnover", "turnover"),
    ("agent_calls", "calls"),
    ("cost_usd", "dollars"),
    ("buy_hold_return_pct", "buy & hold %"),
)
MODEL_ONLY: Final = frozenset({"agent_calls", "cost_usd"})


@dataclass(frozen=True)
class RunEntry:
    key: str
    run_dir: str
    period: str
    tickers: str
    decider: str
    memory: bool
    seed: int
    override: str
    status: str  # done | failed | not run
    reason: str | None = None


def run_figures(run_dir: Path) -> dict[str, float | None]:
    """The table's figures of one finished run, from its report.json (``report_figures``)."""
    figures = report_figures(read_json_object(run_dir / "report.json"))
    if figures is None:  # the sweep counts a run done only when this reads (``is_done``)
        raise ValueError(f"{run_dir / 'report.json'} is not a run report")
    return figures


def run_unavailable(run_dir: Path) -> dict[str, str]:
    """Why the run's report could not compute a figure (metric -> reason)."""
    reasons = (read_json_object(run_dir / "report.json") or {}).get("unavailable")
    if not isinstance(reasons, dict):
        return {}
    return {k: v for k, v in reasons.items() if isinstance(v, str)}


def report_figures(report: dict[str, Any] | None) -> dict[str, float | None] | None:
    """The table's figures of a report.json, or None when it is not a run report as
    ``report.figures.Report`` writes one: a section missing or of the wrong kind, a metric missing
    or neither null nor a number within ``FIGURE_MAX``, a month's calls that are not a count or
    dollars under 0, a ticker's buy-and-hold return that is not a number, or sums past
    ``FIGURE_MAX`` (a hand edit, a truncated copy, another tool's file). Such a run is redone by
    the sweep, never averaged in: a missing month was 0 calls and $0, and a null buy-and-hold
    left the cell's equal-weight figure to the other tickers."""
    if report is None:
        return None
    metrics, holds, months = (report.get(k) for k in ("metrics", "buy_and_hold_figures", "months"))
    if not (
        isinstance(metrics, dict)
        and isinstance(report.get("unavailable"), dict)
        and isinstance(holds, dict)
        and isinstance(months, list)
        and all(isinstance(part, dict) for part in (*holds.values(), *months))
    ):
        return None
    if not (
        all(
            n in metrics and (metrics[n] is None or _is_number(metrics[n])) for n in _REPORT_METRICS
        )
        and all(_is_number(f.get("total_return_pct")) for f in holds.values())
        and all(_is_count(m.get("agent_calls")) and _is_amount(m.get("cost_usd")) for m in months)
    ):
        return None
    figures = _figures(metrics, holds, months)
    return figures if all(v is None or abs(v) <= FIGURE_MAX for v in figures.values()) else None


_REPORT_METRICS: Final = ("total_return_pct", "cagr_pct", "sharpe", "max_drawdown_pct", "turnover")
#: no run computes a figure near this; under it no mean or ON - OFF difference of a sweep's runs
#: passes the largest float (1.5e308 and -1.5e308 made experiment.json's Infinity and the page's inf)
FIGURE_MAX: Final = 1e300


def _is_number(value: object) -> TypeGuard[int | float]:
    # compared, not math.isfinite: json reads a 400-digit figure as an int no float can hold, and
    # isfinite raised OverflowError for it (NaN fails a comparison, infinity the bound)
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and -FIGURE_MAX <= value <= FIGURE_MAX
    )


def _is_count(value: object) -> bool:
    return type(value) is int and 0 <= value <= FIGURE_MAX


def _is_amount(value: object) -> bool:
    return _is_number(value) and value >= 0


def _figures(
    metrics: dict[str, Any], holds_by_ticker: dict[str, Any], months: list[dict[str, Any]]
) -> dict[str, float | None]:
    holds = [float(f["total_return_pct"]) for f in holds_by_ticker.values()]
    with np.errstate(over="ignore"):  # a sum past FIGURE_MAX is refused by the caller
        hold = float(np.mean(holds)) if holds else None
        return {
            **{name: metrics[name] for name in _REPORT_METRICS},
            "agent_calls": sum(float(m["agent_calls"]) for m in months),
            "cost_usd": sum(float(m["cost_usd"]) for m in months),
            "buy_hold_return_pct": hold,
        }


def build_experiment(entries: Sequence[RunEntry]) -> dict[str, Any]:
    done = [e for e in entries if e.status == "done"]
    figures = {e.key: run_figures(Path(e.run_dir)) for e in done}
    reasons = {e.key: run_unavailable(Path(e.run_dir)) for e in done}
    cells: dict[tuple[str, str, str], list[RunEntry]] = defaultdict(list)
    for entry in entries:
        cells[(entry.tickers, entry.decider, entry.override)].append(entry)
    table, deltas = [], []
    for (tickers, decider, override), members in sorted(cells.items()):
        shown = [m for m, _ in METRICS if m not in MODEL_ONLY or decider != "fallback"]
        for memory in (True, False):
            keys = [e.key for e in members if e.memory is memory and e.key in figures]
            row: dict[str, Any] = {
                "tickers": tickers,
                "decider": decider,
                "override": override,
                "memory": "on" if memory else "off",
                "runs": len(keys),
                **{m: _mean([figures[k][m] for k in keys]) for m in shown},
            }
            row["unavailable"] = {
                m: next((reasons[k][m] for k in keys if m in reasons[k]), "no finished run")
                for m in shown
                if row[m] is None
            }
            table.append(row)
        deltas.append(_delta_row(tickers, decider, override, members, figures, shown))
    failed = [
        {"key": e.key, "run_dir": e.run_dir, "status": e.status, "reason": e.reason}
        for e in entries
        if e.status != "done"
    ]
    return {
        "runs": len(entries),
        "done": len(figures),
        "table": table,
        "deltas": deltas,
        "failed": failed,
        "bootstrap": {
            "resamples": BOOTSTRAP_RESAMPLES,
            "confidence": CONFIDENCE,
            "seed": BOOTSTRAP_SEED,
            "pairs": "runs of the cell with the same period and seed, memory on minus off",
        },
        "entries": [asdict(e) for e in entries],
    }


def _delta_row(
    tickers: str,
    decider: str,
    override: str,
    members: Sequence[RunEntry],
    figures: dict[str, dict[str, float | None]],
    shown: Sequence[str],
) -> dict[str, Any]:
    by_sample: dict[tuple[str, int], dict[bool, dict[str, float | None]]] = defaultdict(dict)
    for entry in members:
        if entry.key in figures:
            by_sample[(entry.period, entry.seed)][entry.memory] = figures[entry.key]
    pairs = [s for s in by_sample.values() if True in s and False in s]
    row: dict[str, Any] = {
        "tickers": tickers,
        "decider": decider,
        "override": override,
        "pairs": len(pairs),
    }
    for metric in shown:
        diffs = [
            float(on) - float(off)
            for s in pairs
            if (on := s[True][metric]) is not None and (off := s[False][metric]) is not None
        ]
        row[metric] = bootstrap_mean(diffs)
    return row


def bootstrap_mean(values: Sequence[float]) -> dict[str, Any]:
    """Mean and percentile bootstrap interval of ``values`` (null with a reason when too few)."""
    if not values:
        return {"mean": None, "low": None, "high": None, "n": 0, "unavailable": "no pair"}
    data = np.asarray(values, dtype=np.float64)
    mean = float(data.mean())
    if len(data) < 2:
        return {
            "mean": mean,
            "low": None,
            "high": None,
            "n": 1,
            "unavailable": "one pair: no interval",
        }
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    samples = rng.choice(data, size=(BOOTSTRAP_RESAMPLES, len(data)), replace=True).mean(axis=1)
    tail = (1 - CONFIDENCE) / 2 * 100
    low, high = np.percentile(samples, [tail, 100 - tail])
    return {"mean": mean, "low": float(low), "high": float(high), "n": len(data)}


def _mean(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None and math.isfinite(v)]
    return float(np.mean(present)) if present else None


def write_experiment(out_dir: Path, entries: Sequence[RunEntry]) -> Path:
    """``experiment.json`` and ``experiment.html`` in ``out_dir``; returns the HTML's path."""
    document = build_experiment(entries)
    atomic_write_bytes(
        out_dir / "experiment.json", (json.dumps(document, indent=2) + "\n").encode()
    )
    page = out_dir / "experiment.html"
    atomic_write_bytes(page, render_html(document).encode())
    return page


def render_html(document: dict[str, Any]) -> str:
    labels = dict(METRICS)
    keys = [m for m, _ in METRICS]
    head = ["tickers", "decider", "override", "memory", "runs", *(labels[m] for m in keys)]
    rows = [
        [r["tickers"], r["decider"], r["override"], r["memory"], str(r["runs"])]
        + [_cell(r, m) for m in keys]
        for r in document["table"]
    ]
    dhead = ["tickers", "decider", "override", "pairs", *(labels[m] for m in keys)]
    drows = [
        [d["tickers"], d["decider"], d["override"], str(d["pairs"])]
        + [_interval(d.get(m)) for m in keys]
        for d in document["deltas"]
    ]
    fhead = ["run", "status", "reason"]
    frows = [[f["run_dir"], f["status"], f["reason"] or ""] for f in document["failed"]]
    boot = document["bootstrap"]
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>vigil experiment</title>"
        "<style>body{font:14px/1.5 system-ui,sans-serif;margin:2em}table{border-collapse:"
        "collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}"
        "td:nth-child(-n+4),th{text-align:left}</style></head><body>"
        f"<h1>Experiment: memory ON / OFF</h1><p>{document['done']} of {document['runs']} runs "
        "done. Figures are means over the cell's runs (periods x seeds); buy &amp; hold is the "
        "equal-weight return of the cell's tickers over the same periods. Calls and dollars "
        "are shown when a model decided.</p>"
        f"<h2>Per cell</h2>{_table(head, rows)}"
        f"<h2>ON - OFF</h2><p>Mean of the paired differences ({html.escape(boot['pairs'])}) "
        f"[{boot['confidence']:.0%} bootstrap interval, {boot['resamples']} resamples].</p>"
        f"{_table(dhead, drows)}"
        + (f"<h2>Failed runs</h2>{_table(fhead, frows)}" if frows else "")
        + "</body></html>\n"
    )


def _table(head: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    out = ["<table><tr>", *(f"<th>{html.escape(h)}</th>" for h in head), "</tr>"]
    for row in rows:
        out += ["<tr>", *(f"<td>{html.escape(c)}</td>" for c in row), "</tr>"]
    out.append("</table>")
    return "".join(out)


def _cell(row: dict[str, Any], metric: str) -> str:
    if metric not in row:
        return ""
    value = row[metric]
    if value is None:
        return f"n/a ({row['unavailable'].get(metric, 'unavailable')})"
    return f"{value:,.2f}"


def _interval(value: Any) -> str:
    if value is None:
        return ""
    if value["mean"] is None:
        return f"n/a ({value['unavailable']})"
    if value["low"] is None:
        return f"{value['mean']:+.2f} (n=1)"
    return f"{value['mean']:+.2f} [{value['low']:+.2f}, {value['high']:+.2f}]"


__all__ = [
    "RunEntry",
    "bootstrap_mean",
    "build_experiment",
    "report_figures",
    "run_figures",
    "run_unavailable",
    "write_experiment",
]

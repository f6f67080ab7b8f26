"""``report.html``: one self-contained page (inline CSS, inline scripts, no network).

The charts are uPlot (MIT, the copy vendored in ``api/static/`` with its licence), inlined into
the page with ``static/report_charts.js`` and the chart specs ``report.charts`` computed (JSON in
a ``<script type="application/json">``), so the page opens offline, from a file. uPlot gives the
axis ticks and hover values; without scripts the tables still hold every figure.

Every string that came from a journal is escaped: ``html.escape`` in the HTML, and ``<``, ``>``
and ``&`` as JSON escapes in the chart data, so no journal text can close a script element.
``write_report`` writes both ``report.json`` and ``report.html``.
"""

from __future__ import annotations

import html
import json
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any, Final

from report.charts import (
    BASELINE_COLOUR,
    BUY_COLOUR,
    EQUITY_COLOUR,
    HOLD_COLOURS,
    LEARNED_COLOURS,
    SELL_COLOUR,
    drawdown_spec,
    equity_spec,
    learned_spec,
)
from report.figures import Report, build_report, report_json_bytes
from report.tables import (
    cost_table,
    days_table,
    hold_table,
    metrics_table,
    months_table,
    parameters_table,
    table,
)
from state.atomic import atomic_write_bytes

#: the uPlot the dashboard serves (one vendored copy in the repository and in the wheel)
UPLOT_DIR: Final = Path(__file__).resolve().parents[1] / "api" / "static"
CHARTS_JS: Final = Path(__file__).resolve().parent / "static" / "report_charts.js"

_CSS: Final = """
body { font: 15px/1.5 system-ui, -apple-system, "Segoe UI", sans-serif; color: #1d2330;
       max-width: 980px; margin: 2em auto; padding: 0 1em; }
h1 { font-size: 1.6em; margin-bottom: .2em; } h2 { font-size: 1.2em; margin-top: 2em; }
table { border-collapse: collapse; margin: .5em 0; }
th, td { padding: .25em .8em; border-bottom: 1px solid #e3e6ec; text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td:first-child { white-space: nowrap; }
.note { color: #5b6475; font-size: .9em; overflow-wrap: anywhere; }
.chart { background: #fafbfc; border: 1px solid #e3e6ec; max-width: 100%; width: 900px;
         box-sizing: content-box; overflow: hidden; }
.chart .u-legend { font-size: 13px; }
.scroll { overflow-x: auto; max-width: 100%; }
.legend span { margin-right: 1.2em; white-space: nowrap; } .legend { overflow-wrap: anywhere; }
summary { cursor: pointer; font-weight: 600; margin: .5em 0; }
"""


class ReportNotWrittenError(Exception):
    """The report's folder or files cannot be written (``--out`` a file, a folder at
    ``report.json``): the reason, naming the path."""


def write_report(run_dir: Path, out_dir: Path | None = None) -> Report:
    """Build the report of ``run_dir`` and write ``report.json`` and ``report.html`` to ``out_dir``
    (default: the run folder). Raises ``report.figures.RunFolderError`` for a bad run folder and
    ``ReportNotWrittenError`` for a place it cannot write to."""
    report = build_report(run_dir)
    target = out_dir if out_dir is not None else run_dir
    json_path, html_path = target / "report.json", target / "report.html"
    _write_in(target, target, lambda: target.mkdir(parents=True, exist_ok=True))
    for path in (json_path, html_path):
        if path.is_dir() and not path.is_symlink():  # a rename onto a folder fails; a link's works
            raise ReportNotWrittenError(
                f"cannot write the report into {target}: {path}: is a folder; nothing written"
            )
    json_bytes = report_json_bytes(report)
    html_bytes = render_html(report).encode("utf-8")
    # the json is renamed into place only once the html is: a page that cannot be written (a full
    # disk) left a report.json beside an old report.html or none, a half report
    _write_in(
        target,
        json_path,
        lambda: atomic_write_bytes(
            json_path,
            json_bytes,
            before_replace=lambda _tmp: _write_in(
                target, html_path, lambda: atomic_write_bytes(html_path, html_bytes)
            ),
        ),
    )
    return report


def _write_in(target: Path, path: Path, write: Callable[[], object]) -> None:
    """``write()``, its ``OSError`` a ``ReportNotWrittenError`` naming ``path``: a person's --out
    is said in one line, where it was a traceback."""
    try:
        write()
    except OSError as exc:
        # a rename's failure names its target second (the first is the temporary file)
        where = exc.filename2 or exc.filename or path
        raise ReportNotWrittenError(
            f"cannot write the report into {target}: {where}: {exc.strerror or exc}; "
            "nothing written"
        ) from exc


def render_html(report: Report) -> str:
    e = html.escape
    specs: list[dict[str, Any]] = []
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>vigil report: {e(report.run_dir)}</title>",
        f"<style>{_CSS}{_uplot_css()}</style></head><body>",
        f"<h1>vigil run report</h1><p class='note'>{e(report.run_dir)}</p>",
    ]
    parts += [f"<p class='note'>{e(note)}</p>" for note in report.notes]
    parts.append("<h2>Run</h2>")
    parts.append(parameters_table(report.parameters))
    if report.empty:
        parts.append(
            "<p><strong>Nothing to report: this run has no decisions and no trades.</strong></p>"
        )
    else:
        parts.append("<h2>Equity against buy-and-hold</h2>")
        parts += _equity_section(report, specs)
        parts.append("<h2>Drawdown</h2>")
        parts.append(_drawdown_chart(report, specs))
    parts.append("<h2>Figures</h2>")
    parts.append(metrics_table(report))
    parts.append("<h2>Run against buy-and-hold</h2>")
    parts.append(hold_table(report))
    parts.append("<h2>Who decided</h2>")
    parts.append(
        table(
            ("decided by", "reason", "decisions"),
            [(d.decided_by, d.decider_reason, str(d.decisions)) for d in report.deciders],
        )
    )
    if report.cost is not None:
        parts.append("<h2>Model calls per day: by gate layer, model and decider</h2>")
        parts.append(cost_table(report.cost))
    parts.append("<h2>Gate passes per layer</h2>")
    parts.append(table(("layer", "passes"), [(k, str(v)) for k, v in report.gate_passes.items()]))
    parts.append("<h2>Per month (UTC)</h2>")
    parts.append(months_table(report))
    parts.append(
        f"<details><summary>Per day (UTC): {len(report.days):,} days</summary>"
        f"{days_table(report)}</details>"
    )
    parts.append("<h2>What the learner learned</h2>")
    parts += _learning_section(report, specs)
    if report.ledger is not None:
        parts.append("<h2>Paper ledger (final)</h2>")
        parts.append(table(("figure", "value"), sorted(report.ledger.items())))
    parts += _scripts(specs)
    parts.append("</body></html>\n")
    return "\n".join(parts)


# --- charts: a box per chart, the specs and the scripts that draw them ------------------------


def _box(spec: dict[str, Any]) -> str:
    return (
        f"<div class='chart' id='{spec['id']}' role='img' "
        f"aria-label='{html.escape(spec['label'])}'></div>"
    )


def _scripts(specs: list[dict[str, Any]]) -> list[str]:
    if not specs:
        return []
    data = json.dumps(specs, separators=(",", ":"), allow_nan=False)
    # JSON escapes: no journal text can end the script element or start a comment in it
    data = data.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")
    return [
        f"<script type='application/json' id='vigil-charts'>{data}</script>",
        f"<script>{_uplot_js()}</script>",
        f"<script>{CHARTS_JS.read_text(encoding='utf-8')}</script>",
    ]


@cache
def _uplot_js() -> str:
    code = (UPLOT_DIR / "uPlot.iife.min.js").read_text(encoding="utf-8")
    licence = (UPLOT_DIR / "uPlot.LICENSE").read_text(encoding="utf-8")
    # the banner's address is dropped (the page references nothing remote); the licence stays
    code = "\n".join(line for line in code.splitlines() if not line.startswith("/*! http"))
    return f"/*! uPlot v1.6.32\n{licence.replace('*/', '* /')}*/\n{code}"


@cache
def _uplot_css() -> str:
    return (UPLOT_DIR / "uPlot.min.css").read_text(encoding="utf-8")


def _equity_section(report: Report, specs: list[dict[str, Any]]) -> list[str]:
    """The legend, the chart and, when markers became ticks, a note saying so."""
    if not report.equity:
        return ["<p class='note'>No equity recorded.</p>"]
    spec, as_ticks = equity_spec(report)
    specs.append(spec)
    section = [_legend(report, as_ticks), _box(spec)]
    if as_ticks:
        section.append(
            f"<p class='note'>{len(report.trade_markers):,} fills are drawn as ticks under the "
            "time axis (buys in the upper row, sells in the lower): as triangles on the line "
            "they would overlap and hide it.</p>"
        )
    return section


def _legend(report: Report, as_ticks: bool) -> str:
    e = html.escape
    items = [
        f"<span style='color:{EQUITY_COLOUR}'>&#9644; equity (steps: sampled at decisions)</span>",
        f"<span style='color:{BASELINE_COLOUR}'>&#9476; starting equity</span>",
    ]
    for index, ticker in enumerate(report.buy_and_hold):
        colour = HOLD_COLOURS[index % len(HOLD_COLOURS)]
        items.append(f"<span style='color:{colour}'>&#9644; buy-and-hold {e(ticker)}</span>")
    if as_ticks:
        items.append(f"<span style='color:{BUY_COLOUR}'>&#10073; buy (tick, upper row)</span>")
        items.append(f"<span style='color:{SELL_COLOUR}'>&#10073; sell (tick, lower row)</span>")
    else:
        items.append(f"<span style='color:{BUY_COLOUR}'>&#9650; buy</span>")
        items.append(f"<span style='color:{SELL_COLOUR}'>&#9660; sell</span>")
    return f"<p class='legend'>{''.join(items)}</p>"


def _drawdown_chart(report: Report, specs: list[dict[str, Any]]) -> str:
    if not report.drawdown_pct:
        return "<p class='note'>No equity recorded.</p>"
    spec = drawdown_spec(report.drawdown_pct)
    specs.append(spec)
    return _box(spec)


def _learning_section(report: Report, specs: list[dict[str, Any]]) -> list[str]:
    """The posterior mean per signal over time (a line each) and the learning counts."""
    counts = report.learning
    agreement = counts.get("regime_agreement", {})
    section = [
        table(
            ("figure", "value"),
            [
                (
                    "decisions whose snapshot had the learner",
                    str(counts.get("decisions_with_learner", 0)),
                ),
                ("decisions the learned weights moved", str(counts.get("moved_decisions", 0))),
                *((f"regime agreement: {k}", str(v)) for k, v in agreement.items()),
            ],
        )
    ]
    lines = report.learned_weights
    if not lines:
        section.append(
            "<p class='note'>No learned weights: the learner was off (--no-memory) or no trade "
            "had closed.</p>"
        )
        return section
    spec = learned_spec(lines)
    specs.append(spec)
    legend = [
        f"<span style='color:{LEARNED_COLOURS[i % len(LEARNED_COLOURS)]}'>&#9632; "
        f"{html.escape(name)}</span>"
        for i, name in enumerate(lines)
    ]
    section.append(f"<p>{' '.join(legend)}</p>")
    section.append(_box(spec))
    section.append(
        "<p class='note'>Posterior mean per signal (averaged over the tickers' tables in force). "
        "The rule-based decider scales a signal's weight by 0.5 + a Thompson draw from it: above "
        "0.5 the signal gets more say than the fixed regime blend gives it.</p>"
    )
    return section

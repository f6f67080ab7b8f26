"""Insight texts: the deterministic reflection and rollup, and the summary policy for model text.

A deterministic text is built from the numbers only, so it exists without Claude and is never empty:
``[SOL] medium_volatility, RSI 71 entry, -4.2 % in 9 h: stop loss; momentum signal wrong``.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime

from memory.model import SummarySource, Trade

MAX_TEXT_CHARS = 300
_SENTENCE_END = re.compile(r"(?<=[.!?])\s")


def short_ticker(ticker: str) -> str:
    return ticker.split("/", maxsplit=1)[0]


def _duration(secs: float) -> str:
    if secs < 3600:
        return f"{secs / 60:.0f} min"
    if secs < 2 * 86400:
        return f"{secs / 3600:.0f} h"
    return f"{secs / 86400:.1f} d"


def deterministic_reflection(trade: Trade) -> str:
    """What the numbers say about one closed trade, within MAX_TEXT_CHARS."""
    parts = [f"[{short_ticker(trade.ticker)}] {trade.regime}"]
    rsi = trade.situation.features.get("rsi_1h") if trade.situation else None
    if rsi is not None:
        parts.append(f"RSI {rsi:.0f} entry")
    parts.append(f"{trade.pnl_pct:+.1f} % in {_duration(trade.holding_secs)}")
    head = ", ".join(parts) + f": {trade.exit_reason.replace('_', ' ')}"
    verdict = "right" if trade.pnl_pct > 0 else "wrong"
    strongest = sorted(trade.signals.items(), key=lambda kv: (-abs(kv[1]), kv[0]))[:2]
    judged = [f"{name} signal {verdict}" for name, value in strongest if value != 0]
    text = head + ("; " + ", ".join(judged) if judged else "")
    return cut_at_sentence(text, MAX_TEXT_CHARS) or head[:MAX_TEXT_CHARS]


def deterministic_salience(trade: Trade) -> float:
    """Bigger moves teach more: |pnl| / 10 %, floored at 0.2 so every lesson can be found."""
    return round(min(1.0, max(0.2, abs(trade.pnl_pct) / 10.0)), 3)


def cut_at_sentence(text: str, budget: int) -> str:
    """The longest prefix of whole sentences within ``budget``; else a cut at a word boundary."""
    text = " ".join(text.split())
    if len(text) <= budget:
        return text
    cut = ""
    for match in _SENTENCE_END.finditer(text):
        if match.start() > budget:
            break
        cut = text[: match.start()]
    if cut:
        return cut
    words = text[: budget - 1].rsplit(" ", 1)[0]
    return words.rstrip(",;:") + "…"


def apply_summary_policy(
    text: str | None, summary: str | None, *, budget: int, kind: str
) -> tuple[str, SummarySource]:
    """The model's own summary field -> a cut at a sentence boundary -> a default naming the kind."""
    if summary and summary.strip() and len(summary.strip()) <= budget:
        return summary.strip(), "model_summary"
    if text and text.strip():
        return cut_at_sentence(text, budget), "sentence_cut"
    return f"({kind}: the model gave no usable text)", "default"


def deterministic_rollup(ticker: str, regime: str, trades: Sequence[Trade], n_insights: int) -> str:
    """One line standing for ``n_insights`` older lessons of one ticker and regime."""
    head = f"[{short_ticker(ticker)}] {regime}: rollup of {n_insights} lessons"
    if not trades:
        return head + " (their trades are no longer in memory)"
    first = datetime.fromtimestamp(min(t.entry_ms for t in trades) / 1000, UTC)
    last = datetime.fromtimestamp(max(t.exit_ms for t in trades) / 1000, UTC)
    wins = sum(1 for t in trades if t.pnl_pct > 0)
    mean = sum(t.pnl_pct for t in trades) / len(trades)
    exits = Counter(t.exit_reason for t in trades).most_common(3)
    exit_text = ", ".join(f"{reason.replace('_', ' ')} x{count}" for reason, count in exits)
    text = (
        f"{head} ({first:%Y-%m-%d}..{last:%Y-%m-%d}): {wins} wins / {len(trades) - wins} losses, "
        f"mean {mean:+.2f} %; exits: {exit_text}."
    )
    return cut_at_sentence(text, MAX_TEXT_CHARS)

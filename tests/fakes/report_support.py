"""Hand-made run folders for the report tests (a helper module; it holds no tests).

The standard run: five decisions over four days, two tickers, five fills. Its figures are worked
out by hand in ``EXPECTED`` (see the comments) so the tests compare against numbers, not code.
"""

from __future__ import annotations

import copy
import csv
import math
import random
from pathlib import Path
from typing import Any, Final

import orjson

DAY_MS: Final = 86_400_000
T0: Final = 1_735_689_600_000  # 2025-01-01T00:00Z
HOUR_MS: Final = 3_600_000
TRADE_HEADER: Final = ("at_ms", "client_order_id", "ticker", "side", "quantity", "price", "fee_usd")

# (at_ms, equity, BTC price, positions open?, trigger, decided_by, reason, usage)
DECISIONS: Final[
    list[tuple[int, float, float, bool, list[str], str, str, dict[str, Any] | None]]
] = [
    (
        T0,
        10_000.0,
        50_000.0,
        False,
        ["candle_close:BTC/USDT:15m", "agent_timer"],
        "claude",
        "ok",
        {"input_tokens": 1000, "output_tokens": 200, "cost_usd": 0.01},
    ),
    (
        T0 + 12 * HOUR_MS,
        10_500.0,
        52_000.0,
        True,
        ["wake:price_above"],
        "claude",
        "ok",
        {
            "input_tokens": 500,
            "output_tokens": 100,
            "cache_read_input_tokens": 50,
            "cost_usd": 0.005,
        },
    ),
    (
        T0 + DAY_MS + 12 * HOUR_MS,
        9_450.0,
        48_000.0,
        True,
        ["anomaly:BTC/USDT"],
        "fallback",
        "breaker_open",
        None,
    ),
    (
        T0 + 2 * DAY_MS + 12 * HOUR_MS,
        9_975.0,
        50_000.0,
        False,
        ["watchdog_no_market_data"],
        "fallback",
        "no_api_key",
        None,
    ),
    (
        T0 + 4 * DAY_MS,
        11_025.0,
        55_000.0,
        False,
        ["candle_close:ETH/USDT:1h"],
        "fallback",
        "no_api_key",
        None,
    ),
]

# (at_ms, ticker, side, quantity, price, fee_usd)
FILLS: Final = [
    (T0 + 1000, "BTC/USDT", "buy", 0.1, 50_000.0, 5.0),
    (T0 + 2000, "ETH/USDT", "buy", 1.0, 2_000.0, 2.0),
    (T0 + 6 * HOUR_MS, "ETH/USDT", "sell", 1.0, 2_100.0, 2.1),
    (T0 + DAY_MS + 12 * HOUR_MS, "BTC/USDT", "sell", 0.05, 55_000.0, 2.75),
    (T0 + 2 * DAY_MS + 12 * HOUR_MS, "BTC/USDT", "sell", 0.05, 45_000.0, 2.25),
]

EXPECTED: Final = {
    "total_return_pct": 10.25,  # 11025 / 10000 - 1
    # spans exactly 4 days, under the 30 a CAGR needs ((1.1025 ** (365 / 4) - 1) x 100 would
    # be 736,186.91 %): not annualised
    "cagr_pct": None,
    "max_drawdown_pct": 10.0,  # 10500 -> 9450
    "fees_usd": 14.1,  # 5 + 2 + 2.1 + 2.75 + 2.25
    "realised_pnl_usd": 100.0,  # ETH +100, BTC +250 then -250
    "round_trips": 3,
    "win_rate_pct": 200 / 3,  # ETH +95.9 and BTC +244.75 win, BTC -254.75 loses
    "turnover": 14_100 / 10_190,  # notional / mean of the five equity points
    "exposure_time_pct": 50.0,  # open from day 0 12:00 to day 2 12:00 of 4 days
    # the starting equity, then the last value per UTC day (day 3 has none): four daily returns,
    # the first (day 0's close against the start, +5 %) included
    "daily_closes": [10_000.0, 10_500.0, 9_450.0, 9_975.0, 11_025.0],
}


def decision_line(
    at_ms: int,
    equity: float | None,
    btc_price: float,
    positions: bool,
    trigger: list[str],
    decided_by: str,
    reason: str,
    usage: dict[str, Any] | None,
) -> dict[str, Any]:
    record: dict[str, Any] = {
        "type": "decision",
        "decision_id": f"d{at_ms}",
        "at_ms": at_ms,
        "decided_by": decided_by,
        "decider_reason": reason,
        "trigger": trigger,
        "accepted": [],
        "orders": [],
        "snapshot": {
            "portfolio_value": equity,
            "cash": equity,
            "tickers": {"BTC/USDT": {"price": btc_price}},
            "open_positions": [{"ticker": "BTC/USDT"}] if positions else [],
        },
    }
    if usage is not None:
        record["usage"] = usage
    return record


def write_run(
    run_dir: Path,
    decisions: list[dict[str, Any]] | None = None,
    fills: list[tuple[int, str, str, float, float, float]] | None = None,
) -> Path:
    """A run folder holding the given decisions and fills (the standard run by default)."""
    logs = run_dir / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    lines = decisions if decisions is not None else [decision_line(*d) for d in DECISIONS]
    (logs / "decisions.jsonl").write_bytes(
        b"".join(orjson.dumps(line, option=orjson.OPT_SORT_KEYS) + b"\n" for line in lines)
    )
    with (logs / "trades.csv").open("w", newline="") as fh:
        writer = csv.writer(fh, lineterminator="\n")
        writer.writerow(TRADE_HEADER)
        for n, (at_ms, ticker, side, qty, price, fee) in enumerate(
            fills if fills is not None else FILLS
        ):
            writer.writerow([at_ms, f"vgb-{n}", ticker, side, repr(qty), repr(price), repr(fee)])
    return run_dir


def year_run_lines(
    decisions: int,
    span_days: float = 365.0,
    seed: int = 7,
    template: dict[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """``decisions`` lines evenly spread over ``span_days`` from T0: equity and three tickers'
    prices follow seeded random walks (a long replay's shape, not real prices). With a
    ``template`` (a real journal line) each line is a copy of it with the time, equity and
    prices replaced, so the journal has a real line's size."""
    rng = random.Random(seed)
    step_ms = int(span_days * DAY_MS / decisions)
    equity, prices = 10_000.0, {"BTC/USDT": 90_000.0, "ETH/USDT": 3_000.0, "SOL/USDT": 180.0}
    lines = []
    for i in range(decisions):
        equity *= math.exp(rng.gauss(0.0, 0.002))
        for ticker in prices:
            prices[ticker] *= math.exp(rng.gauss(0.0, 0.003))
        at_ms = T0 + i * step_ms
        line = decision_line(
            at_ms, equity, 0.0, i % 3 == 0, ["agent_timer"], "fallback", "no_api_key", None
        )
        if template is not None:
            line = copy.deepcopy(template)
            line["at_ms"] = at_ms
            line["snapshot"]["portfolio_value"] = equity
        tickers = line["snapshot"].setdefault("tickers", {})
        for ticker, price in prices.items():
            tickers.setdefault(ticker, {})["price"] = price
        lines.append(line)
    return lines


def year_run_fills(
    count: int, span_days: float = 365.0
) -> list[tuple[int, str, str, float, float, float]]:
    """``count`` fills evenly spread over the span, alternating a BTC buy and its sell."""
    step_ms = int(span_days * DAY_MS / count)
    return [
        (T0 + i * step_ms + 1, "BTC/USDT", "buy" if i % 2 == 0 else "sell", 0.01, 90_000.0, 0.9)
        for i in range(count)
    ]

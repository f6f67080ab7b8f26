"""A snapshot as sent (plain JSON), with knobs, and a market analyst's report, for the analyst and
context tests."""

from __future__ import annotations

from typing import Any

from memory.analyst_model import AnalystReport, utc_day

DAY1_MS = 1_740_787_200_000  # 2025-03-01 00:00 UTC
HOUR_MS = 3_600_000


def sent(
    price: float = 86_000.0,
    *,
    trend: str = "up",
    regime: str = "medium_volatility",
    funding: float | None = 0.0001,
    fear_greed: int | None = 40,
    zscore: float = 0.5,
) -> dict[str, Any]:
    tf = {"trend": trend, "rsi": 55.0, "bollinger_position": 0.6, "unavailable": {}}
    return {
        "at_ms": DAY1_MS,
        "tickers": {
            "BTC/USDT": {
                "price": price,
                "change_1h_pct": 0.2,
                "return_4h_pct": 0.8,
                "return_24h_pct": -1.5,
                "return_zscore": zscore,
                "multi_tf": {"15m": tf, "1h": tf, "4h": {**tf, "trend": "down"}},
            }
        },
        "funding_rates": None if funding is None else {"BTC/USDT": funding},
        "open_interest": None,
        "fear_greed": None
        if fear_greed is None
        else {"value": fear_greed, "classification": "Fear"},
        "regime": {
            "crypto": {"BTC/USDT": regime},
            "crypto_exposure": {"BTC/USDT": 0.8},
            "macro": "UNAVAILABLE",
            "combined": f"{regime}_unavailable",
            "exposure_scale": 0.8,
        },
        "derivatives_signal": 0.1,
        "unavailable": {"open_interest": "not in the recording"},
    }


def market_report(
    report_id: str,
    at_ms: int,
    content: str,
    *,
    confidence: float = 0.5,
    figures: dict[str, float | None] | None = None,
    labels: dict[str, str] | None = None,
) -> AnalystReport:
    """The market analyst's intraday BTC/USDT report at ``at_ms`` (its UTC day derived)."""
    return AnalystReport(
        report_id=report_id,
        analyst="market",
        ticker="BTC/USDT",
        day=utc_day(at_ms),
        at_ms=at_ms,
        content=content,
        confidence=confidence,
        timescale="intraday",
        figures=figures or {},
        labels=labels or {},
    )

"""The PAXG hedge field from Binance spot kline answers (``derivatives.hedge``)."""

from __future__ import annotations

from typing import Any

import pytest

from derivatives.cache import SourceFailedError, SourceNotAvailableError
from derivatives.hedge import fetch_paxg, paxg_from_klines

H = 3_600_000
T0 = 1_740_787_200_000  # 2025-03-01T00:00Z


def _row(open_ms: int, step_ms: int, close: float) -> list[Any]:
    """A Binance spot kline row as /api/v3/klines sends it (strings for prices)."""
    c = str(close)
    return [open_ms, c, c, c, c, "1.5", open_ms + step_ms - 1, "0", 3, "0", "0", "0"]


def test_live_answer_prices_the_candle_in_progress_and_returns_closed_candles() -> None:
    now = T0 + 8 * H + 30 * 60_000  # 08:30, the 08:00 1h candle and the 08:00 4h one in progress
    hourly = [_row(T0 + 6 * H, H, 2900.0), _row(T0 + 7 * H, H, 2929.0), _row(T0 + 8 * H, H, 2931.5)]
    four = [_row(T0, 4 * H, 2800.0), _row(T0 + 4 * H, 4 * H, 2870.0), _row(T0 + 8 * H, 4 * H, 1.0)]
    value = paxg_from_klines(hourly, four, now)
    assert value["price"] == 2931.5 and value["price_at_ms"] == now
    assert value["return_1h_pct"] == pytest.approx((2929.0 / 2900.0 - 1) * 100)
    assert value["return_4h_pct"] == pytest.approx((2870.0 / 2800.0 - 1) * 100)
    assert "unavailable" not in value


def test_too_few_closed_candles_leave_a_return_null_with_the_reason() -> None:
    now = T0 + 4 * H + 1
    hourly = [_row(T0 + 2 * H, H, 10.0), _row(T0 + 3 * H, H, 11.0)]
    value = paxg_from_klines(hourly, [_row(T0, 4 * H, 9.0)], now)
    assert value["return_1h_pct"] == pytest.approx(10.0)
    assert value["return_4h_pct"] is None
    assert value["unavailable"] == {"return_4h_pct": "needs 2 closed 4h candles, have 1"}


def test_no_kline_is_unavailable_and_a_bad_row_a_failed_attempt() -> None:
    with pytest.raises(SourceNotAvailableError, match="no PAXGUSDT kline"):
        paxg_from_klines([], [], T0)
    with pytest.raises(SourceFailedError, match="malformed kline row"):
        paxg_from_klines([[T0, "1"]], [], T0)
    with pytest.raises(SourceFailedError, match="malformed body"):
        paxg_from_klines({"code": -1121}, [], T0)


async def test_without_a_spot_url_the_source_says_it_is_disabled() -> None:
    with pytest.raises(SourceNotAvailableError, match="source disabled"):
        await fetch_paxg(None, T0)

"""Recorded Binance spot klines (PAXGUSDT, the gold hedge) answered as ``GET /api/v3/klines``.

Only candles CLOSED at now are answered (open time + interval <= now): the recording holds each
candle's final values, so serving the candle in progress would hand out a close from the future.
A symbol or interval that was not recorded, or a time outside the recording, gets no rows; the
reader (``derivatives.hedge``) then reports the field unavailable. Quote volume, trade count and
taker volumes were not recorded and are sent as zeros, as the simulator's USDⓈ-M klines are.
"""

from __future__ import annotations

from bisect import bisect_right
from pathlib import Path
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from core.errors import RefuseToStartError
from market.recorded import DataUnavailableError, MalformedDataError, load_spot_klines
from market.timeframes import TIMEFRAME_MS

SPOT_SYMBOLS: Final = ("PAXGUSDT",)
SPOT_INTERVALS: Final = ("1h", "4h")


class RecordedSpotKlines:
    def __init__(self, data_dir: Path | None = None) -> None:
        #: (symbol, interval) -> (open times, OHLCV rows); the open times as ints for ``bisect``
        #: (every derivatives poll counts the candles closed: numpy's searchsorted of one number
        #: costs several times as much)
        self._books: dict[tuple[str, str], tuple[list[int], npt.NDArray[Any]]] = {}
        #: why a recorded series is missing (the data dir lacks its file)
        self.missing: dict[tuple[str, str], str] = {}
        for symbol in SPOT_SYMBOLS:
            for interval in SPOT_INTERVALS:
                try:
                    frame = load_spot_klines(symbol, interval, data_dir)
                except DataUnavailableError as exc:
                    self.missing[(symbol, interval)] = str(exc)
                    continue
                except MalformedDataError as exc:  # was a traceback, as the other files were
                    raise RefuseToStartError(f"malformed recorded data: {exc}") from None
                values = frame[["open", "high", "low", "close", "volume"]].to_numpy()
                opens = frame.index.to_numpy(dtype=np.int64).tolist()
                self._books[(symbol, interval)] = (opens, values)

    def closed_count(self, symbol: str, interval: str, now_ms: int) -> int:
        """How many recorded candles are closed at ``now_ms`` (0 for a series not recorded):
        ``answer`` depends on ``now_ms`` only through this count."""
        book = self._books.get((symbol, interval))
        if book is None:
            return 0
        return bisect_right(book[0], now_ms - TIMEFRAME_MS[interval])

    def answer(self, symbol: str, interval: str, limit: int, now_ms: int) -> list[list[Any]]:
        """The newest ``limit`` candles closed at ``now_ms``, as Binance spot kline rows."""
        book = self._books.get((symbol, interval))
        if book is None or limit < 1:
            return []
        opens, values = book
        step_ms = TIMEFRAME_MS[interval]
        upto = self.closed_count(symbol, interval, now_ms)
        rows = []
        for i in range(max(0, upto - limit), upto):
            open_ms = opens[i]
            o, h, low, c, v = (repr(float(x)) for x in values[i])
            rows.append([open_ms, o, h, low, c, v, open_ms + step_ms - 1, "0", 0, "0", "0", "0"])
        return rows


__all__ = ["SPOT_INTERVALS", "SPOT_SYMBOLS", "RecordedSpotKlines"]

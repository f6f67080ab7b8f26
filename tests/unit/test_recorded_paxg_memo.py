"""RecordedPaxg's memo against the live parser run afresh at every instant (sim.recorded_sources).

The memo is keyed on the candles closed at now; these tests walk spans that cross a hole in the
recording, its first and last candles, and instants before and after it, and require the memoised
answer (or refusal) to equal the unmemoised one at every step.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from derivatives.cache import SourceNotAvailableError
from derivatives.hedge import KLINES_ASKED, PAXG_SYMBOL, paxg_from_klines
from market.timeframes import TIMEFRAME_MS
from sim.recorded_sources import RecordedPaxg
from sim.recorded_spot import RecordedSpotKlines

HOUR_MS = TIMEFRAME_MS["1h"]
START_MS = 1_740_787_200_000  # 2025-03-01T00:00:00Z


def _unmemoised(spot: RecordedSpotKlines, now_ms: int) -> dict[str, Any] | str:
    hourly, four_hourly = (
        spot.answer(PAXG_SYMBOL, tf, KLINES_ASKED, now_ms) for tf in ("1h", "4h")
    )
    try:
        return paxg_from_klines(hourly, four_hourly, now_ms)
    except SourceNotAvailableError as exc:
        return str(exc)


def _memoised(paxg: RecordedPaxg, now_ms: int) -> dict[str, Any] | str:
    try:
        return paxg.at(now_ms)
    except SourceNotAvailableError as exc:
        return str(exc)


def _write_klines(folder: Path, interval: str, opens_ms: list[int]) -> None:
    closes = [2_900.0 + 7.0 * (i % 5) - 0.5 * i for i in range(len(opens_ms))]
    frame = pd.DataFrame(
        {
            "open_time_ms": opens_ms,
            "open": closes,
            "high": [c + 1.0 for c in closes],
            "low": [c - 1.0 for c in closes],
            "close": closes,
            "volume": [10.0] * len(closes),
        }
    )
    frame.to_csv(folder / f"{PAXG_SYMBOL}-{interval}.csv.gz", index=False)


@pytest.fixture
def gapped_spot(tmp_path: Path) -> RecordedSpotKlines:
    """1h and 4h candles whose holes and ends differ, so that either series can change while the
    other does not: the 1h series has a 7-hour hole over which 4h candles close, and ends 8 hours
    before the 4h one; the 4h series has a hole where the 1h one has candles."""
    folder = tmp_path / "binance-spot"
    folder.mkdir()
    hours = [h for h in range(40) if not 17 <= h < 24]
    _write_klines(folder, "1h", [START_MS + h * HOUR_MS for h in hours])
    fours = [q for q in range(12) if q != 8]
    _write_klines(folder, "4h", [START_MS + q * 4 * HOUR_MS for q in fours])
    return RecordedSpotKlines(tmp_path)


def _walk(spot: RecordedSpotKlines, start_ms: int, end_ms: int, step_ms: int) -> int:
    paxg = RecordedPaxg(spot)
    answered = 0
    for now_ms in range(start_ms, end_ms, step_ms):
        memoised, fresh = _memoised(paxg, now_ms), _unmemoised(spot, now_ms)
        assert memoised == fresh, now_ms
        answered += isinstance(fresh, dict)
    return answered


def test_the_memo_equals_the_parser_over_a_hole_and_both_edges(
    gapped_spot: RecordedSpotKlines,
) -> None:
    # from 3 h before the first candle to 5 h after the last, every 5 minutes and 1 ms off-grid
    for offset_ms in (0, 1, HOUR_MS - 1):
        answered = _walk(
            gapped_spot, START_MS - 3 * HOUR_MS + offset_ms, START_MS + 53 * HOUR_MS, 300_000
        )
        assert answered > 0


def test_each_answer_is_a_new_dict_that_a_holder_cannot_spoil(
    gapped_spot: RecordedSpotKlines,
) -> None:
    paxg = RecordedPaxg(gapped_spot)
    at_ms = START_MS + 2 * HOUR_MS  # one closed 1h candle, no 4h one: returns unavailable
    first = paxg.at(at_ms)
    assert first["unavailable"]
    first["price"] = -1.0
    first["unavailable"].clear()
    second = paxg.at(at_ms + 60_000)
    assert second is not first
    assert second == _unmemoised(gapped_spot, at_ms + 60_000)


def test_the_memo_equals_the_parser_at_the_bundled_recordings_edges() -> None:
    spot = RecordedSpotKlines()
    hourly = pd.read_csv(f"data/binance-spot/{PAXG_SYMBOL}-1h.csv.gz")["open_time_ms"]
    first_ms, last_ms = int(hourly.iloc[0]), int(hourly.iloc[-1])
    step_ms = 299_999  # off the hour grid, so each candle close is met at a different offset
    assert _walk(spot, first_ms - 6 * HOUR_MS, first_ms + 30 * HOUR_MS, step_ms) > 0
    assert _walk(spot, last_ms - 30 * HOUR_MS, last_ms + 6 * HOUR_MS, step_ms) > 0

"""RecordedFunding's memo against the live parser over the recorded premiumIndex, run afresh at
every instant (sim.recorded_sources).

The memo is keyed on each ticker's price presence and latest settlement; these tests walk a data
dir cut from the recording, with a hole in one ticker's bars, tickers whose bars start and end at
different times, funding that starts mid-span and a ticker without funding, and require the
memoised answer (or refusal) to equal the unmemoised one at every step.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

import pandas as pd
import pytest

from core.clock import VirtualClock
from derivatives.binance import BinanceDerivatives
from derivatives.cache import SourceNotAvailableError
from sim.feed import SimFeed
from sim.inprocess import RecordedPremiumIndex
from sim.recorded_sources import RecordedFunding

HOUR_MS = 3_600_000
START_MS = 1_740_787_200_000  # 2025-03-01T00:00:00Z
RECORDED = Path("data/binance-usdm")
BTC, ETH = "BTC/USDT", "ETH/USDT"


def _cut(
    folder: Path, name: str, first_ms: int, end_ms: int, hole: tuple[int, int] | None = None
) -> None:
    """``name`` (e.g. BTCUSDT-5m) from the recording, rows from ``first_ms`` to before ``end_ms``,
    without the rows in ``hole``."""
    frame = pd.read_csv(RECORDED / f"{name}.csv.gz")
    times = frame.iloc[:, 0]
    keep = (times >= first_ms) & (times < end_ms)
    if hole is not None:
        keep &= ~((times >= hole[0]) & (times < hole[1]))
    frame[keep].to_csv(folder / f"{name}.csv.gz", index=False)


def _data_dir(root: Path, *, eth_funding: bool) -> Path:
    folder = root / "binance-usdm"
    folder.mkdir(parents=True)
    hole = (START_MS + 20 * HOUR_MS, START_MS + 26 * HOUR_MS)  # across the 00:00 settlement
    _cut(folder, "BTCUSDT-5m", START_MS, START_MS + 48 * HOUR_MS, hole)
    _cut(folder, "BTCUSDT-funding", START_MS + 12 * HOUR_MS, START_MS + 72 * HOUR_MS)
    _cut(folder, "ETHUSDT-5m", START_MS + 6 * HOUR_MS, START_MS + 40 * HOUR_MS)
    if eth_funding:
        _cut(folder, "ETHUSDT-funding", START_MS, START_MS + 72 * HOUR_MS)
    return root


async def _answer(fetch: Callable[[], Awaitable[dict[str, float]]]) -> dict[str, float] | str:
    try:
        return await fetch()
    except SourceNotAvailableError as exc:
        return str(exc)


@pytest.mark.parametrize("eth_funding", [True, False], ids=["both-funded", "eth-unfunded"])
async def test_the_memo_equals_the_parser_over_holes_edges_and_settlements(
    tmp_path: Path, eth_funding: bool
) -> None:
    feed = SimFeed((BTC, ETH), data_dir=_data_dir(tmp_path, eth_funding=eth_funding))
    clock = VirtualClock(START_MS - 2 * HOUR_MS)
    memoised = RecordedFunding(feed, clock, (BTC, ETH))
    fresh = BinanceDerivatives(RecordedPremiumIndex(feed, clock), (BTC, ETH))
    answers: list[dict[str, float] | str] = []
    for _step in range((54 * HOUR_MS) // 299_999):  # off the 5-minute grid: every offset met
        got = await _answer(memoised.fetch)
        assert got == await _answer(fresh.fetch_funding_rates), clock.now_ms()
        answers.append(got)
        await clock.advance(299.999)
    kinds = {type(a) for a in answers}
    assert kinds == {dict, str}  # the walk met answers and refusals
    assert len({tuple(sorted(a.items())) for a in answers if isinstance(a, dict)}) > 2


async def test_each_answer_is_a_new_dict(tmp_path: Path) -> None:
    feed = SimFeed((BTC, ETH), data_dir=_data_dir(tmp_path, eth_funding=True))
    clock = VirtualClock(START_MS + 14 * HOUR_MS)
    memoised = RecordedFunding(feed, clock, (BTC, ETH))
    first = await memoised.fetch()
    first[BTC] = 99.0
    await clock.advance(60)
    second = await memoised.fetch()
    assert second is not first
    assert (
        second
        == await BinanceDerivatives(
            RecordedPremiumIndex(feed, clock), (BTC, ETH)
        ).fetch_funding_rates()
    )


def test_has_price_is_last_price_not_none_over_holes_and_edges(tmp_path: Path) -> None:
    feed = SimFeed((BTC, ETH), data_dir=_data_dir(tmp_path, eth_funding=False))
    seen = set()
    for now_ms in range(START_MS - HOUR_MS, START_MS + 50 * HOUR_MS, 37_501):  # every offset
        for ticker in (BTC, ETH):
            has = feed.has_price(ticker, now_ms)
            assert has == (feed.last_price(ticker, now_ms) is not None), (ticker, now_ms)
            seen.add(has)
    assert seen == {True, False}

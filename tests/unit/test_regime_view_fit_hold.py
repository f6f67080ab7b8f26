"""RegimeView holds the fit pool while the fits of one batch come one after another.

The daemon's pool process leaves when no fit runs (``FitPool(keep_alive=False)``); its tickers fit
one by one (at start-up, and in the queued handler of a refit's 4h closes), so without a hold each
fit started its own process: three starts of about 2 s of CPU each where one does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from test_regime_tracker import EPOCH_MS, FakeModel
from test_regime_view import FakeHistory, NoMacro

from core.clock import VirtualClock
from core.events import Candle, CandleClosed, Timeframe
from regime.tracker import CryptoRegimeTracker, run_inline
from regime.view import RegimeView

TICKERS = ("BTC/USDT", "ETH/USDT", "SOL/USDT")


class Holder:
    """A fit pool's hold and release, counted; ``held_at_fits``: the holds at each fit."""

    def __init__(self) -> None:
        self.holds = 0
        self.calls: list[str] = []
        self.held_at_fits: list[int] = []

    def hold(self) -> None:
        self.holds += 1
        self.calls.append("hold")

    def release(self) -> None:
        assert self.holds > 0, "released without a hold"
        self.holds -= 1
        self.calls.append("release")


def _view(holder: Holder, history: FakeHistory | None = None) -> RegimeView:
    clock = VirtualClock(epoch_ms=EPOCH_MS)

    async def offload(fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        holder.held_at_fits.append(holder.holds)  # the tracker offloads each fit, and only fits
        return await run_inline(fn, *args, **kwargs)

    tracker = CryptoRegimeTracker(clock, FakeModel, offload=offload)
    return RegimeView(
        tracker,
        NoMacro(),
        history or FakeHistory(),  # type: ignore[arg-type]
        TICKERS,
        clock=clock,
        fits=holder,
    )


def _close(ticker: str, open_ms: int, timeframe: Timeframe = "4h") -> CandleClosed:
    candle = Candle(open_time_ms=open_ms, open=1.0, high=1.0, low=1.0, close=1.0, volume=1.0)
    return CandleClosed(ticker=ticker, timeframe=timeframe, candle=candle)


async def test_the_start_up_fits_are_one_batch() -> None:
    holder = Holder()
    view = _view(holder)
    await view.refresh_all()
    assert holder.held_at_fits == [1, 1, 1]
    assert holder.calls == ["hold", "release"]


async def test_a_4h_close_of_every_ticker_is_one_batch_released_after_the_last_refresh() -> None:
    holder = Holder()
    view = _view(holder)
    closes = [_close(ticker, EPOCH_MS) for ticker in TICKERS]
    for close in closes:  # the inline handler, as the closes are published
        view.on_close_observed(close)
    assert holder.calls == ["hold"]
    for close in closes:  # the queued handler, one close after another
        await view.on_candle_closed(close)
    assert holder.held_at_fits == [1, 1, 1]
    assert holder.calls == ["hold", "release"]
    assert not view.refresh_pending


async def test_closes_of_other_timeframes_hold_nothing() -> None:
    holder = Holder()
    view = _view(holder)
    for ticker in TICKERS:
        close = _close(ticker, EPOCH_MS, timeframe="15m")
        view.on_close_observed(close)
        await view.on_candle_closed(close)
    assert holder.calls == []


async def test_a_failed_refresh_still_releases() -> None:
    holder = Holder()
    view = _view(holder, FakeHistory(fail=True))
    close = _close(TICKERS[0], EPOCH_MS)
    view.on_close_observed(close)
    with pytest.raises(RuntimeError, match="history fetch failed"):  # the bus logs it
        await view.on_candle_closed(close)
    assert holder.calls == ["hold", "release"]
    assert holder.held_at_fits == []

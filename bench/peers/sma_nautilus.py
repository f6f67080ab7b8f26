"""The SMA crossover on NautilusTrader's BacktestEngine (run by bench_peers in the peer venv).

``python sma_nautilus.py BARS.csv FAST SLOW``: prints one JSON line {bars, secs, trades}.
The engine's own loop over the bars (``engine.run``) is timed; building the engine and loading
the bars are not (as for backtesting.py, whose frame is built before the clock starts).
"""

from __future__ import annotations

import json
import sys
import time
from decimal import Decimal
from typing import Any

import pandas as pd
from nautilus_trader.backtest.engine import (  # type: ignore[import-not-found]
    BacktestEngine,
    BacktestEngineConfig,
)
from nautilus_trader.model.currencies import USDT  # type: ignore[import-not-found]
from nautilus_trader.model.data import BarType  # type: ignore[import-not-found]
from nautilus_trader.model.enums import (  # type: ignore[import-not-found]
    AccountType,
    OmsType,
    OrderSide,
)
from nautilus_trader.model.identifiers import TraderId, Venue  # type: ignore[import-not-found]
from nautilus_trader.model.objects import Money  # type: ignore[import-not-found]
from nautilus_trader.persistence.wranglers import BarDataWrangler  # type: ignore[import-not-found]
from nautilus_trader.test_kit.providers import (  # type: ignore[import-not-found]
    TestInstrumentProvider,
)
from nautilus_trader.trading.strategy import Strategy  # type: ignore[import-not-found]

try:
    from nautilus_trader.indicators.averages import (  # type: ignore[import-not-found]
        SimpleMovingAverage,
    )
except ImportError:
    from nautilus_trader.indicators.average.sma import (  # type: ignore[import-not-found]
        SimpleMovingAverage,
    )


class SmaCross(Strategy):  # type: ignore[misc]
    def __init__(self, instrument: Any, bar_type: Any, fast: int, slow: int) -> None:
        super().__init__()
        self.instrument = instrument
        self.bar_type = bar_type
        self.fast = SimpleMovingAverage(fast)
        self.slow = SimpleMovingAverage(slow)
        self.was_above: bool | None = None
        self.trades = 0

    def on_start(self) -> None:
        self.register_indicator_for_bars(self.bar_type, self.fast)
        self.register_indicator_for_bars(self.bar_type, self.slow)
        self.subscribe_bars(self.bar_type)

    def on_bar(self, bar: Any) -> None:
        if not (self.fast.initialized and self.slow.initialized):
            return
        above = self.fast.value > self.slow.value
        flat = self.portfolio.is_flat(self.instrument.id)
        if self.was_above is not None:
            if above and not self.was_above and flat:
                self._market(OrderSide.BUY)
                self.trades += 1
            elif self.was_above and not above and not flat:
                self.close_all_positions(self.instrument.id)
        self.was_above = above

    def _market(self, side: Any) -> None:
        quantity = self.instrument.make_qty(Decimal("0.01"))
        self.submit_order(self.order_factory.market(self.instrument.id, side, quantity))


def main(path: str, fast: int, slow: int) -> None:
    raw = pd.read_csv(path)
    frame = raw.rename(columns={"open_time_ms": "timestamp"})
    # Nautilus stamps a bar at its close
    frame["timestamp"] = pd.to_datetime(frame["timestamp"] + 300_000, unit="ms", utc=True)
    frame = frame.set_index("timestamp")[["open", "high", "low", "close", "volume"]]
    engine = BacktestEngine(BacktestEngineConfig(trader_id=TraderId("BENCH-001")))
    venue = Venue("BINANCE")
    engine.add_venue(
        venue=venue,
        oms_type=OmsType.NETTING,
        account_type=AccountType.MARGIN,
        base_currency=USDT,
        starting_balances=[Money(1_000_000, USDT)],
    )
    instrument = TestInstrumentProvider.btcusdt_perp_binance()
    engine.add_instrument(instrument)
    bar_type = BarType.from_str(f"{instrument.id}-5-MINUTE-LAST-EXTERNAL")
    bars = BarDataWrangler(bar_type, instrument).process(frame)
    engine.add_data(bars)
    strategy = SmaCross(instrument, bar_type, fast, slow)
    engine.add_strategy(strategy)
    started = time.perf_counter()
    engine.run()
    secs = time.perf_counter() - started
    engine.dispose()
    print(json.dumps({"bars": len(bars), "secs": secs, "trades": strategy.trades}))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))

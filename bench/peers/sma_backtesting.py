"""The SMA crossover on backtesting.py (run by bench_peers in the peer venv).

``python sma_backtesting.py BARS.csv FAST SLOW``: prints one JSON line {bars, secs, trades}.
"""

from __future__ import annotations

import json
import sys
import time

import pandas as pd
from backtesting import Backtest, Strategy  # type: ignore[import-not-found]


def _sma(values: object, n: int) -> object:
    return pd.Series(values).rolling(n).mean()


def main(path: str, fast: int, slow: int) -> None:
    raw = pd.read_csv(path)
    frame = pd.DataFrame(
        {
            "Open": raw["open"],
            "High": raw["high"],
            "Low": raw["low"],
            "Close": raw["close"],
            "Volume": raw["volume"],
        }
    )
    frame.index = pd.to_datetime(raw["open_time_ms"], unit="ms")

    class SmaCross(Strategy):  # type: ignore[misc]
        def init(self) -> None:
            self.fast = self.I(_sma, self.data.Close, fast)
            self.slow = self.I(_sma, self.data.Close, slow)

        def next(self) -> None:
            above = self.fast[-1] > self.slow[-1]
            was_above = self.fast[-2] > self.slow[-2]
            if above and not was_above and not self.position:
                self.buy(size=1)  # whole units: a fraction would mean a share of equity
            elif was_above and not above and self.position:
                self.position.close()

    started = time.perf_counter()
    stats = Backtest(frame, SmaCross, cash=1_000_000, trade_on_close=True).run()
    secs = time.perf_counter() - started
    print(json.dumps({"bars": len(frame), "secs": secs, "trades": int(stats["# Trades"])}))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))

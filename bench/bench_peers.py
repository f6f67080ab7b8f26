"""Peer benchmark: one SMA crossover (fast 10 / slow 30 closes, long 0.01 BTC on a cross up, flat
on a cross down, filled at the bar's close) on the same bars — BTC/USDT 5m of the bundled recording,
March 2025 (8,928 bars) — in vigil and in its peers, run alternately, bars per second of each and
the ratios measured in the same run.

- vigil engine loop (like for like): the bars as ``CandleClosed`` events on vigil's ``EventBus``,
  the ``VirtualClock`` moved to each bar's close, the strategy an inline subscriber. This is what a
  peer's engine does per bar.
- vigil full replay: ``vigil replay`` itself over the same span and ticker (fallback decider,
  memory on): four kline updates per bar through the tick path, the gate, snapshots, decisions,
  the paper broker and the journal. It does far more per bar than the strategy above; its figure
  is the daemon's, not the engine's.
- backtesting.py and NautilusTrader's ``BacktestEngine``: ``bench/peers/*.py`` in their own venv
  (``PEER_PYTHON``, default ``bench/.venv-peer/bin/python``; NautilusTrader needs Python >= 3.12).
  A peer whose package is not installed there is skipped, and the line says so.

Run: ``python -m bench peers [--rounds N] [--no-replay]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections import deque
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd

from core.bus import EventBus
from core.clock import VirtualClock
from core.events import Candle, CandleClosed, Event, Topic
from market.recorded import load_klines

TICKER = "BTC/USDT"
START = datetime(2025, 3, 1, tzinfo=UTC)
END = datetime(2025, 4, 1, tzinfo=UTC)
FAST, SLOW = 10, 30
BAR_MS = 300_000
PEERS = {"backtesting.py": "sma_backtesting.py", "NautilusTrader": "sma_nautilus.py"}
PEER_PYTHON_ENV = "PEER_PYTHON"
DEFAULT_PEER_PYTHON = Path(__file__).resolve().parent / ".venv-peer" / "bin" / "python"


def _ms(at: datetime) -> int:
    return int(at.timestamp() * 1000)


def _bars() -> pd.DataFrame:
    frame = load_klines(TICKER, "5m")
    return frame[(frame.index >= _ms(START)) & (frame.index < _ms(END))]


class SmaCross:
    """The strategy, incrementally: two running sums."""

    def __init__(self) -> None:
        self.closes: deque[float] = deque(maxlen=SLOW)
        self.fast_sum = self.slow_sum = 0.0
        self.was_above: bool | None = None
        self.holding = False
        self.trades = 0

    def on_close(self, event: Event) -> None:
        assert isinstance(event, CandleClosed)
        close = event.candle.close
        if len(self.closes) == SLOW:
            self.slow_sum -= self.closes[0]
        if len(self.closes) >= FAST:
            self.fast_sum -= self.closes[-FAST]
        self.closes.append(close)
        self.slow_sum += close
        self.fast_sum += close
        if len(self.closes) < SLOW:
            return
        above = self.fast_sum / FAST > self.slow_sum / SLOW
        if self.was_above is not None:
            if above and not self.was_above and not self.holding:
                self.holding, self.trades = True, self.trades + 1
            elif self.was_above and not above and self.holding:
                self.holding = False
        self.was_above = above


def vigil_loop(bars: pd.DataFrame) -> dict[str, float]:
    return asyncio.run(_vigil_loop(bars))


async def _vigil_loop(bars: pd.DataFrame) -> dict[str, float]:
    opens = [int(at) for at in bars.index.to_numpy()]
    ohlcv = bars[["open", "high", "low", "close", "volume"]].to_numpy().tolist()
    clock = VirtualClock(opens[0])
    bus = EventBus()
    strategy = SmaCross()
    bus.subscribe(Topic.CANDLE_CLOSED, strategy.on_close, name="sma_cross")
    started = time.perf_counter()
    for open_ms, (open_, high, low, close, volume) in zip(opens, ohlcv, strict=True):
        await clock.advance_to((open_ms + BAR_MS - opens[0]) / 1000)
        candle = Candle(
            open_time_ms=open_ms, open=open_, high=high, low=low, close=close, volume=volume
        )
        bus.publish(CandleClosed(ticker=TICKER, timeframe="5m", candle=candle))
    secs = time.perf_counter() - started
    return {"bars": len(opens), "secs": secs, "trades": strategy.trades}


def vigil_replay(bars: pd.DataFrame) -> dict[str, float]:
    from runner.config import load_settings
    from runner.logging_setup import configure_logging
    from runner.replay.build import ReplayOptions, build_replay, replay_settings
    from runner.replay.command import run_replay

    configure_logging("ERROR")
    with tempfile.TemporaryDirectory(prefix="bench_peers_") as scratch:
        options = ReplayOptions(
            start_ms=_ms(START), end_ms=_ms(END), out_dir=Path(scratch) / "run", tickers=(TICKER,)
        )

        async def run() -> float:
            replay = build_replay(replay_settings(load_settings(), options), options)
            outcome = await run_replay(replay)
            if not outcome.passed:  # a time of a broken run would flatter vigil
                raise RuntimeError(f"vigil's replay did not pass: {outcome.failure}")
            return outcome.wall_secs

        secs = asyncio.run(run())
    return {"bars": len(bars), "secs": secs, "trades": float("nan")}


def peer(script: str, csv_path: Path) -> Callable[[pd.DataFrame], dict[str, float]] | str:
    """A runner for the peer, or why it is skipped."""
    python = Path(os.environ.get(PEER_PYTHON_ENV, DEFAULT_PEER_PYTHON))
    if not python.exists():
        return f"no peer venv at {python} (make peers-venv, or set {PEER_PYTHON_ENV})"
    module = {"sma_backtesting.py": "backtesting", "sma_nautilus.py": "nautilus_trader"}[script]
    probe = subprocess.run([python, "-c", f"import {module}"], capture_output=True, check=False)
    if probe.returncode != 0:
        return f"{module} is not installed in {python}"
    path = Path(__file__).resolve().parent / "peers" / script

    def run(_bars: pd.DataFrame) -> dict[str, float]:
        done = subprocess.run(
            [python, path, str(csv_path), str(FAST), str(SLOW)],
            capture_output=True,
            text=True,
            check=True,
        )
        # the peer's own log lines may share stdout (Nautilus writes there): take our JSON
        found = re.search(r'\{"bars".*?\}', done.stdout)
        if found is None:
            raise RuntimeError(f"{script} printed no result: {done.stdout[-500:]}")
        result: dict[str, float] = json.loads(found.group(0))
        return result

    return run


def main(argv: Sequence[str] = ()) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench peers", description=__doc__)
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds (median)")
    parser.add_argument("--no-replay", action="store_true", help="skip vigil's full replay")
    args = parser.parse_args(list(argv))
    bars = _bars()
    print(
        f"SMA {FAST}/{SLOW} crossover, {TICKER} 5m, {START:%Y-%m-%d} .. {END:%Y-%m-%d}: "
        f"{len(bars):,} bars, {args.rounds} alternating rounds, median"
    )
    with tempfile.TemporaryDirectory(prefix="bench_peers_") as scratch:
        csv_path = Path(scratch) / "bars.csv"
        bars.reset_index().to_csv(csv_path, index=False)
        runners: dict[str, Callable[[pd.DataFrame], dict[str, float]]] = {
            "vigil engine loop": vigil_loop
        }
        for name, script in PEERS.items():
            found = peer(script, csv_path)
            if isinstance(found, str):
                print(f"  {name}: skipped: {found}")
            else:
                runners[name] = found
        secs: dict[str, list[float]] = {name: [] for name in runners}
        trades: dict[str, float] = {}
        for round_ in range(args.rounds):
            for name, run in runners.items():
                result = run(bars)
                secs[name].append(result["secs"])
                trades[name] = result["trades"]
            if round_ == 0 and not args.no_replay:  # once, between the rounds: it takes minutes
                result = vigil_replay(bars)
                secs["vigil full replay"] = [result["secs"]]
                trades["vigil full replay"] = result["trades"]
    rates = {name: len(bars) / statistics.median(values) for name, values in secs.items()}
    for name, rate in rates.items():
        print(  # the replay's trades are the fallback decider's, not the SMA's: n/a
            f"  {name:20s} {rate:14,.0f} bars/s  (median {statistics.median(secs[name]):.3f} s, "
            f"trades {'n/a: the fallback decider trades' if trades[name] != trades[name] else f'{trades[name]:g}'})"
        )
    for peer_name in PEERS:
        if peer_name in rates:
            for mine in ("vigil engine loop", "vigil full replay"):
                if mine in rates:
                    print(
                        f"  {mine} / {peer_name}: {rates[peer_name] / rates[mine]:.1f}x the wall "
                        "time"
                    )


if __name__ == "__main__":
    main(sys.argv[1:])

"""Helpers of the replay-vs-simulator parity test: run each path over one span, read back what it
decided at candle closes and which candles it saw close.

Both runs are in-process so the test can subscribe to each bus for ``CandleClosed``: the simulator
path is ``runner.app.build_daemon`` (what ``vigil run --sim`` builds: ScaledClock, in-process
SimExchange on loopback, warm-up through ccxt, the websocket listener, the paper broker) followed by
``warm_up_paths`` and ``supervisor.run`` exactly as ``runner.app.run_daemon`` does; the replay path is
``runner.replay.build.build_replay`` + ``runner.replay.command.run_replay``.

The simulator's clock keeps running while the daemon works, so how much of the market moved on
during the work a candle close starts (the regime refresh, the decision, its orders) would depend on
the machine's speed. ``CloseHold`` stops the scaled clock from each candle close until that work is
done, as replay's clock stands still until the daemon is quiet: time is driven by conditions, not by
how fast this machine happens to be.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fakes.journal_lines import journal_text

from core.events import CandleClosed, Event, Topic
from core.scaled_clock import ScaledClock
from runner.app import Daemon, build_daemon
from runner.config import Settings
from runner.replay.build import ReplayOptions, build_replay, replay_settings
from runner.replay.command import run_replay
from runner.warm_paths import warm_up_paths

CANDLE_MS = 900_000  # the 15m grid every candle close falls on
CLOSE_PREFIX = "candle_close:"

#: (ticker, timeframe, open_time_ms) -> (open, high, low, close, volume)
Closes = dict[tuple[str, str, int], tuple[float, float, float, float, float]]


@dataclass(frozen=True)
class PathRun:
    """What one path did: its journal lines, the candles it saw close, its fills, and from which
    simulated instant it was trading (after warm-up)."""

    decisions: list[dict[str, Any]]
    closes: Closes
    trades: list[dict[str, str]]
    trading_from_ms: int


def grid_instant(at_ms: int) -> int:
    """The candle-close instant a decision belongs to: the nearest 15m boundary (the replay
    decides on the closing update, a grid step before the boundary; the simulator a moment
    after that update arrives)."""
    return (at_ms + CANDLE_MS // 2) // CANDLE_MS * CANDLE_MS


def close_triggers(record: dict[str, Any]) -> tuple[str, ...]:
    return tuple(sorted(t for t in record["trigger"] if t.startswith(CLOSE_PREFIX)))


def by_close_instant(decisions: list[dict[str, Any]]) -> dict[int, list[dict[str, Any]]]:
    """Candle-close decisions grouped by the close instant they were made at."""
    grouped: dict[int, list[dict[str, Any]]] = {}
    for record in decisions:
        if close_triggers(record):
            grouped.setdefault(grid_instant(record["at_ms"]), []).append(record)
    return grouped


def decision_view(record: dict[str, Any]) -> dict[str, Any]:
    """What must be equal between the two paths at one candle close (see the test's docstring).

    ``position_pct`` and the accepted notional are rounded to 9 significant digits: the indicator
    values differ in the 11th digit because the two paths seed their OHLCV history at different
    instants (the simulator's warm-up takes wall time, so its clock has moved on), and an
    exponential average keeps a trace of where it started."""
    raw = record["raw_decision"]["decisions"]
    snap = record["snapshot"]
    return {
        "closes": close_triggers(record),
        "decided_by": record["decided_by"],
        "actions": {d["ticker"]: (d["action"], _sig(d["position_pct"])) for d in raw},
        "accepted": [
            (i["ticker"], i["action"], _sig(i.get("notional_usd"))) for i in record["accepted"]
        ],
        "orders": [(o["ticker"], o["side"], o["status"]) for o in record["orders"]],
        "portfolio_value": _sig(snap["portfolio_value"]),
        "cash": _sig(snap["cash"]),
        "open_positions": sorted(p["ticker"] for p in snap["open_positions"]),
        "prices": {t: v["price"] for t, v in snap["tickers"].items()},
        "regime": snap["regime"],
        "funding_rates": snap["funding_rates"],
        "fear_greed": snap["fear_greed"],
    }


def _sig(value: float | None) -> float | None:
    return None if value is None else float(f"{value:.9g}")


def read_run(state_dir: Path, closes: Closes, trading_from_ms: int) -> PathRun:
    logs = state_dir / "logs"
    # across segments: the daemon's journal rotates at the simulated UTC midnight
    decisions = [json.loads(line) for line in journal_text(logs / "decisions.jsonl").splitlines()]
    trades_text = (logs / "trades.csv").read_text().splitlines()
    header = trades_text[0].split(",")
    trades = [dict(zip(header, row.split(","), strict=True)) for row in trades_text[1:]]
    return PathRun(decisions, closes, trades, trading_from_ms)


class CloseRecorder:
    """Every ``CandleClosed`` a bus carries, and an event set once a candle ending at or after
    ``end_ms`` has closed."""

    def __init__(self, end_ms: int) -> None:
        self.closes: Closes = {}
        self.reached_end = asyncio.Event()
        self._end_ms = end_ms

    def on_close(self, event: Event) -> None:
        assert isinstance(event, CandleClosed)
        c = event.candle
        key = (event.ticker, event.timeframe, c.open_time_ms)
        self.closes[key] = (c.open, c.high, c.low, c.close, c.volume)
        if event.timeframe == "15m" and c.open_time_ms + CANDLE_MS >= self._end_ms:
            self.reached_end.set()


class CloseHold:
    """Holds the simulator daemon's ``ScaledClock`` from a candle close until the daemon has handled
    it: every regime refresh of the closes seen is done and the decision they asked for has finished
    (orders included). Subscribed inline, so the hold starts at the close, before any of that work.

    A guard of ``guard_secs`` real seconds releases a hold that never ends (counted in ``overran``:
    something inside waited on the held clock itself)."""

    def __init__(self, daemon: Daemon, guard_secs: float = 20.0) -> None:
        assert isinstance(daemon.clock, ScaledClock)
        self._clock = daemon.clock
        self._regimes = daemon.decision.regimes
        self._routine = daemon.decision.routine
        self._guard_secs = guard_secs
        self._release: asyncio.Task[None] | None = None
        self.holds = 0
        self.overran = 0

    def on_close(self, event: Event) -> None:
        if self._release is not None and not self._release.done():
            return  # already held: this close's work is awaited by the same release
        hold = contextlib.ExitStack()
        hold.enter_context(self._clock.hold())
        self.holds += 1
        self._release = asyncio.get_running_loop().create_task(self._release_when_handled(hold))

    async def _release_when_handled(self, hold: contextlib.ExitStack) -> None:
        with hold:
            try:
                async with asyncio.timeout(self._guard_secs):
                    while True:
                        await self._regimes.wait_for_refreshes()
                        routine = self._routine
                        busy = routine.deciding or routine.pending_reasons
                        if not busy and not self._regimes.refresh_pending:
                            return
                        await asyncio.sleep(0.001)  # polling the routine's state
            except TimeoutError:
                self.overran += 1

    async def stop(self) -> None:
        if self._release is not None:
            self._release.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._release


async def run_sim_daemon(settings: Settings, end_ms: int, timeout_secs: float) -> PathRun:
    """``vigil run --sim`` in-process until the 15m candle ending at ``end_ms`` has closed."""
    daemon = await build_daemon(settings)
    recorder = CloseRecorder(end_ms)
    daemon.bus.subscribe(Topic.CANDLE_CLOSED, recorder.on_close, name="parity_closes")
    close_hold = CloseHold(daemon)
    market = daemon.market
    await warm_up_paths(settings, daemon.clock, market, daemon.decision)  # on the held clock
    if daemon.decision.broker_parts.start is not None:
        await daemon.decision.broker_parts.start()
    trading_from_ms = daemon.clock.now_ms()
    daemon.bus.subscribe(Topic.CANDLE_CLOSED, close_hold.on_close, name="parity_hold")
    supervised = asyncio.create_task(daemon.supervisor.run(), name="parity sim daemon")
    try:
        async with asyncio.timeout(timeout_secs):
            waiting = asyncio.create_task(recorder.reached_end.wait())
            done, _ = await asyncio.wait({supervised, waiting}, return_when=asyncio.FIRST_COMPLETED)
            waiting.cancel()
            assert supervised not in done, "the sim daemon's supervisor stopped on its own"
            # let the decision of the last close finish before stopping
            while daemon.decision.routine.deciding or daemon.decision.routine.pending_reasons:
                await asyncio.sleep(0.01)
    finally:
        await close_hold.stop()
        daemon.supervisor.request_stop("parity test: span done")
        await supervised
    assert close_hold.holds > 0
    assert close_hold.overran == 0, "a candle close's work waited on the held clock"
    return read_run(settings.state_dir, recorder.closes, trading_from_ms)


async def run_replay_path(settings: Settings, options: ReplayOptions) -> PathRun:
    replay = build_replay(replay_settings(settings, options), options)
    recorder = CloseRecorder(options.end_ms)
    replay.bus.subscribe(Topic.CANDLE_CLOSED, recorder.on_close, name="parity_closes")
    outcome = await run_replay(replay)
    assert outcome.finished, outcome
    return read_run(options.out_dir, recorder.closes, options.start_ms)


__all__ = [
    "CANDLE_MS",
    "CloseHold",
    "CloseRecorder",
    "Closes",
    "PathRun",
    "by_close_instant",
    "close_triggers",
    "decision_view",
    "grid_instant",
    "read_run",
    "run_replay_path",
    "run_sim_daemon",
]

"""Replay runs the same daemon as ``vigil run --sim``: over the same span both make the same
candle-close decisions and see the same closed candles (issue #8's parity test).

The two paths: the daemon against the simulator (``build_daemon`` with ``market.source="sim"``: a
ScaledClock, the in-process SimExchange on loopback, warm-up through ccxt, the websocket listener,
the paper broker) and ``vigil replay`` (``build_replay`` + ``run_replay`` on the VirtualClock),
both with the fallback decider, the paper broker and the same HMM seed.

What must be equal, and what cannot be, because of the two clocks:

- A scaled clock keeps running while the daemon works, unless held: the daemon holds it during
  warm-up, and the test (``parity_support.CloseHold``) from each candle close until the daemon has
  handled it (regime refreshes, the decision and its orders), so how far the market moves during
  that work does not depend on the machine's speed. Only the close instants after the simulator's
  start are compared (the replay's earlier closes must be fill-free, so the state carried into the
  window is the same).
- In the simulator a decision lands a little after its closing update; in replay at the update's
  instant. Decisions are matched by the candle-close instant (nearest 15m boundary).
- At a 4h close both paths decide with the regime refreshed from that close: the snapshot waits for
  the refresh (``regime.view``), in the simulator as in replay.
- Gate layers other than the candle close (the agent's timer, anomaly z-scores, wake conditions)
  fire at instants set by when earlier decisions ended, which differ between the clocks, and their
  decisions fill at intra-candle prices. With ``gate.cooldown_secs`` (1000 s) longer than the 15m
  spacing of closes, each close restarts the cooldown before it ends, so only closes pass the
  gate on both paths; that is config, not a change of code.
- The simulator's kline cadence is fixed at replay's 75 s (``parity_support`` explains why a
  test hook is needed).
- A stall of the test process (a loaded machine: a busy core, a slow fsync) must not move the
  market on. The simulator daemon's clock leaves stalls out (``ScaledClock.absorb_stalls``: of
  any gap in the event loop's running, at most 50 ms counts, 18 simulated seconds here, well
  under a kline update), so after a stall the simulator sends what was due before it, not a
  burst that carries the next candle's prices into a close's decision. Belt and braces: the
  listener's silence timeout, the watchdog's and the derivatives' stale limits are a simulated
  day (``NEVER_SECS``), so a long run of short scheduling delays cannot look like a silent
  exchange either.
- The simulated speed is low enough that a REST round-trip or a decision stays far below a kline
  update interval (75 s) and the derivatives sources' stale limit (165 s) in simulated time. (At
  600x a derivatives poll once took longer than 165 simulated seconds: the snapshot had funding
  null, the fallback re-weighted its signals and bought ETH at 9.27 % instead of 7.17 %.)

Compared per close instant in the window: the candle-close triggers, who decided, every ticker's
action and size, the accepted orders and their notional, the order outcomes, portfolio value,
cash, open positions, prices, regime, funding and Fear & Greed in the snapshot. Sizes and money are
compared to 9 significant digits (see ``parity_support.decision_view``). Also: every candle both
saw close has the same OHLCV, and the fills in the window are the same (side, quantity, price).
The window must hold at least one BUY, so the comparison covers an order and the state after it.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

import pytest
from parity_support import (
    CANDLE_MS,
    PathRun,
    by_close_instant,
    decision_view,
    run_replay_path,
    run_sim_daemon,
)

from derivatives.config import DerivativesConfig, SourceTiming
from gate.gate import GateConfig
from runner.config import MarketConfig, Settings, SimConfig, SupervisorConfig
from runner.replay.build import ReplayOptions

pytestmark = pytest.mark.e2e

TICKERS = ("BTC/USDT", "ETH/USDT", "SOL/USDT")
START = datetime(2025, 3, 1, 3, 0, tzinfo=UTC)
END = datetime(2025, 3, 1, 8, 45, tzinfo=UTC)  # the fallback buys ETH at the 08:00 close
SPEED = 360.0
UPDATE_INTERVAL_MS = 75_000
SEED = 42
#: one close of slack after the simulator's start for the listener's connect-time backfill
BACKFILL_SLACK_MS = CANDLE_MS


def _ms(at: datetime) -> int:
    return int(at.timestamp() * 1000)


#: simulated seconds nothing in this test may take for silence or staleness. Before the
#: simulator's clock left stalls out, a process stalled for 600 / 360 = 1.7 real seconds looked
#: like a silent exchange (the listener reconnected and lost the closes in between), 300 s of it
#: fired the watchdog and 165 s left funding stale. A day is 4 real minutes here: only a hung
#: test reaches it.
NEVER_SECS = 86_400.0
#: the recorded sources the simulator serves (OHLCV, funding, Fear & Greed, PAXG), kept usable
#: for NEVER_SECS after their last poll
PATIENT = SourceTiming(ttl_secs=55.0, stale_factor=NEVER_SECS / 55.0)


def _settings(state_dir: Path, *, source: Literal["sim", "replay"]) -> Settings:
    return Settings(
        state_dir=state_dir,
        anthropic_api_key=None,
        market=MarketConfig(
            source="sim" if source == "sim" else "binance",
            tickers=TICKERS,
            silence_timeout_secs=NEVER_SECS,
        ),
        sim=SimConfig(start=START, speed=SPEED, update_interval_ms=UPDATE_INTERVAL_MS),
        gate=GateConfig(cooldown_secs=1000.0),
        supervisor=SupervisorConfig(watchdog_silence_secs=NEVER_SECS),
        derivatives=DerivativesConfig(
            funding=PATIENT,
            paxg=PATIENT,
            fear_greed=SourceTiming(ttl_secs=3600.0, stale_factor=NEVER_SECS / 3600.0),
        ),
    )


def _window(sim: PathRun) -> tuple[int, int]:
    first = -(-sim.trading_from_ms // CANDLE_MS) * CANDLE_MS + BACKFILL_SLACK_MS
    return first, _ms(END)  # the close at END itself is the last one and may be cut short


def _fills(run: PathRun, first_ms: int, end_ms: int) -> list[tuple[str, str, str, str]]:
    return [
        (t["ticker"], t["side"], t["quantity"], t["price"])
        for t in run.trades
        if first_ms - CANDLE_MS // 2 <= int(t["at_ms"]) < end_ms
    ]


#: hang guards, real seconds. The span is 57.5 s of real time at SPEED, whatever the machine;
#: the rest (warm-up, each close's work while the clock is held, the replay) is CPU: 66 s in all
#: on a quiet machine, 91 s beside seven busy processes, which would make a 5x slowdown ~105 s
#: plus the stalls the simulator's clock leaves out. 150 s and 180 s were too close to that.
SIM_DAEMON_GUARD_SECS = 240.0


@pytest.mark.timeout(SIM_DAEMON_GUARD_SECS + 60)
async def test_replay_makes_the_sim_daemons_candle_close_decisions(tmp_path: Path) -> None:
    sim = await run_sim_daemon(
        _settings(tmp_path / "sim", source="sim"), _ms(END), timeout_secs=SIM_DAEMON_GUARD_SECS
    )
    options = ReplayOptions(
        start_ms=_ms(START),
        end_ms=_ms(END),
        out_dir=tmp_path / "replay",
        tickers=TICKERS,
        seed=SEED,
        update_interval_ms=UPDATE_INTERVAL_MS,
    )
    replay = await run_replay_path(_settings(tmp_path / "replay", source="replay"), options)

    first_ms, end_ms = _window(sim)
    sim_closes = by_close_instant(sim.decisions)
    replay_closes = by_close_instant(replay.decisions)
    instants = [i for i in sorted(replay_closes) if first_ms <= i < end_ms]
    assert len(instants) >= 8, f"window too short: {first_ms}..{end_ms}"
    assert instants == [i for i in sorted(sim_closes) if first_ms <= i < end_ms]
    # every 15m boundary in the window made exactly one decision on each path
    assert instants == list(range(first_ms, end_ms, CANDLE_MS))
    before = [r for i, rs in replay_closes.items() if i < first_ms for r in rs]
    assert not any(r["accepted"] for r in before), "replay traded before the compared window"
    for run in (replay, sim):
        assert not [t for t in run.trades if int(t["at_ms"]) < first_ms - CANDLE_MS // 2]

    for instant in instants:
        assert len(sim_closes[instant]) == 1, sim_closes[instant]
        late_ms = sim_closes[instant][0]["at_ms"] - (instant - UPDATE_INTERVAL_MS)
        assert late_ms < UPDATE_INTERVAL_MS, (
            f"the sim daemon decided {late_ms} ms after the closing update: it fell behind its "
            "clock (a loaded machine?), so it saw a later price; lower SPEED"
        )
        assert len(replay_closes[instant]) == 1, replay_closes[instant]
        got, want = decision_view(replay_closes[instant][0]), decision_view(sim_closes[instant][0])
        assert got == want, f"close at {datetime.fromtimestamp(instant / 1000, UTC)}"

    buys = [i for i in instants for a in replay_closes[i][0]["accepted"] if a["action"] == "BUY"]
    assert buys, "the window holds no BUY: pick a span where the fallback trades"
    assert buys[0] < instants[-1], "no close after the first BUY: the state after it is untested"
    assert _fills(replay, first_ms, end_ms) == _fills(sim, first_ms, end_ms)
    assert _fills(replay, first_ms, end_ms)

    both = sim.closes.keys() & replay.closes.keys()
    in_window = {k for k in both if first_ms - CANDLE_MS <= k[2] < end_ms}
    assert {k[1] for k in in_window} == {"15m", "1h", "4h"}
    assert len({k for k in in_window if k[1] == "15m"}) == 3 * (len(instants) + 1)
    assert {k: replay.closes[k] for k in both} == {k: sim.closes[k] for k in both}

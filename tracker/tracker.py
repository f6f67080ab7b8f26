"""``PositionTracker``: guards every open position in one supervised loop.

- Safety layer, every ``safety_interval_secs`` (30 s): stop loss and trailing stop
  (``tracker.safety``). The trailing high and the armed flag are saved in ``runner_state.json``
  whenever they change, so they survive a restart.
- Agent layer, on every ``agent_every_cycles``-th safety cycle (3 min): the reviewer's EXIT / ADD
  / HOLD per position; positions it does not answer for (no reviewer, a failure, a timeout, a
  missing verdict) get the fallback score's verdict (``tracker.score``); see ``tracker.review``.
- Exits are SELL intents through the broker with the decision id
  ``exit-<reason>-<ticker>-<at_ms>``. The SELL's client order id is saved with the position BEFORE
  it is sent (a decision's SELL too, in ``filter_sells``). A filled exit is first handed to
  ``record_exit`` (the durable exits outbox, keyed by that client order id), then untracked, then
  published as ``position.exit`` (PnL of the fill vs the entry, holding time, regime and signals at
  entry). A kill anywhere in between is settled on restart: the saved exit order is looked up and
  its fill recorded (recording the same key twice adds nothing). The fill itself reaches
  ``trades.csv`` through ``order.filled``, like every fill.
- Tracking starts on ``position.opened`` (inline bus subscription, ``attach``). On start the loop
  reconciles with the broker's positions before its first check.

The parts: ``tracker.tracked_book`` (the tracked positions, exits in flight, price samples, their
copy in the state store, reconcile), ``tracker.exits`` (selling, following, settling; the decision
routine's SELLs), ``tracker.market_view`` (prices, regimes, BTC's 1h change), ``tracker.safety_pass``
(each position's safety check and its verdict memo). This class keeps the loop, its cycle grid and
the public methods the runner and the agent layer call.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from broker.port import Broker, OrderIntent, OrderResult, PositionDetail
from broker.trading_state import TradingSwitch
from core.backoff import Backoff
from core.bus import EventBus
from core.clock import Clock, sleep_passable
from core.errors import HaltTradingError
from core.events import Event, PositionExit, PositionOpened
from tracker.config import TrackerConfig
from tracker.exits import ExitPath, ExitRecorder
from tracker.market_view import MarketView, PriceSource, RegimeSource
from tracker.ports import HeldView, PositionReviewer, ReviewVerdict
from tracker.positions import StateStore, TrackedPosition
from tracker.review import AgentLayer
from tracker.safety import ExitReason
from tracker.safety_pass import SafetyPass
from tracker.tracked_book import TrackedBook

log = logging.getLogger(__name__)


class PositionTracker:
    def __init__(
        self,
        clock: Clock,
        bus: EventBus,
        broker: Broker,
        store: StateStore,
        *,
        reviewer: PositionReviewer | None,
        price: PriceSource,
        regime: RegimeSource,
        config: TrackerConfig | None = None,
        btc_change_1h_pct: Callable[[], float | None] = lambda: None,
        trading: TradingSwitch | None = None,
        record_exit: ExitRecorder | None = None,
        failpoint: Callable[[str], None] = lambda _name: None,
        rng: random.Random | None = None,
    ) -> None:
        """``store`` must be loaded; the positions it holds are tracked again (a restart), with
        the exit orders that were in flight.
        ``btc_change_1h_pct``: BTC's change over the last hour in percent (None: unknown), for
        the fallback score's correlation term. ``trading``: a ``HaltTradingError`` halts it, and
        while it is HALTED the agent layer places no ADD (stops and exits still run). ``rng`` draws
        the jitter of a failed safety check's retry (the daemon's one source; a replay's is
        seeded)."""
        self._clock = clock
        self._broker = broker
        self._held = broker if isinstance(broker, HeldView) else None
        self.config = config or TrackerConfig()
        self._retry = Backoff(
            base_secs=self.config.retry_base_secs,
            # never wait longer than a safety interval: the stops must keep being checked
            cap_secs=min(self.config.retry_cap_secs, self.config.safety_interval_secs),
            jitter_fraction=self.config.retry_jitter_fraction,
        )
        self._rng = rng or random.Random()
        self._book = TrackedBook(
            store, momentum_samples=self.config.momentum_samples, on_save_failed=self._halt
        )
        self._market = MarketView(price, regime, btc_change_1h_pct)
        self._exits = ExitPath(
            clock,
            bus,
            broker,
            self._book,
            self._market,
            record_exit=record_exit or (lambda _key, _event: None),
            failpoint=failpoint,
            on_record_failed=self._halt,
        )
        self._safety = SafetyPass(self._book, self._market, self._exits, self)
        self._reconciled = False
        self._interval = self.config.safety_interval_secs  # as ``run`` started
        self._cycle = 0  # safety cycles done since ``run`` started
        # (config, its agent_every_cycles): asked at every cycle and every quiet one passed over
        self._agent_every: tuple[TrackerConfig | None, int] = (None, 1)
        self._next_due = 0.0  # clock reading the next cycle is due at
        self._reviewing = False
        self._review_task: asyncio.Task[Any] | None = None
        self._trading = trading
        self._agent = AgentLayer(
            clock, broker, reviewer, self.config, self, halted=lambda: self.trading_halted
        )
        self.safety_checks = 0
        self.agent_reviews = 0
        self.loop_failures = 0
        if self._book.positions:
            log.info("tracker: resumed %s", ", ".join(sorted(self._book.positions)))

    # ---- tracking (``tracker.tracked_book``)

    def on_position_opened(self, event: Event) -> None:
        """Inline ``position.opened`` handler: tracked before the next safety check."""
        if isinstance(event, PositionOpened):
            self.track(
                event.ticker,
                event.entry_price,
                event.quantity,
                event.at_ms,
                event.signals,
                event.regime or self.regime_now(event.ticker),
            )

    def track(
        self,
        ticker: str,
        entry_price: float,
        quantity: float,
        at_ms: int,
        signals: Mapping[str, float],
        regime: str,
    ) -> TrackedPosition:
        return self._book.track(ticker, entry_price, quantity, at_ms, signals, regime)

    def untrack(self, ticker: str) -> TrackedPosition | None:
        return self._book.untrack(ticker)

    def is_tracked(self, ticker: str) -> bool:
        return ticker in self._book.positions

    def position(self, ticker: str) -> TrackedPosition | None:
        return self._book.positions.get(ticker)

    @property
    def positions(self) -> Mapping[str, TrackedPosition]:
        return dict(self._book.positions)

    def is_exiting(self, ticker: str) -> bool:
        """An exit order for ``ticker`` is open at the broker."""
        return self._book.is_exiting(ticker)

    def recent_prices(self, ticker: str) -> list[float]:
        """The prices the last safety checks saw for ``ticker``, oldest first."""
        return self._book.recent_prices(ticker)

    # ---- the loop

    async def run(self) -> None:
        """Reconcile once, then a safety check every interval and the agent layer every n-th one.

        Checks keep to a fixed grid of the clock (a slow check does not shift the next ones); a
        failing check is logged and retried after a capped, jittered backoff. A cycle that would
        only count itself (``_quiet``) may be passed over by a replay's clock (``_quiet_cycle``).
        """
        failures = 0
        self._interval = self.config.safety_interval_secs
        self._cycle = 0
        self._next_due = self._clock.monotonic_secs()
        while True:
            try:
                if not self._reconciled:
                    await self.reconcile_with_broker()
                await self.check_safety()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self.loop_failures += 1
                self._halt_on(exc, "safety check")
                delay = self._retry.delay_secs(failures, self._rng.random())
                failures += 1
                log.exception(
                    "tracker: safety check failed (%d in a row); retry in %.1f s", failures, delay
                )
                await self._clock.sleep(delay)
                continue
            failures = 0
            if self._agent_cycle_due():
                await self._review_logged(await self._reconcile_logged())
            await sleep_passable(
                self._clock, self._end_cycle(), idle=self._quiet, passed=self._quiet_cycle
            )

    def _agent_cycle_due(self) -> bool:
        every = self._agent_every
        if every[0] is not self.config:  # a frozen config: its cadence is worked out once
            every = self._agent_every = (self.config, self.config.agent_every_cycles)
        return self._cycle > 0 and self._cycle % every[1] == 0

    def _end_cycle(self) -> float:
        """Count the cycle done; the seconds to the next slot of the grid (missed slots are
        skipped rather than run back to back)."""
        interval = self._interval
        self._cycle += 1
        self._next_due += interval
        now = self._clock.monotonic_secs()
        if self._next_due < now:
            self._next_due += interval * (int((now - self._next_due) / interval) + 1)
        return self._next_due - now

    def _quiet(self) -> bool:
        """The coming cycle would only count itself and sample prices: reconciled, nothing
        exiting, every tracked position's check a sample only (``SafetyPass.only_samples``), and not
        an agent cycle unless nothing is tracked and the broker holds nothing
        (``_broker_holds_nothing``). A clock asks this, and passes the cycle over, only where the
        cycle itself would run (an instant where nothing else wakes, or the cycle's own turn in
        the loop's queue): what these read then is what the cycle would have read."""
        if not self._reconciled or self._book.pending_exits:
            return False
        if self._agent_cycle_due():
            return not self._book.positions and self._broker_holds_nothing()
        return self._safety.only_samples(self.config)

    def _broker_holds_nothing(self) -> bool:
        """An agent cycle with nothing tracked whose reconcile would find nothing: the broker
        holds no position (none to track) and has no open order (none its expiry pass could
        expire). It is read where the cycle itself would run (``_quiet``), so nothing changes
        the broker between this reading and the cycle it stands for. A broker
        without that view (a live exchange, whose clock never passes over) is always asked."""
        held = self._held
        return held is not None and not held.ledger.positions and not held.open_orders()

    def _quiet_cycle(self) -> float:
        """A quiet cycle passed over: what its run would have changed (a safety pass that only
        samples each price, an agent cycle's review of nothing, the cycle's end); the seconds of
        the next sleep."""
        self.safety_checks += 1
        for ticker in self._book.positions:
            price = self._market.quiet_price(ticker)
            assert price is not None  # ``only_samples`` read it at this instant
            self._book.sample(ticker, price)
        if self._agent_cycle_due():
            self.agent_reviews += 1
        return self._end_cycle()

    @property
    def reviewing(self) -> bool:
        """A review (maybe a Claude call) is in flight: replay keeps time still until it is done."""
        return self._reviewing

    @property
    def review_task(self) -> asyncio.Task[Any] | None:
        """The task running the last review (replay asks whether it is parked on the clock)."""
        return self._review_task

    async def _review_logged(self, held: Sequence[PositionDetail] | None) -> None:
        """``held``: what the cycle's reconcile just read from the broker (None: read again)."""
        self._reviewing = True
        self._review_task = asyncio.current_task()
        try:
            self.agent_reviews += 1
            await self._agent.run_review(held)  # the verdicts as they are: nobody reads them here
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            # the agent layer is advisory; the safety layer keeps running on its own cadence
            self.loop_failures += 1
            self._halt_on(exc, "agent layer")
            log.exception(
                "tracker: agent layer failed; next review in %.0f s",
                self.config.agent_interval_secs,
            )
        finally:
            self._reviewing = False

    # ---- safety layer

    async def check_safety(self) -> list[PositionExit]:
        """One safety pass over every tracked position (``tracker.safety_pass``); returns the
        exits it completed."""
        self.safety_checks += 1
        return await self._safety.check_all()

    # ---- exits (``tracker.exits``)

    async def exit_position(
        self, ticker: str, reason: ExitReason, *, reference_price: float | None = None
    ) -> PositionExit | None:
        """Sell the whole tracked position (``ExitPath.exit_position``)."""
        return await self._exits.exit_position(ticker, reason, reference_price=reference_price)

    def filter_sells(self, intents: Sequence[OrderIntent]) -> list[OrderIntent]:
        """Drop (and log) SELL intents for positions the tracker does not track."""
        return self._exits.filter_sells(intents)

    async def on_executed(
        self, intents: Sequence[OrderIntent], results: Sequence[OrderResult]
    ) -> None:
        """After the decision routine executed: a filled SELL of a tracked position is an exit."""
        await self._exits.on_executed(intents, results)

    # ---- agent layer

    async def review_positions(self) -> list[ReviewVerdict]:
        """One agent-layer pass (``tracker.review.AgentLayer``)."""
        self.agent_reviews += 1
        return await self._agent.review()

    # ---- reconcile

    async def _reconcile_logged(self) -> Sequence[PositionDetail] | None:
        """Each agent cycle: pick up what the broker did outside the tracker's sight (a resting
        limit filled later at an exchange, a position closed by hand). A failure waits a cycle.
        Returns what the broker holds (None: the reconcile failed), for the cycle's review."""
        try:
            return await self.reconcile_with_broker()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self._halt_on(exc, "reconcile")
            log.warning("tracker: reconcile with the broker failed (%s); next cycle", exc)
            return None

    async def reconcile_with_broker(self) -> Sequence[PositionDetail]:
        """Reconcile with the broker's positions; returns them as read."""
        held = await self._broker.get_positions_detail()
        self.reconcile(held)
        self._reconciled = True
        return held

    def reconcile(self, held: Sequence[PositionDetail]) -> None:
        """Make the tracked set match what the broker holds (each difference is logged)."""
        self._book.reconcile(held)

    def reconcile_one(self, detail: PositionDetail) -> None:
        """Follow the broker when a tracked position's quantity changed (an ADD filled, a partial
        SELL); ``TrackedBook.reconcile_one``."""
        self._book.reconcile_one(detail)

    # ---- the market (``tracker.market_view``) and the trading switch

    def mark_price(self, ticker: str) -> float | None:
        """The price source's price, None (logged once while it lasts) when there is none."""
        return self._market.mark_price(ticker)

    def regime_now(self, ticker: str) -> str:
        return self._market.regime_now(ticker)

    def btc_change_1h_pct(self) -> float | None:
        return self._market.btc_change_1h_pct()

    @property
    def trading_halted(self) -> bool:
        return self._trading is not None and self._trading.halted

    def _halt(self, why: str) -> None:
        if self._trading is not None:
            self._trading.halt(f"tracker: {why}")

    def _halt_on(self, exc: Exception, where: str) -> None:
        if isinstance(exc, HaltTradingError) and self._trading is not None:
            self._trading.halt(f"tracker {where}: {exc}")

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
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from broker.ids import client_order_id
from broker.port import Action, Broker, OrderIntent, OrderResult, PositionDetail
from broker.resting import cancel_resting_buys
from broker.trading_state import TradingSwitch
from core.backoff import Backoff
from core.bus import EventBus
from core.clock import Clock
from core.errors import HaltTradingError
from core.events import Event, PositionExit, PositionOpened
from tracker.config import TrackerConfig
from tracker.ports import PositionReviewer, ReviewVerdict
from tracker.positions import (
    UNKNOWN_REGIME,
    StateStore,
    TrackedPosition,
    pending_exits_from_state,
    positions_from_state,
    state_fields,
)
from tracker.review import AgentLayer
from tracker.safety import ExitReason, pnl_pct, safety_verdict

log = logging.getLogger(__name__)

PriceSource = Callable[[str], float | None]
RegimeSource = Callable[[str], str]
#: makes an exit durable (the exits outbox) under its key, the SELL's client order id
ExitRecorder = Callable[[str, PositionExit], object]


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
    ) -> None:
        """``store`` must be loaded; the positions it holds are tracked again (a restart), with
        the exit orders that were in flight.
        ``btc_change_1h_pct``: BTC's change over the last hour in percent (None: unknown), for
        the fallback score's correlation term. ``trading``: a ``HaltTradingError`` halts it, and
        while it is HALTED the agent layer places no ADD (stops and exits still run)."""
        self._clock = clock
        self._bus = bus
        self._broker = broker
        self._store = store
        self._price = price
        self._regime = regime
        self._btc_change_1h_pct = btc_change_1h_pct
        self.config = config or TrackerConfig()
        self._retry = Backoff(
            base_secs=self.config.retry_base_secs,
            # never wait longer than a safety interval: the stops must keep being checked
            cap_secs=min(self.config.retry_cap_secs, self.config.safety_interval_secs),
            jitter_fraction=self.config.retry_jitter_fraction,
        )
        self._rng = random.Random()
        self._positions = positions_from_state(store.current)
        self._samples: dict[str, deque[float]] = {}
        self._record_exit = record_exit or (lambda _key, _event: None)
        self._failpoint = failpoint
        self._pending_exits: dict[str, tuple[str, ExitReason]] = {  # ticker -> (order id, why)
            t: (order_id, ExitReason(reason))
            for t, (order_id, reason) in pending_exits_from_state(store.current).items()
            if t in self._positions
        }
        self._no_price: set[str] = set()
        self._exit_lock = asyncio.Lock()
        self._reconciled = False
        self._reviewing = False
        self._review_task: asyncio.Task[Any] | None = None
        self._trading = trading
        self._agent = AgentLayer(
            clock, broker, reviewer, self.config, self, halted=lambda: self.trading_halted
        )
        self.safety_checks = 0
        self.agent_reviews = 0
        self.loop_failures = 0
        if self._positions:
            log.info("tracker: resumed %s", ", ".join(sorted(self._positions)))

    # ---- tracking

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
        if ticker in self._positions:
            log.warning("tracker: %s was already tracked; the new entry replaces it", ticker)
        position = TrackedPosition(
            ticker=ticker,
            entry_price=entry_price,
            quantity=quantity,
            entry_time_ms=at_ms,
            signals=dict(signals),
            regime=regime,
            trailing_high=entry_price,
        )
        self._positions[ticker] = position
        self._samples.pop(ticker, None)
        self._persist()
        log.info("tracker: tracking %s: %s @ %s (regime %s)", ticker, quantity, entry_price, regime)
        return position

    def untrack(self, ticker: str) -> TrackedPosition | None:
        position = self._positions.pop(ticker, None)
        self._samples.pop(ticker, None)
        self._pending_exits.pop(ticker, None)
        if position is not None:
            self._persist()
            log.info("tracker: no longer tracking %s", ticker)
        return position

    def is_tracked(self, ticker: str) -> bool:
        return ticker in self._positions

    def position(self, ticker: str) -> TrackedPosition | None:
        return self._positions.get(ticker)

    @property
    def positions(self) -> Mapping[str, TrackedPosition]:
        return dict(self._positions)

    # ---- the loop

    async def run(self) -> None:
        """Reconcile once, then a safety check every interval and the agent layer every n-th one.

        Checks keep to a fixed grid of the clock (a slow check does not shift the next ones); a
        failing check is logged and retried after a capped, jittered backoff.
        """
        interval = self.config.safety_interval_secs
        failures = 0
        cycle = 0
        next_due = self._clock.monotonic_secs()
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
            if cycle > 0 and cycle % self.config.agent_every_cycles == 0:
                await self._reconcile_logged()
                await self._review_logged()
            cycle += 1
            next_due += interval
            now = self._clock.monotonic_secs()
            if next_due < now:  # overran: skip the missed slots rather than run them back to back
                next_due += interval * (int((now - next_due) / interval) + 1)
            await self._clock.sleep(next_due - now)

    @property
    def reviewing(self) -> bool:
        """A review (maybe a Claude call) is in flight: replay keeps time still until it is done."""
        return self._reviewing

    @property
    def review_task(self) -> asyncio.Task[Any] | None:
        """The task running the last review (replay asks whether it is parked on the clock)."""
        return self._review_task

    async def _review_logged(self) -> None:
        self._reviewing = True
        self._review_task = asyncio.current_task()
        try:
            await self.review_positions()
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
        """One safety pass over every tracked position; returns the exits it completed."""
        self.safety_checks += 1
        exits: list[PositionExit] = []
        for ticker in list(self._positions):
            if ticker in self._pending_exits:
                done = await self._follow_pending_exit(ticker)
                exits += [done] if done is not None else []
                continue
            price = self.mark_price(ticker)
            position = self._positions.get(ticker)
            if price is None or position is None:
                continue
            self._sample(ticker, price)
            verdict = safety_verdict(
                position.entry_price, price, position.trailing_high, position.armed, self.config
            )
            if verdict.armed != position.armed or verdict.trailing_high != position.trailing_high:
                if verdict.armed and not position.armed:
                    log.info(
                        "tracker: trailing stop armed for %s (peak PnL %.2f %%)",
                        ticker,
                        verdict.peak_pnl_pct,
                    )
                self._positions[ticker] = position.model_copy(
                    update={"trailing_high": verdict.trailing_high, "armed": verdict.armed}
                )
                self._persist()
            if verdict.exit is not None:
                log.warning(
                    "tracker: %s for %s: price %s, PnL %.2f %%, peak %.2f %%",
                    verdict.exit.value,
                    ticker,
                    price,
                    verdict.pnl_pct,
                    verdict.peak_pnl_pct,
                )
                done = await self.exit_position(ticker, verdict.exit, reference_price=price)
                exits += [done] if done is not None else []
        return exits

    # ---- exits

    async def exit_position(
        self, ticker: str, reason: ExitReason, *, reference_price: float | None = None
    ) -> PositionExit | None:
        """Sell the whole tracked position. Returns the published exit, or None when nothing was
        sold now (untracked: skipped and logged; not held: untracked; rejected: retried by the
        next check; an order still open: followed by the next checks)."""
        async with self._exit_lock:
            position = self._positions.get(ticker)
            if position is None:
                log.warning(
                    "tracker: %s for %s skipped: the position is not tracked", reason.value, ticker
                )
                return None
            if ticker in self._pending_exits:
                return await self._follow_pending_exit(ticker)
            held = {p.ticker: p for p in await self._broker.get_positions_detail()}.get(ticker)
            if held is None:
                log.warning(
                    "tracker: %s for %s: the broker holds no such position; untracked",
                    reason.value,
                    ticker,
                )
                self.untrack(ticker)
                return None
            for cancelled in await cancel_resting_buys(self._broker, (ticker,)):
                log.info(
                    "tracker: %s for %s cancels resting BUY %s", reason.value, ticker, cancelled
                )
            price = reference_price or self.mark_price(ticker) or held.mark_price
            price = price or position.entry_price
            at_ms = self._clock.now_ms()
            notional = held.quantity * price
            portfolio = await self._broker.get_portfolio_value()
            intent = OrderIntent(
                decision_id=f"exit-{reason.slug}-{ticker}-{at_ms}",
                ticker=ticker,
                action=Action.SELL,
                notional_usd=notional,
                reference_price=price,
                position_pct=min(1.0, notional / portfolio) if portfolio > 0 else 0.0,
                signal_weights=dict(position.signals),
                reasoning=reason.value,
            )
            self._expect_exit(ticker, client_order_id(intent.decision_id, ticker, "SELL"), reason)
            (result,) = await self._broker.execute_decisions([intent])
            return self._settle_exit(ticker, reason, result)

    async def _follow_pending_exit(self, ticker: str) -> PositionExit | None:
        order_id, reason = self._pending_exits[ticker]
        result = await self._broker.lookup(order_id)
        if result is None:
            log.error(
                "tracker: exit order %s for %s is unknown to the broker; retrying the exit",
                order_id,
                ticker,
            )
            del self._pending_exits[ticker]
            self._persist()
            return None
        return self._settle_exit(ticker, reason, result)

    def _expect_exit(self, ticker: str, order_id: str, reason: ExitReason) -> None:
        """Save the exit order's id with the position before it is sent (see the docstring)."""
        self._pending_exits[ticker] = (order_id, reason)
        self._persist()

    def _settle_exit(
        self, ticker: str, reason: ExitReason, result: OrderResult
    ) -> PositionExit | None:
        if result.status == "open":
            if self._pending_exits.get(ticker) != (result.client_order_id, reason):
                self._expect_exit(ticker, result.client_order_id, reason)
            log.info(
                "tracker: exit order %s for %s is open; following it",
                result.client_order_id,
                ticker,
            )
            return None
        if result.status != "filled" or result.average_price is None:
            if self._pending_exits.pop(ticker, None) is not None:
                self._persist()
            log.error(
                "tracker: %s for %s not filled (%s: %s); the next check retries",
                reason.value,
                ticker,
                result.status,
                result.reason or "no reason given",
            )
            return None
        self._failpoint("after_exit_fill")
        position = self._positions.get(ticker)
        if position is None:
            log.warning("tracker: exit of %s filled but it was untracked meanwhile", ticker)
            return None
        at_ms = result.at_ms or self._clock.now_ms()
        event = PositionExit(
            at_ms=at_ms,
            ticker=ticker,
            reason=reason.value,
            pnl_pct=pnl_pct(position.entry_price, result.average_price),
            holding_secs=max(0, at_ms - position.entry_time_ms) / 1000.0,
            regime=position.regime,
            signals=dict(position.signals),
        )
        log.info(
            "tracker: exited %s (%s) at %s: PnL %.2f %% after %.0f s",
            ticker,
            reason.value,
            result.average_price,
            event.pnl_pct,
            event.holding_secs,
        )
        self._record_exit(result.client_order_id, event)  # durable before it is forgotten
        self._failpoint("after_exit_recorded")
        self.untrack(ticker)
        self._bus.publish(event)
        return event

    # ---- the decision routine's SELLs

    def filter_sells(self, intents: Sequence[OrderIntent]) -> list[OrderIntent]:
        """Drop (and log) SELL intents for positions the tracker does not track."""
        kept = []
        for intent in intents:
            if intent.action is Action.SELL and intent.ticker not in self._positions:
                log.warning(
                    "tracker: SELL %s (decision %s) skipped: the position is not tracked",
                    intent.ticker,
                    intent.decision_id,
                )
                continue
            if intent.action is Action.SELL and intent.ticker in self._pending_exits:
                log.warning(
                    "tracker: SELL %s (decision %s) skipped: an exit order is already in flight",
                    intent.ticker,
                    intent.decision_id,
                )
                continue
            if intent.action is Action.SELL:  # saved before it is sent, as the tracker's exits
                cid = client_order_id(intent.decision_id, intent.ticker, "SELL")
                self._pending_exits[intent.ticker] = (cid, ExitReason.DECISION_SELL)
            kept.append(intent)
        if any(i.action is Action.SELL for i in kept):
            self._persist()
        return kept

    async def on_executed(
        self, intents: Sequence[OrderIntent], results: Sequence[OrderResult]
    ) -> None:
        """After the decision routine executed: a filled SELL of a tracked position is an exit."""
        for intent, result in zip(intents, results, strict=False):
            ticker = intent.ticker
            if intent.action is not Action.SELL or ticker not in self._positions:
                continue
            if result.status == "filled":
                held = {p.ticker: p for p in await self._broker.get_positions_detail()}
                if ticker in held:  # a partial SELL: the rest stays guarded
                    self._pending_exits.pop(ticker, None)
                    self.reconcile_one(held[ticker])
                    self._persist()
                    continue
            self._settle_exit(ticker, ExitReason.DECISION_SELL, result)

    # ---- agent layer

    async def review_positions(self) -> list[ReviewVerdict]:
        """One agent-layer pass (``tracker.review.AgentLayer``)."""
        self.agent_reviews += 1
        return await self._agent.review()

    # ---- reconcile

    async def _reconcile_logged(self) -> None:
        """Each agent cycle: pick up what the broker did outside the tracker's sight (a resting
        limit filled later at an exchange, a position closed by hand). A failure waits a cycle."""
        try:
            await self.reconcile_with_broker()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self._halt_on(exc, "reconcile")
            log.warning("tracker: reconcile with the broker failed (%s); next cycle", exc)

    async def reconcile_with_broker(self) -> None:
        self.reconcile(await self._broker.get_positions_detail())
        self._reconciled = True

    def reconcile(self, held: Sequence[PositionDetail]) -> None:
        """Make the tracked set match what the broker holds (each difference is logged)."""
        held_by_ticker = {p.ticker: p for p in held}
        for ticker in sorted(set(self._positions) - set(held_by_ticker)):
            if ticker in self._pending_exits:
                log.info(
                    "tracker: %s is no longer held and its exit order %s is in flight; the next "
                    "check settles it",
                    ticker,
                    self._pending_exits[ticker][0],
                )
                continue
            log.warning(
                "tracker: %s was tracked but the broker holds no position; untracked", ticker
            )
            self.untrack(ticker)
        for ticker, detail in sorted(held_by_ticker.items()):
            position = self._positions.get(ticker)
            if position is None:
                log.warning(
                    "tracker: the broker holds %s %s that was not tracked; tracking it "
                    "(entry %s, regime at entry %s, signals %s, as the broker's order recorded)",
                    detail.quantity,
                    ticker,
                    detail.entry_price,
                    detail.regime or "unknown",
                    detail.signals or "unknown",
                )
                self.track(
                    ticker,
                    detail.entry_price,
                    detail.quantity,
                    detail.opened_at_ms,
                    detail.signals,
                    detail.regime or UNKNOWN_REGIME,
                )
            else:
                self.reconcile_one(detail)

    def reconcile_one(self, detail: PositionDetail) -> None:
        """Follow the broker when a tracked position's quantity changed (an ADD filled, a partial
        SELL): its quantity and average entry become the position's. The trailing high (never
        below the entry) and the armed flag stay the tracker's."""
        position = self._positions.get(detail.ticker)
        if position is None or position.quantity == detail.quantity:
            return
        log.info(
            "tracker: %s now %s @ %s (was %s @ %s, per the broker)",
            detail.ticker,
            detail.quantity,
            detail.entry_price,
            position.quantity,
            position.entry_price,
        )
        self._positions[detail.ticker] = position.model_copy(
            update={
                "quantity": detail.quantity,
                "entry_price": detail.entry_price,
                "trailing_high": max(position.trailing_high, detail.entry_price),
            }
        )
        self._persist()

    # ---- helpers

    @property
    def trading_halted(self) -> bool:
        return self._trading is not None and self._trading.halted

    def _halt_on(self, exc: Exception, where: str) -> None:
        if isinstance(exc, HaltTradingError) and self._trading is not None:
            self._trading.halt(f"tracker {where}: {exc}")

    def _persist(self) -> None:
        """Record the tracked set in the state store and save it. A failed save is logged; the
        state stays in memory and the next change (or the daemon's shutdown save) writes it."""
        pending = {t: (cid, why.value) for t, (cid, why) in self._pending_exits.items()}
        self._store.replace(**state_fields(self._store.current, self._positions, pending))
        try:
            self._store.save()
        except Exception:
            log.exception("tracker: could not save runner state; kept in memory")

    def mark_price(self, ticker: str) -> float | None:
        """The price source's price, None (logged once while it lasts) when there is none."""
        price = self._price(ticker)
        if price is None or not price > 0:
            if ticker not in self._no_price:
                self._no_price.add(ticker)
                log.warning("tracker: no price for %s; its checks wait for one", ticker)
            return None
        if ticker in self._no_price:
            self._no_price.discard(ticker)
            log.info("tracker: price for %s is back", ticker)
        return price

    def regime_now(self, ticker: str) -> str:
        try:
            return self._regime(ticker)
        except Exception:
            log.exception("tracker: regime of %s unavailable; using %r", ticker, UNKNOWN_REGIME)
            return UNKNOWN_REGIME

    def btc_change_1h_pct(self) -> float | None:
        try:
            return self._btc_change_1h_pct()
        except Exception:
            log.exception("tracker: BTC's 1h change unavailable; the correlation term is 0")
            return None

    def recent_prices(self, ticker: str) -> list[float]:
        """The prices the last safety checks saw for ``ticker``, oldest first."""
        return list(self._samples.get(ticker, ()))

    def is_exiting(self, ticker: str) -> bool:
        """An exit order for ``ticker`` is open at the broker."""
        return ticker in self._pending_exits

    def _sample(self, ticker: str, price: float) -> None:
        samples = self._samples.get(ticker)
        if samples is None:
            samples = self._samples[ticker] = deque(maxlen=self.config.momentum_samples)
        samples.append(price)

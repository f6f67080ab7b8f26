"""The agent layer: every 3 minutes, EXIT / ADD / HOLD for each tracked position.

The reviewer (Claude, #5) is asked first, under ``review_timeout_secs`` of clock time. A position
it gives no verdict for (no reviewer, a failure, a timeout, a verdict missing) gets the fallback
score's verdict instead (``tracker.score``), which says why in its reason. EXIT goes through the
tracker's exit path; ADD places a BUY of ``add_pct`` of the portfolio, capped so the position stays
within ``max_position_pct`` and the cash (``tracker.agent_layer.add_size``); an ADD whose order is
still open blocks the next one for that ticker.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

from broker.port import Action, Broker, OrderIntent, PositionDetail
from core.clock import Clock
from core.clock_wait import wait_for
from core.events import PositionExit
from tracker.agent_layer import FallbackVerdict, add_size, position_review, scored_fallback
from tracker.config import TrackerConfig
from tracker.ports import PositionReview, PositionReviewer, ReviewAction, ReviewVerdict
from tracker.positions import TrackedPosition
from tracker.safety import ExitReason

log = logging.getLogger(__name__)

#: a reviewer's verdict, or the fallback's with its reason written only when read
Verdict = ReviewVerdict | FallbackVerdict


class TrackerView(Protocol):
    """What the agent layer needs from the ``PositionTracker``."""

    @property
    def positions(self) -> Mapping[str, TrackedPosition]: ...

    def mark_price(self, ticker: str) -> float | None: ...

    def regime_now(self, ticker: str) -> str: ...

    def recent_prices(self, ticker: str) -> list[float]: ...

    def btc_change_1h_pct(self) -> float | None: ...

    def is_exiting(self, ticker: str) -> bool: ...

    def reconcile_one(self, detail: PositionDetail) -> None: ...

    async def exit_position(
        self, ticker: str, reason: ExitReason, *, reference_price: float | None = None
    ) -> PositionExit | None: ...


class AgentLayer:
    def __init__(
        self,
        clock: Clock,
        broker: Broker,
        reviewer: PositionReviewer | None,
        config: TrackerConfig,
        tracker: TrackerView,
        *,
        halted: Callable[[], bool] = lambda: False,
    ) -> None:
        """``halted``: trading is HALTED, so no ADD is placed (an EXIT still is)."""
        self._clock = clock
        self._halted = halted
        self._broker = broker
        self._reviewer = reviewer
        self._config = config
        self._tracker = tracker
        self._pending_adds: dict[str, str] = {}  # ticker -> client order id of an open ADD

    async def review(self) -> list[ReviewVerdict]:
        """One pass: ask the reviewer, fall back per position, apply the verdicts."""
        return [v if isinstance(v, ReviewVerdict) else v.verdict() for v in await self.run_review()]

    async def run_review(self, held_now: Sequence[PositionDetail] | None = None) -> list[Verdict]:
        """``review`` with the fallback's verdicts as they are: the loop reads none of them.
        ``held_now``: the broker's positions as just read by the caller (the loop's reconcile,
        with nothing in between), instead of reading them again."""
        if not self._tracker.positions:
            return []
        now_ms = self._clock.now_ms()
        if held_now is None:
            held_now = await self._broker.get_positions_detail()
        held = {p.ticker: p for p in held_now}
        for ticker in list(self._tracker.positions):
            if ticker in held:
                self._tracker.reconcile_one(
                    held[ticker]
                )  # an ADD that filled since the last review
        reviews = {}
        for ticker, position in self._tracker.positions.items():
            price = self._tracker.mark_price(ticker)
            if price is not None and not self._tracker.is_exiting(ticker):
                regime_now = self._tracker.regime_now(ticker)
                reviews[ticker] = position_review(position, price, regime_now, now_ms)
        if not reviews:
            return []
        portfolio = await self._broker.get_portfolio_value()
        cash = await self._broker.get_cash()
        context = {"at_ms": now_ms, "portfolio_value_usd": portfolio, "cash_usd": cash}
        answered, why = await self._ask_reviewer(list(reviews.values()), context)
        verdicts: list[Verdict] = []
        for ticker, review in reviews.items():
            verdict = answered.get(ticker) or self._fallback(review, why)
            verdicts.append(verdict)
            cash -= await self._apply(verdict, review, held.get(ticker), portfolio, cash)
        return verdicts

    async def _ask_reviewer(
        self, reviews: Sequence[PositionReview], context: Mapping[str, object]
    ) -> tuple[dict[str, ReviewVerdict], str]:
        if self._reviewer is None:
            return {}, "no reviewer"
        try:
            verdicts = await wait_for(
                self._clock,
                self._reviewer.review(reviews, context),
                self._config.review_timeout_secs,
            )
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            # expected while Claude is unavailable (no key, breaker open): one line, every 3 min;
            # the traceback goes to debug so a real bug can still be traced
            why = f"reviewer failed: {type(exc).__name__}: {exc}"[:300]
            log.warning("tracker: %s; the fallback score decides", why)
            log.debug("tracker: reviewer failure", exc_info=True)
            return {}, why
        asked = {r.ticker for r in reviews}
        answered: dict[str, ReviewVerdict] = {}
        for verdict in verdicts:
            if verdict.ticker not in asked or verdict.ticker in answered:
                log.warning(
                    "tracker: reviewer verdict for %s ignored (not asked, or twice)", verdict.ticker
                )
                continue
            answered[verdict.ticker] = verdict
        return answered, "reviewer gave no verdict"

    def _fallback(self, review: PositionReview, why: str) -> FallbackVerdict:
        own = self._tracker.recent_prices(review.ticker)
        btc = self._tracker.btc_change_1h_pct()
        return scored_fallback(review, own, btc, self._config, why)

    async def _apply(
        self,
        verdict: Verdict,
        review: PositionReview,
        held: PositionDetail | None,
        portfolio: float,
        cash: float,
    ) -> float:
        """Act on one verdict; returns the cash an ADD committed (0 otherwise)."""
        if log.isEnabledFor(logging.INFO):  # the fallback's reason is written when read
            log.info(
                "tracker: %s %s by %s: %s",
                verdict.action.value,
                verdict.ticker,
                verdict.decided_by,
                verdict.reason,
            )
        if verdict.action is ReviewAction.EXIT:
            reason = (
                ExitReason.AGENT_EXIT
                if verdict.decided_by == "claude"
                else ExitReason.FALLBACK_EXIT
            )
            await self._tracker.exit_position(
                verdict.ticker, reason, reference_price=review.mark_price
            )
        elif verdict.action is ReviewAction.ADD:
            return await self._add(verdict, review.mark_price, held, portfolio, cash)
        return 0.0

    async def _add(
        self,
        verdict: Verdict,
        price: float,
        held: PositionDetail | None,
        portfolio: float,
        cash: float,
    ) -> float:
        """Place the ADD (capped: see ``add_size``); returns the notional it committed."""
        ticker = verdict.ticker
        if self._halted():
            log.warning("tracker: ADD %s skipped: trading is halted", ticker)
            return 0.0
        if held is None:
            log.warning("tracker: ADD %s skipped: the broker holds no such position", ticker)
            return 0.0
        if await self._add_still_open(ticker):
            log.info("tracker: ADD %s skipped: the previous ADD order is still open", ticker)
            return 0.0
        resting_usd = sum(
            order.notional_usd
            for order in await self._broker.get_open_orders()
            if order.ticker == ticker and order.side == "buy"
        )  # a decision's BUY still resting will be held too: the cap counts it
        size = add_size(portfolio, cash, held.quantity * price + resting_usd, self._config)
        if size.notional_usd < self._config.min_order_usd:
            log.info(
                "tracker: ADD %s skipped: %.2f USD allowed (limited by %s) is below %.2f",
                ticker,
                size.notional_usd,
                size.limited_by,
                self._config.min_order_usd,
            )
            return 0.0
        position = self._tracker.positions[ticker]
        intent = OrderIntent(
            decision_id=f"add-{ticker}-{self._clock.now_ms()}",
            ticker=ticker,
            action=Action.BUY,
            notional_usd=size.notional_usd,
            reference_price=price,
            position_pct=min(1.0, size.notional_usd / portfolio),
            signal_weights=dict(position.signals),
            reasoning=verdict.reason[:4000],
        )
        (result,) = await self._broker.execute_decisions([intent])
        if result.status == "open":
            self._pending_adds[ticker] = result.client_order_id
        log.info(
            "tracker: ADD %s %.2f USD (limited by %s): %s",
            ticker,
            size.notional_usd,
            size.limited_by,
            result.status,
        )
        return size.notional_usd if result.status in ("open", "filled") else 0.0

    async def _add_still_open(self, ticker: str) -> bool:
        order_id = self._pending_adds.get(ticker)
        if order_id is None:
            return False
        result = await self._broker.lookup(order_id)
        if result is not None and result.status == "open":
            return True
        del self._pending_adds[ticker]
        return False

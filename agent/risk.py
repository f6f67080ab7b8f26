"""Risk caps applied to every decision, whoever made it. No model output can bypass them.

In order: ticker normalised and whitelisted (one decision per ticker), HOLDs dropped, SELLs need an
open position, BUYs sized as a *target allocation* (``position_pct`` of portfolio value, capped at
``max_position_pct``; an existing position is topped up, never doubled, and resting BUY orders count
as held: they become the position without another decision), then the total exposure cap
scaled by the regime (``max_total_exposure_pct x exposure_scale``), then available cash (minus a fee
buffer), then the exchange's minimum notional. Every change is recorded with its reason, so the
journal shows exactly what the caps did.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field

from agent.decision import AgentDecision, TradeDecision
from agent.snapshot import MarketSnapshot
from broker.port import Action, OrderIntent
from market.timeframes import normalized_ticker

RESTING_BUYS_COUNT = "resting buy orders count as held"


class RiskConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    max_position_pct: float = Field(0.20, gt=0.0, le=1.0)
    max_total_exposure_pct: float = Field(1.0, gt=0.0, le=3.0)
    min_notional_usd: float = Field(5.0, ge=0.0)
    min_notional_usd_by_ticker: dict[str, float] = Field(
        default_factory=lambda: {"BTC/USDT": 100.0}
    )
    cash_fee_buffer_pct: float = Field(0.5, ge=0.0, le=10.0)  # cash kept aside for fees, in %
    max_exposure_scale: float = Field(2.0, gt=0.0)


class RiskContext(BaseModel):
    """The portfolio and market the caps are checked against."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    whitelist: tuple[str, ...]
    portfolio_value_usd: float = Field(ge=0.0)
    #: free cash: the broker already holds back what resting orders need, so it is not taken twice
    cash_usd: float = Field(ge=0.0)
    position_notional_usd: dict[str, float] = Field(default_factory=dict)  # filled positions
    #: per ticker, the notional of BUY orders resting unfilled: exposure once they fill. Apart from
    #: positions because a SELL is sized by what is filled (the routine cancels these orders).
    resting_buy_notional_usd: dict[str, float] = Field(default_factory=dict)
    prices: dict[str, float | None] = Field(default_factory=dict)
    exposure_scale: float = 1.0
    #: crypto regime per ticker at decision time, carried on BUY intents (the entry's regime)
    regimes: dict[str, str] = Field(default_factory=dict)


class CapChange(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    ticker: str
    what: str  # e.g. "position_pct", "notional_usd", "dropped", "ticker"
    before: str
    after: str
    reason: str


class RiskOutcome(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    intents: tuple[OrderIntent, ...]
    changes: tuple[CapChange, ...]

    @property
    def dropped(self) -> tuple[CapChange, ...]:
        return tuple(c for c in self.changes if c.what == "dropped")


class TickerError(ValueError):
    pass


def normalize_ticker(raw: str) -> str:
    """``BTC/USDT:USDT``, ``btc/usdt``, ``BTCUSDT`` -> ``BTC/USDT`` (``normalized_ticker``)."""
    try:
        return normalized_ticker(raw)
    except ValueError as exc:
        raise TickerError(str(exc)) from None


def apply_risk_caps(
    decision: AgentDecision, ctx: RiskContext, config: RiskConfig, decision_id: str
) -> RiskOutcome:
    changes: list[CapChange] = []
    chosen = _whitelisted(decision.decisions, ctx.whitelist, changes)
    sells = [d for d in chosen if d.action is Action.SELL]
    buys = [d for d in chosen if d.action is Action.BUY]  # HOLDs ask for nothing

    intents: list[OrderIntent] = []
    exposure = dict(ctx.position_notional_usd)
    for sell in sells:
        intent = _sell_intent(sell, ctx, decision_id, changes)
        if intent is not None:
            intents.append(intent)
            exposure.pop(sell.ticker, None)
    for ticker, resting in ctx.resting_buy_notional_usd.items():
        exposure[ticker] = exposure.get(ticker, 0.0) + max(resting, 0.0)

    scale = _exposure_scale(ctx.exposure_scale, config, changes)
    room_usd = config.max_total_exposure_pct * scale * ctx.portfolio_value_usd - sum(
        exposure.values()
    )
    cash_usd = ctx.cash_usd * (1.0 - config.cash_fee_buffer_pct / 100.0)
    for buy in sorted(buys, key=lambda d: (-d.confidence, d.ticker)):
        intent = _buy_intent(buy, ctx, config, decision_id, room_usd, cash_usd, changes)
        if intent is not None:
            intents.append(intent)
            room_usd -= intent.notional_usd
            cash_usd -= intent.notional_usd
    return RiskOutcome(intents=tuple(intents), changes=tuple(changes))


def _whitelisted(
    decisions: Sequence[TradeDecision], whitelist: Sequence[str], changes: list[CapChange]
) -> list[TradeDecision]:
    allowed = set(whitelist)
    seen: set[str] = set()
    out: list[TradeDecision] = []
    for d in decisions:
        try:
            ticker = normalize_ticker(d.ticker)
        except TickerError as exc:
            changes.append(_drop(d.ticker, d, f"invalid ticker: {exc}"))
            continue
        if ticker != d.ticker:
            changes.append(
                CapChange(
                    ticker=ticker, what="ticker", before=d.ticker, after=ticker, reason="normalised"
                )
            )
        if ticker not in allowed:
            changes.append(_drop(ticker, d, f"not in the whitelist {sorted(allowed)}"))
            continue
        if ticker in seen:
            changes.append(_drop(ticker, d, "a second decision for the same ticker"))
            continue
        seen.add(ticker)
        # frozen, and its ticker set already: a copy with the same ticker would equal it
        out.append(d if ticker == d.ticker else d.model_copy(update={"ticker": ticker}))
    return out


def _sell_intent(
    sell: TradeDecision, ctx: RiskContext, decision_id: str, changes: list[CapChange]
) -> OrderIntent | None:
    held = ctx.position_notional_usd.get(sell.ticker, 0.0)
    price = ctx.prices.get(sell.ticker)
    if held <= 0.0:
        changes.append(_drop(sell.ticker, sell, "no open position to sell"))
        return None
    if price is None or not price > 0.0:
        changes.append(_drop(sell.ticker, sell, "no current market price"))
        return None
    return OrderIntent(
        decision_id=decision_id,
        ticker=sell.ticker,
        action=Action.SELL,
        notional_usd=held,
        reference_price=price,
        position_pct=0.0,
        signal_weights=sell.signal_weights,
        reasoning=sell.reasoning,
    )


def _buy_intent(
    buy: TradeDecision,
    ctx: RiskContext,
    config: RiskConfig,
    decision_id: str,
    room_usd: float,
    cash_usd: float,
    changes: list[CapChange],
) -> OrderIntent | None:
    price = ctx.prices.get(buy.ticker)
    if price is None or not price > 0.0:
        changes.append(_drop(buy.ticker, buy, "no current market price"))
        return None
    pct = buy.position_pct
    if pct > config.max_position_pct:
        changes.append(
            CapChange(
                ticker=buy.ticker,
                what="position_pct",
                before=f"{pct:g}",
                after=f"{config.max_position_pct:g}",
                reason=f"max position {config.max_position_pct:.0%}",
            )
        )
        pct = config.max_position_pct
    wanted = _top_up_usd(buy.ticker, pct, ctx, changes)
    if wanted <= 0.0:
        why = f"already holds {pct:.0%} or more of the portfolio"
        if pct * ctx.portfolio_value_usd > ctx.position_notional_usd.get(buy.ticker, 0.0):
            why += f" ({RESTING_BUYS_COUNT})"  # the position alone is below the target
        changes.append(_drop(buy.ticker, buy, why))
        return None
    notional = wanted
    for limit, why in ((room_usd, "total exposure cap (scaled by regime)"), (cash_usd, "cash")):
        if notional > limit:
            changes.append(
                CapChange(
                    ticker=buy.ticker,
                    what="notional_usd",
                    before=f"{notional:.2f}",
                    after=f"{max(limit, 0.0):.2f}",
                    reason=why,
                )
            )
            notional = max(limit, 0.0)
    minimum = config.min_notional_usd_by_ticker.get(buy.ticker, config.min_notional_usd)
    if notional < minimum or notional <= 0.0:
        changes.append(_drop(buy.ticker, buy, f"notional {notional:.2f} below minimum {minimum:g}"))
        return None
    return OrderIntent(
        decision_id=decision_id,
        ticker=buy.ticker,
        action=Action.BUY,
        notional_usd=notional,
        reference_price=price,
        position_pct=pct,
        signal_weights=buy.signal_weights,
        regime=ctx.regimes.get(buy.ticker, ""),
        reasoning=buy.reasoning,
    )


def _top_up_usd(ticker: str, pct: float, ctx: RiskContext, changes: list[CapChange]) -> float:
    """What a BUY to ``pct`` of the portfolio adds: the target less what is held and what resting
    BUYs will add when they fill (recorded when those orders are what reduces it)."""
    held_usd = ctx.position_notional_usd.get(ticker, 0.0)
    resting_usd = max(ctx.resting_buy_notional_usd.get(ticker, 0.0), 0.0)
    before = pct * ctx.portfolio_value_usd - held_usd
    after = before - resting_usd
    if resting_usd > 0.0 and before > 0.0 and after > 0.0:
        changes.append(
            CapChange(
                ticker=ticker,
                what="notional_usd",
                before=f"{before:.2f}",
                after=f"{after:.2f}",
                reason=f"{RESTING_BUYS_COUNT} ({resting_usd:.2f} USD resting)",
            )
        )
    return after


def _exposure_scale(scale: float, config: RiskConfig, changes: list[CapChange]) -> float:
    if not math.isfinite(scale) or scale < 0.0:
        changes.append(
            CapChange(
                ticker="*",
                what="exposure_scale",
                before=repr(scale),
                after="0",
                reason="invalid exposure scale: no new exposure",
            )
        )
        return 0.0
    if scale > config.max_exposure_scale:
        changes.append(
            CapChange(
                ticker="*",
                what="exposure_scale",
                before=f"{scale:g}",
                after=f"{config.max_exposure_scale:g}",
                reason="capped",
            )
        )
        return config.max_exposure_scale
    return scale


def _drop(ticker: str, decision: TradeDecision, reason: str) -> CapChange:
    return CapChange(
        ticker=ticker, what="dropped", before=decision.action.value, after="none", reason=reason
    )


def risk_context(snapshot: MarketSnapshot, tickers: tuple[str, ...]) -> RiskContext:
    """The caps' view of the snapshot. Resting BUYs are exposure too: without them a BUY asked
    again before the first one fills would be placed in full a second time."""
    resting: dict[str, float] = {}
    for order in snapshot.pending_orders:
        if order.side == "buy":
            resting[order.ticker] = resting.get(order.ticker, 0.0) + order.notional_usd
    return RiskContext(
        whitelist=tickers,
        portfolio_value_usd=snapshot.portfolio_value or 0.0,
        cash_usd=snapshot.cash or 0.0,
        position_notional_usd={
            p.ticker: p.quantity * (p.mark_price or p.entry_price) for p in snapshot.open_positions
        },
        resting_buy_notional_usd=resting,
        prices={t: view.price for t, view in snapshot.tickers.items()},
        exposure_scale=snapshot.exposure_scale,
        regimes=dict(snapshot.regime.crypto) if snapshot.regime is not None else {},
    )
